"""``otel-loopguard serve`` with no environment: verdict lines on stderr, a status page, no export to itself."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._child import serve_command
from ._loop_request import loop_request
from ._support import post

_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
_STUCK = "loopguard: trace 4bf92f35\u2026 agent weather_agent: working -> stuck (period 1, search x3) nudge"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(args: list[str], env: dict[str, str] | None = None, **popen: Any) -> Iterator[tuple[Any, str]]:
    with serve_command(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--idle", "600", *args],
                       env or {}, **popen) as (proc, line):
        yield proc, line


def _http_port(line: str) -> int:
    match = re.search(r"http 127\.0\.0\.1:(\d+)", line)
    assert match, line
    return int(match.group(1))


def _finish(proc: Any) -> str:
    """SIGTERM (serve drains and exits 0); everything serve wrote on stderr after its first line."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    return str(proc.stderr.read())


def test_no_environment_prints_the_line_and_shows_the_trace() -> None:
    """With no variable set, serve prints the stuck line, says verdicts stay local, exports nothing, and its
    status page lists the trace."""
    with _serve([]) as (proc, line):
        status = re.search(r"status page http://127\.0\.0\.1:(\d+)/", line)
        assert status, line
        assert post(_http_port(line), loop_request(_TRACE), "application/json")[0] == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{status.group(1)}/traces.json", timeout=60) as response:
            doc = json.loads(response.read())
        rest = _finish(proc)
    assert [t["trace_id"] for t in doc["traces"]] == [_TRACE]
    assert _STUCK in rest.splitlines()
    assert "otel-loopguard serve: verdicts stay here" in rest
    assert "Failed to export" not in rest and "UNIMPLEMENTED" not in rest


def test_quiet_prints_no_verdict_line() -> None:
    """--quiet turns the verdict lines off (the trace is still judged)."""
    with _serve(["--quiet"]) as (proc, line):
        post(_http_port(line), loop_request(_TRACE), "application/json")
        rest = _finish(proc)
    assert "loopguard: trace" not in rest
    assert "stopped after 7 spans, 1 traces" in rest


def test_console_exporter_variable_is_honoured() -> None:
    """OTEL_LOGS_EXPORTER=console prints the verdict event through the SDK's console exporter on stdout."""
    env = {"OTEL_LOGS_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    with _serve([], env, stdout=subprocess.PIPE) as (proc, line):
        post(_http_port(line), loop_request(_TRACE), "application/json")
        rest = _finish(proc)
        out = proc.stdout.read()
    assert '"event_name": "loopguard.verdict"' in out
    assert f'"trace_id": "0x{_TRACE}"' in out
    assert "verdicts stay here" not in rest


def test_an_endpoint_that_is_its_own_receiver_is_refused() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT naming serve's own gRPC receiver is not exported to, and serve says why once."""
    port = _free_port()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{port}"}
    with serve_command(["--grpc", f"127.0.0.1:{port}", "--http", "127.0.0.1:0", "--idle", "600"], env) as (proc, _):
        rest = _finish(proc)
    for signal_name in ("logs", "metrics"):
        assert (f"otel-loopguard serve: not exporting {signal_name} to http://localhost:{port}: that is this "
                f"server's own OTLP/gRPC receiver (--grpc)") in rest
    assert "UNIMPLEMENTED" not in rest


def test_a_busy_port_names_the_receiver_and_the_flag() -> None:
    """A port in use gives one line naming the receiver, the address and the flag, and no gRPC log line."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with serve_command(["--grpc", f"127.0.0.1:{port}", "--http", ""], {}) as (proc, line):
            assert proc.wait(timeout=60) == 2
            rest = proc.stderr.read()
    assert (line + rest).splitlines() == [
        f"otel-loopguard: error: serve: cannot listen for OTLP/gRPC on 127.0.0.1:{port} (address in use); "
        "choose another with --grpc"]


def test_forward_never_sends_to_its_own_receiver() -> None:
    """--forward with the traces endpoint naming serve's own gRPC receiver is refused with one line (no loop)."""
    port = _free_port()
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none"}
    args = ["--grpc", f"127.0.0.1:{port}", "--http", "127.0.0.1:0", "--idle", "600", "--forward"]
    with serve_command(args, env) as (proc, line):
        assert post(_http_port(line), loop_request(_TRACE), "application/json")[0] == 200
        rest = _finish(proc)
    assert (f"otel-loopguard serve: not forwarding spans to http://127.0.0.1:{port}: that is this server's own "
            "OTLP/gRPC receiver (--grpc); set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to your collector") in rest
    # Each span was received once: nothing came back through the forwarder.
    assert "stopped after 7 spans, 1 traces" in rest


def test_forward_honours_traces_exporter_none() -> None:
    """OTEL_TRACES_EXPORTER=none turns --forward off, said once."""
    env = {"OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    with _serve(["--forward"], env) as (proc, _):
        rest = _finish(proc)
    assert rest.count("otel-loopguard serve: not forwarding spans: OTEL_TRACES_EXPORTER=none") == 1
