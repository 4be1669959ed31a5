"""``otel-loopguard serve`` attacked as a hostile or unlucky client would, over loopback: the figures of the README's
reliability table.

Run: ``.venv/bin/python tests/benchmarks/serve_attacks.py [ATTACK ...] [--repo PATH]`` with ATTACK among
``slowloris``, ``grpc-slowloris``, ``chunked``, ``huge-name``, ``out-of-order`` (all by default). ``--repo`` runs
the serve command of another checkout (for example the previous release) in the two slowloris attacks.

* ``slowloris``: serve as a child process with a 1 024 open-file limit (soft and hard); 1 000 connections to its
  HTTP receiver each send a request line and then one header byte a second, for ``--seconds``. Meanwhile a good
  client posts a valid OTLP/HTTP request on a new connection and exports over OTLP/gRPC every 0.5 s. Printed: the
  good requests answered and their latency, and when and how the holders were disconnected.
* ``grpc-slowloris``: the same with the 1 000 connections on the gRPC receiver (each sends the HTTP/2 connection
  preface one byte a second).
* ``chunked``: spans/s of OTLP/HTTP protobuf requests sent chunked (no Content-Length, as Node.js exporters send
  them) against the same requests with a Content-Length, interleaved over rounds, 4 client processes, to the HTTP
  receiver decoding and discarding (judging would hide the cost of the framing).
* ``huge-name``: two looping traces, one of whose tool name has 5 MiB, through serve's own providers to a gRPC
  backend with the default 4 MiB limit: the events delivered and the largest log and metric requests.
* ``out-of-order``: one good client posts in-order batches of 200 spans for ``--seconds`` (at most 10), alone and
  while 4 client processes send single-span requests of their own traces of 1 000 tool calls in reverse start order
  (every span starts before the spans of its trace already received), alternately over rounds: the good client's
  spans/s and request latency.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.http_server import OTLPHTTPServer
from otel_loopguard.serve.server import Server
from otel_loopguard.serve.settings import ServeSettings
from tests.benchmarks.serve import trace_spans
from tests.benchmarks.serve_clients import EXPORT, PROTOBUF, Clients, Job, span_rate, summary
from tests.serve._child import first_line, serve_argv
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.proto_spans import kv, request_bytes, tool_span

REPO = Path(__file__).resolve().parents[2]
FILE_LIMIT = 1024
HOLDERS = 1000
ATTACK_CALLS = 1000  # tool spans per trace of an out-of-order sender


# -- slowloris -------------------------------------------------------------------------------------------------


def _serve_child(repo: Path, receiver: RecordingOTLPReceiver) -> tuple[subprocess.Popen[str], int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}", "PYTHONPATH": str(repo)})
    # The limit is set by the child itself: a preexec_fn would fork this process, which runs gRPC (tests/serve/_child.py).
    proc = subprocess.Popen(
        serve_argv(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--idle", "600"], FILE_LIMIT),
        cwd=repo, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = first_line(proc.stderr)
    match = re.search(r"grpc 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
    assert match, line
    print(f"  serve: {line.strip()}")
    return proc, int(match.group(1)), int(match.group(2))


class Holders:
    """``count`` connections that send ``opening`` and then one more byte of ``dribble`` a second (from its start,
    again and again), noting when each is closed."""

    def __init__(self, port: int, count: int, opening: bytes, dribble: bytes) -> None:
        self._dribble = dribble
        self.started = time.monotonic()
        self.sockets: list[socket.socket] = []
        self.connect_failures = 0
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(opening)
                sock.setblocking(False)
                self.sockets.append(sock)
            except OSError:
                self.connect_failures += 1
        self.closed_at: dict[int, float] = {}
        self._selector = selectors.DefaultSelector()  # epoll: select() cannot watch descriptors above 1 023
        for index, sock in enumerate(self.sockets):
            self._selector.register(sock, selectors.EVENT_READ, index)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _close(self, index: int) -> None:
        if index not in self.closed_at:
            self.closed_at[index] = time.monotonic() - self.started
            self._selector.unregister(self.sockets[index])

    def _run(self) -> None:
        next_byte = time.monotonic() + 1
        sent = 0
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                try:
                    if self.sockets[key.data].recv(4096) == b"":
                        self._close(key.data)
                except OSError:
                    self._close(key.data)
            if time.monotonic() >= next_byte:
                next_byte += 1
                byte = self._dribble[sent % len(self._dribble):][:1]
                sent += 1
                for index, sock in enumerate(self.sockets):
                    if index not in self.closed_at:
                        try:
                            sock.send(byte)
                        except OSError:
                            self._close(index)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.sockets:
            sock.close()


def _good_http(port: int, body: bytes) -> tuple[bool, float]:
    start = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status == 200, time.monotonic() - start
    except (OSError, http.client.HTTPException):
        return False, time.monotonic() - start


def _good_grpc(channel: grpc.Channel, body: bytes) -> tuple[bool, float]:
    start = time.monotonic()
    try:
        channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)(body, timeout=5)
        return True, time.monotonic() - start
    except grpc.RpcError:
        return False, time.monotonic() - start


def slowloris(repo: Path, seconds: float, target: str) -> None:
    """Holders on one receiver under a 1 024-file limit; good HTTP and gRPC requests every 0.5 s."""
    print(f"{target}: {HOLDERS} connections holding the {'gRPC' if target == 'grpc-slowloris' else 'HTTP'} "
          f"receiver, serve limited to {FILE_LIMIT} open files, {seconds:g} s")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, HOLDERS + 500)), hard))
    body = request_bytes(trace_spans(7, True, time.time_ns()))
    with RecordingOTLPReceiver() as receiver:
        proc, grpc_port, http_port = _serve_child(repo, receiver)
        try:
            if target == "grpc-slowloris":
                # The HTTP/2 connection preface, one byte a second: 21 s before it is complete.
                holders = Holders(grpc_port, HOLDERS, b"PRI", b" * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            else:
                holders = Holders(http_port, HOLDERS, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"a")
            print(f"  holders connected: {len(holders.sockets)} (connect failures: {holders.connect_failures}) in "
                  f"{time.monotonic() - holders.started:.1f} s")
            results: dict[str, list[tuple[float, bool, float]]] = {"http": [], "grpc": []}
            channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                tick = time.monotonic()
                at = tick - holders.started
                results["http"].append((at, *_good_http(http_port, body)))
                results["grpc"].append((at, *_good_grpc(channel, body)))
                time.sleep(max(0.0, 0.5 - (time.monotonic() - tick)))  # the good clients' pace
            channel.close()
            holders.stop()
            for kind, rows in results.items():
                ok = [latency for _, success, latency in rows if success]
                first = next((at for at, success, _ in rows if success), None)
                latency = (f"median {statistics.median(ok) * 1000:.1f} ms, max {max(ok) * 1000:.1f} ms"
                           if ok else "none answered")
                print(f"  good {kind}: {len(ok)}/{len(rows)} answered ({latency}); first success at "
                      f"{'never' if first is None else f'{first:.1f} s'}")
            closes = sorted(holders.closed_at.values())
            if closes:
                early = sum(1 for t in closes if t < 5)
                how = "refused at gRPC's connection cap" if target == "grpc-slowloris" else "replaced at the cap"
                rest = f"{statistics.median(closes[early:]):.1f} s median" if closes[early:] else "-"
                print(f"  holders closed by serve: {len(closes)}/{len(holders.sockets)} ({early} within 5 s: {how}; "
                      f"the rest at {rest})")
            else:
                print(f"  holders closed by serve: 0/{len(holders.sockets)}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                print("  serve did not stop on SIGTERM within 30 s: killed")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- chunked -------------------------------------------------------------------------------------------------------


def _server(receiver: RecordingOTLPReceiver | None = None) -> tuple[Server, LoggerProvider, MeterProvider]:
    logger_provider = LoggerProvider()
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    server = Server(LoopGuardConfig(), grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", idle=60,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    return server, logger_provider, meter_provider


def _bodies(traces: int, offset: int, batch: int = 200) -> tuple[list[bytes], int]:
    spans: list[trace_pb2.Span] = []
    t0 = time.time_ns()
    for n in range(traces):
        spans.extend(trace_spans(offset + n, n % 2 == 0, t0))
    return [request_bytes(spans[i:i + batch]) for i in range(0, len(spans), batch)], len(spans)


def chunked(clients: Clients, rounds: int = 7, traces: int = 400) -> None:
    """Chunked against Content-Length bodies, interleaved, on the HTTP receiver with a sink that counts and discards
    the decoded spans (judging would hide the difference in framing)."""
    received = [0]

    def count_spans(spans: list[Any], body: bytes, content_type: str, peer: str) -> None:
        received[0] += len(spans)

    receiver = OTLPHTTPServer(("127.0.0.1", 0), count_spans, lambda: None, ServeSettings())
    receiver.start()
    port = receiver.server_address[1]
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu_rates: dict[bool, list[float]] = {False: [], True: []}
    offset = 1
    for round_no in range(rounds + 1):
        for chunk in ((False, True) if round_no % 2 else (True, False)):
            bodies, count = _bodies(traces, offset)
            offset += traces
            before = received[0]
            cpu = _cpu()
            results = clients.run([Job("http", port, bodies[i::len(clients)], chunked=chunk)
                                   for i in range(len(clients))])
            cpu = _cpu() - cpu
            assert all(r is not None and r.errors == 0 for r in results), results
            assert received[0] - before == count
            if round_no:
                rates[chunk].append(span_rate(results, count))
                cpu_rates[chunk].append(count / cpu)
    receiver.stop()
    ratios = [c / n for c, n in zip(rates[True], rates[False])]
    cpu_ratios = [c / n for c, n in zip(cpu_rates[True], cpu_rates[False])]
    print(f"chunked: {rounds} rounds of {traces * 11} spans each way ({traces * 11 // 200 + 1} requests, chunks of 16 KiB),"
          f" {len(clients)} client processes, receiver decoding and discarding")
    print(f"  Content-Length {summary(rates[False])} spans/s; chunked {summary(rates[True])} spans/s; "
          f"chunked/Content-Length {summary(ratios, '{:.2f}')}")
    print(f"  per CPU-second of the receiver: Content-Length {summary(cpu_rates[False])}, chunked "
          f"{summary(cpu_rates[True])}; chunked/Content-Length {summary(cpu_ratios, '{:.2f}')}")


# -- huge tool name ------------------------------------------------------------------------------------------------


def huge_name() -> None:
    """A 5 MiB tool name through serve's own providers to a 4 MiB-limited gRPC backend."""
    from otel_loopguard.sdk.providers import build_providers, service_resource

    huge = "huge_tool_" + "x" * (5 * 1024 * 1024)
    with RecordingOTLPReceiver() as receiver:
        os.environ.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}",
                           "OTEL_BLRP_SCHEDULE_DELAY": "600000", "OTEL_METRIC_EXPORT_INTERVAL": "600000"})
        logger_provider, meter_provider = build_providers(os.environ, service_resource("otel-loopguard"))
        server = Server(LoopGuardConfig(), grpc_address=None, http_address="127.0.0.1:0", idle=600,
                        logger_provider=logger_provider, meter_provider=meter_provider)
        t0 = 1_767_225_600 * 10**9
        with server:
            conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
            for trace_no, tool in ((1, huge), (2, "search")):
                for i in range(4):
                    span = trace_pb2.Span(
                        trace_id=trace_no.to_bytes(16, "big"), span_id=(trace_no * 64 + 2 + i).to_bytes(8, "big"),
                        name="execute_tool", start_time_unix_nano=t0 + i * 10**9,
                        end_time_unix_nano=t0 + i * 10**9 + 1000,
                        attributes=[kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", tool),
                                    kv("gen_ai.tool.call.arguments", "{}"), kv("gen_ai.tool.call.result", "[]")])
                    conn.request("POST", "/v1/traces", request_bytes([span]), {"Content-Type": PROTOBUF})
                    response = conn.getresponse()
                    response.read()
                    assert response.status == 200
            logger_provider.force_flush(30_000)
            meter_provider.force_flush(30_000)
        logger_provider.shutdown()
        meter_provider.shutdown()
        events = [r for r in receiver.log_records() if r["event_name"] == "loopguard.verdict"]
        by_trace = {r["trace_id"][-1] for r in events}
        largest = {kind: max((r.request.ByteSize() for r in receiver.received(kind)), default=0)
                   for kind in ("logs", "metrics")}
        names = {p["attributes"].get("gen_ai.tool.name", "") for p in receiver.metric_points()
                 if p["name"] == "loopguard.tool_calls"}
        print("huge-name: a 5 MiB tool name in 4 looping spans, another looping trace, one log batch")
        print(f"  verdict events at the backend: {len(events)} (traces {sorted(by_trace)}); largest log request "
              f"{largest['logs']:,} bytes, largest metric request {largest['metrics']:,} bytes; tool-name "
              f"attribute lengths {sorted(len(n) for n in names)}")


# -- out-of-order single spans ---------------------------------------------------------------------------------


def _reverse_singles(attacker: int, traces: int, calls: int) -> list[bytes]:
    """Single-span requests of ``traces`` traces of ``calls`` tool spans each (distinct calls), every trace in
    reverse start order: each span starts before every span of its trace already sent."""
    bodies = []
    t0 = time.time_ns()
    for n in range(traces):
        trace_no = 10_000_000 * (attacker + 1) + n
        spans = [tool_span(trace_no, i, t0, arguments=f'{{"page": {i}}}', result=f'{{"rows": [{i}]}}')
                 for i in range(calls)]
        bodies.extend(request_bytes([span]) for span in reversed(spans))
    return bodies


def out_of_order(clients: Clients, seconds: float, rounds: int = 3) -> None:
    """The good client's spans/s and latency alone and under 4 out-of-order single-span senders, alternately."""
    server, logger_provider, meter_provider = _server()
    attackers = len(clients) - 1
    figures: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    attack_requests: list[int] = []
    offset = 1
    with server:
        for round_no in range(rounds * 2 + 1):
            attacked = round_no % 2 == 1
            bodies, _ = _bodies(4000, offset)  # more than the good client can send in the time
            offset += 4000
            good = Job("http", server.http_port, bodies, record_latency=True, seconds=seconds)
            jobs: list[Job | None] = [good]
            for a in range(attackers):
                jobs.append(Job("http", server.http_port, _reverse_singles(round_no * 10 + a, 20, ATTACK_CALLS),
                                seconds=seconds) if attacked else None)
            results = clients.run(jobs)
            done = results[0]
            assert done is not None and done.errors == 0, done
            server.finish_all()
            if round_no == 0:
                continue  # warm-up
            spans = done.sent * 200
            latencies = sorted(done.latencies)
            figures[attacked].append((spans / (done.end - done.start), statistics.median(latencies) * 1000,
                                      latencies[int(len(latencies) * 0.99)] * 1000))
            if attacked:
                attack_requests.append(sum(r.sent for r in results[1:] if r is not None))
    stats = server.stats()
    logger_provider.shutdown()
    meter_provider.shutdown()
    print(f"out-of-order: one good client (batches of 200 spans, in order) for {seconds:g} s, alone and with "
          f"{attackers} clients sending single spans in reverse start order; {rounds} rounds each")
    for attacked, rows in figures.items():
        print(f"  {'attacked' if attacked else 'alone   '}: {summary([r[0] for r in rows])} spans/s; request latency "
              f"median {summary([r[1] for r in rows], '{:.1f}')} ms, p99 {summary([r[2] for r in rows], '{:.1f}')} ms")
    ratio = statistics.median(r[0] for r in figures[True]) / statistics.median(r[0] for r in figures[False])
    print(f"  attacked/alone throughput {ratio:.2f}; attackers sent {summary(attack_requests)} single-span requests "
          f"a round; serve re-judged traces {stats.rejudged_traces} times in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", default=["slowloris", "grpc-slowloris", "chunked", "huge-name",
                                                        "out-of-order"])
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose serve command the slowloris runs use")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of a slowloris or out-of-order run")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for attack in args.attacks:
        if attack in ("slowloris", "grpc-slowloris"):
            slowloris(args.repo, args.seconds, attack)
        elif attack == "chunked":
            with Clients(4) as clients:
                chunked(clients)
        elif attack == "huge-name":
            huge_name()
        elif attack == "out-of-order":
            with Clients(5) as clients:
                out_of_order(clients, min(args.seconds, 10.0))
        else:
            parser.error(f"unknown attack {attack!r}")


if __name__ == "__main__":
    main()
