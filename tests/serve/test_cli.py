"""``python -m otel_loopguard.cli serve`` as a child process: SIGTERM drains, flushes and exits 0."""

from __future__ import annotations

import io
import re
import signal

from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._child import first_line, serve_command
from ._support import FIXTURE_FILES, post


def test_sigterm_drains_pending_verdict_and_exits_zero() -> None:
    """A verdict still in the batch queue and the drained trace's metrics reach the OTLP backend on SIGTERM."""
    path = next(p for p in FIXTURE_FILES if p.name == "langgraph_genai__same_call_loop.json")
    with RecordingOTLPReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}",
            # Long delays: nothing leaves before shutdown, so arrival proves the drain-and-flush path.
            "OTEL_BLRP_SCHEDULE_DELAY": "600000",
            "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        }
        with serve_command(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--idle", "600"], env) as (proc, line):
            match = re.search(r"grpc 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
            assert match, line
            status, _, _ = post(int(match.group(2)), path.read_bytes(), "application/json")
            assert status == 200
            assert receiver.received("logs") == []
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
            assert proc.stderr is not None
            rest = proc.stderr.read()
        assert "stopped after" in rest, rest
        records = [r for r in receiver.log_records() if r["event_name"] == "loopguard.verdict"]
        assert [r["attributes"]["loopguard.verdict"] for r in records][:1] == ["stuck"]
        assert records[0]["resource"]["service.name"] == "otel-loopguard"
        assert records[0]["trace_id"] == "02361ef47c1be9228e741e6010d70a0d"
        names = {p["name"] for p in receiver.metric_points()}
        assert {"loopguard.verdicts", "loopguard.trace.steps", "loopguard.tool_calls"} <= names


def test_serve_first_line_is_found_after_a_library_line() -> None:
    """What gRPC's poller wrote first in a child forked from a process running gRPC (tests/serve/_child.py) is
    skipped; an ended stream gives back what it held."""
    grpc_line = ("E1203 22:55:00.055418   29389 ev_epoll1_linux.cc:373] (event_engine) Epoll1Poller:0x55fb99bcea90 "
                 "encountered epoll_wait error: Bad file descriptor\n")
    listening = "otel-loopguard serve: listening on grpc 127.0.0.1:1, http 127.0.0.1:2 (plain)\n"
    assert first_line(io.StringIO(grpc_line + listening + "later\n")) == listening
    assert first_line(io.StringIO(grpc_line)) == grpc_line
