"""The serve red team, round three: each attack of issue 28 against a real ``otel-loopguard serve`` process.

Every attack starts its own server on 127.0.0.1 (ports chosen by the kernel, read from the "listening on" line),
sends what a hostile or broken sender would, and checks the server's answers, memory (``/proc/<pid>/status``) and
output. The whole module runs in well under a minute; docs/hostile-input.md lists the figures.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

T0 = 1_767_225_600 * 10**9
DEADLINE = 60.0  # a bound on any one wait; every wait ends as soon as its condition holds


class Serve:
    """A running ``otel-loopguard serve`` (HTTP only) whose stderr is collected in the background."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
        self.proc = subprocess.Popen(
            # No status page: its fixed default port (4319) would collide with another test run on the machine.
            [sys.executable, "-m", "otel_loopguard.cli", "serve", "--grpc", "", "--http", "127.0.0.1:0", "--status", "",
             *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**environ, **(env or {})})
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._read, daemon=True).start()
        assert self._ready.wait(DEADLINE) and self.port, "".join(self.lines)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            found = re.search(r"listening on http 127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                self._ready.set()
        self._ready.set()

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """POST OTLP/JSON to /v1/traces; returns the status and the decoded answer."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/traces", data=body, method="POST",
                                         headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=DEADLINE) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, {"error": exc.read().decode("utf-8", "replace")}

    def rss_mb(self) -> float:
        """The server's resident memory now, MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def terminate(self) -> int:
        """SIGTERM, then the exit status (SIGKILL only past the deadline, which fails the caller's checks)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    @property
    def output(self) -> str:
        return "".join(self.lines)


@contextmanager
def serve(*args: str, env: dict[str, str] | None = None) -> Iterator[Serve]:
    server = Serve(*args, env=env)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def span(trace: int, span_id: int, attributes: dict[str, Any]) -> dict[str, Any]:
    """One OTLP/JSON span at ``T0 + span_id`` ns."""
    return {"traceId": f"{trace:032x}", "spanId": f"{span_id:016x}", "name": "execute_tool t",
            "startTimeUnixNano": str(T0 + span_id * 10**9), "endTimeUnixNano": str(T0 + span_id * 10**9 + 10**8),
            "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"doubleValue": v}}
                           for k, v in attributes.items()]}


def request(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}]}
                      ).encode()


def tool(name: str = "search", args: str = '{"q": 1}', result: str = "same", **extra: Any) -> dict[str, Any]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.arguments": args,
            "gen_ai.tool.call.result": result, **extra}


def test_unread_key_flood_keeps_memory_and_log_bounded() -> None:
    """Attack 1: 20 requests, each one tool span with 12 content-like keys of 400 kB carrying ESC and a newline
    (96 MB of keys). The server's RSS grows by less than half of that; its log holds one escaped line per
    request, each under 2 100 characters (before: all keys logged and kept whole, RSS 61 -> 915 MB for 60 requests
    of 12 keys of 1.2 MB)."""
    with serve("--idle", "0.2") as server:
        server.post(request(span(1, 1, tool())))
        before = server.rss_mb()
        for r in range(20):
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
            attrs.update({f"acme.\x1b[2J\n{r:03d}{k:02d}{'x' * 400_000}_input": "v" for k in range(12)})
            status, _ = server.post(request(span(100 + r, 1, attrs)))
            assert status == 200
        grown = server.rss_mb() - before
        assert server.terminate() == 0
    warnings = [line for line in server.lines if "attributes no convention reads" in line]
    assert len(warnings) == 20
    assert all(len(line) < 2100 and "\x1b" not in line for line in warnings)
    assert grown < 48, f"RSS grew by {grown:.0f} MiB"
    print(f"attack 1: RSS grew {grown:.1f} MiB for 96 MB of keys; log {len(server.output)} characters")


def test_zero_ids_are_rejected_and_counted_in_the_answer() -> None:
    """Attack 3: all-zero trace and span ids are answered with partial_success rejected_spans and a message."""
    with serve() as server:
        status, answer = server.post(request(span(0, 1, tool()), span(7, 0, tool()), span(7, 2, tool())))
        assert server.terminate() == 0
    assert status == 200
    assert answer["partialSuccess"] == {
        "rejectedSpans": "2", "errorMessage": "2 span(s) rejected: an all-zero trace id or span id is invalid in OTLP"}


class HungBackend:
    """A TCP listener that accepts connections and never answers (an OTLP backend that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_sigterm_with_a_hung_backend_is_bounded_and_says_what_was_dropped() -> None:
    """Attack 4: verdict events and metrics for a backend that never answers; SIGTERM with --shutdown-timeout 1
    exits (status 0) saying that pending data was dropped, without a traceback (before: 46 s, silently)."""
    backend = HungBackend()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{backend.port}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    try:
        with serve("--shutdown-timeout", "1", env=env) as server:
            for i in range(4):
                server.post(request(span(9, i + 1, tool())))
            status = server.terminate()
    finally:
        backend.close()
    assert status == 0, server.output
    assert "shutdown did not finish within 1 s (--shutdown-timeout)" in server.output
    assert "Traceback" not in server.output


def test_sigterm_while_receiving_exits_cleanly() -> None:
    """Attack 4b: SIGTERM while a client keeps posting: exit status 0 and no traceback in the output."""
    with serve() as server:
        stop = threading.Event()

        def flood() -> None:
            while not stop.is_set():
                try:
                    server.post(request(*(span(50, i + 1, tool(args=str(i))) for i in range(200))))
                except OSError:
                    return

        senders = [threading.Thread(target=flood, daemon=True) for _ in range(4)]
        for sender in senders:
            sender.start()
        server.post(request(span(51, 1, tool())))
        status = server.terminate()
        stop.set()
        for sender in senders:
            sender.join(DEADLINE)
    assert status == 0, server.output
    assert "Traceback" not in server.output and "InvalidStateError" not in server.output


TRACE = 0xABC
ACME, MALLORY = "acme-token-0123456789", "mallory-token-0123456789"


def _status(server: Serve, token: str | None = None) -> dict[str, Any]:
    """The status page's /traces.json of ``server`` (started with ``--status 127.0.0.1:0``)."""
    port = int(re.search(r"status page https?://[^:/]+:(\d+)/", server.output).group(1))  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request_ = urllib.request.Request(f"http://127.0.0.1:{port}/traces.json", headers=headers)
    with urllib.request.urlopen(request_, timeout=DEADLINE) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_another_sender_cannot_push_a_tenant_s_trace_into_a_loop(tmp_path: Path) -> None:
    """Attack 2: acme sends two identical calls in trace 0xabc; mallory, with its own token, sends 205 identical
    calls into the same trace id. Keyed by (tenant, trace id), acme's trace stays two calls and working, with no
    event; mallory's is its own (stuck, over the step budget)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"acme {ACME}\nmallory {MALLORY}\n")
    with serve("--bearer-token-file", str(tokens), "--status", "127.0.0.1:0", "--idle", "60") as server:
        assert server.post(request(*(span(TRACE, i, tool()) for i in (1, 2))),
                           {"Authorization": f"Bearer {ACME}"})[0] == 200
        assert server.post(request(*(span(TRACE, 100 + i, tool()) for i in range(205))),
                           {"Authorization": f"Bearer {MALLORY}"})[0] == 200
        doc = _status(server, ACME)
        assert server.terminate() == 0
    assert {t["tenant"]: (t["tool_calls"], t["verdict"]) for t in doc["traces"]} == {
        "acme": (2, "working"), "mallory": (205, "stuck")}
    assert {e["tenant"] for e in doc["events"]} == {"mallory"}


def test_a_lease_deadline_of_1e308_holds_only_max_seconds() -> None:
    """Attack 5: identical calls declaring a wait with deadline 1e308 are waiting while within lease.max_seconds
    (3600 s) of the first call's end (T0 + 1.1 s); two more at T0 + 4000 s are past it: the five are stuck."""
    wait: dict[str, Any] = {"loopguard.wait.owner": "approver", "loopguard.wait.deadline": 1e308}
    with serve("--status", "127.0.0.1:0", "--idle", "60") as server:
        assert server.post(request(*(span(TRACE, i, tool(**wait)) for i in (1, 2, 3))))[0] == 200
        first = _status(server)
        assert server.post(request(*(span(TRACE, i, tool(**wait)) for i in (4000, 4001))))[0] == 200
        second = _status(server)
        assert server.terminate() == 0
    assert [(t["tool_calls"], t["verdict"]) for t in first["traces"]] == [(3, "waiting")]
    assert [(t["tool_calls"], t["verdict"]) for t in second["traces"]] == [(5, "stuck")]
