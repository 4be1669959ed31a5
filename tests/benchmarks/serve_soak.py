"""Soak of ``otel-loopguard serve``: sustained loopback load with abuse interleaved, memory sampled throughout.

Run: ``.venv/bin/python tests/benchmarks/serve_soak.py [--seconds 60] [--max-traces 200] [--idle 0.5] ...``.
``tests/reliability/test_serve_load.py`` runs the same soak bounded by requests instead of seconds (see "Clock").

Load: ``--http-clients`` threads post OTLP/protobuf ``ExportTraceServiceRequest`` batches over persistent HTTP
connections and ``--grpc-clients`` threads export the same over gRPC. Every batch opens ``TRACES_PER_BATCH`` new
traces (an agent root and ``TOOL_SPANS`` GenAI tool spans each; every other one loops: same call, same result) and
carries the second half of the previous batch's traces, so traces stay open across requests, are finished by the
idle timer, or are evicted when more than ``max_traces`` are open. Trace ids never repeat.

Abuse: one more thread cycles through malformed protobuf, a truncated body, a body shorter than its
Content-Length, invalid JSON, a body over the limit, a wrong content type, a gzip bomb and bad gzip over HTTP, and
malformed and oversized messages over gRPC; each must get its OTLP error status (HTTP 400/413/415 with a
``google.rpc.Status`` body, gRPC INVALID_ARGUMENT/RESOURCE_EXHAUSTED), and a valid request right after it must
succeed.

Clock: the benchmark runs for ``--seconds`` of wall time, and serve's idle timer runs on the wall clock. A soak
bounded by ``requests`` instead (the test's) has every load client make exactly that many valid requests, and gives
serve a clock that counts the valid load requests made so far: ``idle`` is then a number of requests, and memory
samples are taken at request counts. What it does and measures is then the same on a fast machine and on a loaded
one; only how long it takes differs. serve's idle sweeper still runs on its own thread throughout.

Memory: every ``--sample-every`` seconds (or at ``samples`` evenly spaced request counts) the Python heap
(tracemalloc, current) and the process RSS (``/proc/self/statm``) are sampled with the server's counters. Growth is
the median of the last quarter of the run minus the median of the quarter right after warm-up (the first
``--warmup`` fraction of the run).

At the end the load stops, a looping trace is sent, and its ``stuck`` event must arrive; then (once the clock has
moved past ``idle``: the wall clock by itself, the request clock by a step the soak makes) serve's idle sweeper must
finish it.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import itertools
import json
import os
import socket
import statistics
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.rpc import status_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.server import Server, ServeStats
from tests.benchmarks.sinks import DropLogs
from tests.support.proto_spans import request_bytes, root_span, tool_span

TOOL_SPANS = 6
TRACES_PER_BATCH = 4
MAX_BODY = 64 * 1024
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
_PAGE = os.sysconf("SC_PAGE_SIZE")


# -- spans ----------------------------------------------------------------------------------------------------


def trace_halves(trace_no: int, looping: bool) -> tuple[list[trace_pb2.Span], list[trace_pb2.Span]]:
    """One agent trace cut in two: the first tool spans, then the rest and the root (in end order)."""
    t0 = time.time_ns()
    spans = [tool_span(trace_no, i, t0, arguments='{"query": "weather in Paris"}' if looping
                       else f'{{"query": "page {i}"}}', result='{"hits": []}' if looping else f'{{"hits": [{i}]}}')
             for i in range(TOOL_SPANS)]
    spans.append(root_span(trace_no, t0, TOOL_SPANS))
    half = TOOL_SPANS // 2
    return spans[:half], spans[half:]


def looping_trace(trace_no: int) -> bytes:
    """A whole trace of identical calls with identical results: serve must call it stuck."""
    first, rest = trace_halves(trace_no, True)
    return request_bytes(first + rest)


# -- clients --------------------------------------------------------------------------------------------------


class HTTPClient:
    """One persistent HTTP/1.1 connection; reconnects after the server closes it (it does after a refusal)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes, content_type: str = PROTOBUF,
             headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
        """POST to /v1/traces; returns (status, body, content type)."""
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self._conn.request("POST", "/v1/traces", body, {"Content-Type": content_type, **(headers or {})})
        response = self._conn.getresponse()
        data = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        return response.status, data, response.getheader("Content-Type", "")

    def close(self) -> None:
        """Drop the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class GRPCClient:
    """One gRPC channel exporting raw request bytes."""

    def __init__(self, port: int) -> None:
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._export = self._channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)

    def export(self, body: bytes) -> None:
        """Export one request (raises grpc.RpcError when refused)."""
        self._export(body, timeout=30)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()




def _http_status(expected_status: int, expected_code: int, content_type: str) -> Callable[[int, bytes, str], None]:
    def check(status: int, body: bytes, reply_type: str) -> None:
        assert status == expected_status, (status, body[:200])
        assert reply_type == content_type, reply_type
        code = json.loads(body)["code"] if content_type == JSON else status_pb2.Status.FromString(body).code
        assert code == expected_code, (code, body[:200])

    return check


def _short_body(port: int) -> tuple[int, bytes, str]:
    """A request whose body ends before its Content-Length (the client half-closes and waits for the answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: soak\r\nContent-Type: application/x-protobuf\r\n"
                     b"Content-Length: 4096\r\n\r\n\x0a\x05\x0a\x03")
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), body, headers.get("Content-Type", "")


@dataclass(frozen=True)
class Abuse:
    """One kind of bad request and the check its answer must pass."""

    name: str
    send: Callable[[HTTPClient, GRPCClient], None]


def _http_abuse(name: str, body: bytes, content_type: str, status: int, code: int,
                headers: dict[str, str] | None = None, reply_type: str | None = None) -> Abuse:
    check = _http_status(status, code, reply_type or content_type)
    return Abuse(name, lambda http_client, _: check(*http_client.post(body, content_type, headers)))


def _grpc_abuse(name: str, body: bytes, code: grpc.StatusCode) -> Abuse:
    def send(_: HTTPClient, grpc_client: GRPCClient) -> None:
        try:
            grpc_client.export(body)
        except grpc.RpcError as exc:
            assert exc.code() == code, exc
        else:
            raise AssertionError(f"{name}: no error")

    return Abuse(name, send)


def abuses(max_body: int) -> list[Abuse]:
    """Every kind of bad request the soak interleaves."""
    valid = looping_trace(1)
    check_short = _http_status(400, INVALID_ARGUMENT, PROTOBUF)
    return [
        _http_abuse("malformed-protobuf", b"\x0a\x05\x0a\x03\x0a\x01", PROTOBUF, 400, INVALID_ARGUMENT),
        _http_abuse("truncated-protobuf", valid[: len(valid) // 2], PROTOBUF, 400, INVALID_ARGUMENT),
        Abuse("short-body", lambda h, _: check_short(*_short_body(h.port))),
        _http_abuse("invalid-json", b'{"resourceSpans": [{"scopeSpans": [', JSON, 400, INVALID_ARGUMENT),
        _http_abuse("oversized", b"\x0a" * (max_body + 1024), PROTOBUF, 413, RESOURCE_EXHAUSTED),
        _http_abuse("wrong-content-type", b"hello", "text/plain", 415, INVALID_ARGUMENT, reply_type=PROTOBUF),
        _http_abuse("gzip-bomb", gzip.compress(b"\0" * (max_body * 16)), PROTOBUF, 413, RESOURCE_EXHAUSTED,
                    {"Content-Encoding": "gzip"}),
        _http_abuse("bad-gzip", b"\x1f\x8bnot really gzip", JSON, 400, INVALID_ARGUMENT, {"Content-Encoding": "gzip"}),
        _http_abuse("truncated-gzip", gzip.compress(valid)[:-12], PROTOBUF, 400, INVALID_ARGUMENT,
                    {"Content-Encoding": "gzip"}),
        _grpc_abuse("grpc-malformed", b"\x0a\x05\x0a\x03\x0a\x01", grpc.StatusCode.INVALID_ARGUMENT),
        _grpc_abuse("grpc-oversized", b"\x0a" * (max_body + 1024), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ]


# -- the soak -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One memory sample: where in the run (``at``, on the soak's clock: seconds, or load requests made), Python heap
    (tracemalloc), RSS, and RSS less tracemalloc's own bookkeeping (which grows as it meets new allocation stacks),
    in bytes; and the server's counters."""

    at: float
    heap: int
    rss: int
    rss_net: int
    stats: ServeStats


@dataclass(frozen=True)
class SoakResult:
    """What a soak did and measured.

    Attributes:
        seconds: load duration on the wall clock.
        length: load duration on the soak's clock (``seconds``, or the load requests made when bounded by requests).
        requests: valid requests accepted, by protocol (``http``, ``grpc``); ``spans``: spans in all accepted
            requests (load, the valid request after each abuse, the final trace); ``tool_spans``: the tool spans
            among them.
        abuse: bad requests sent and answered correctly, by kind; each was followed by a valid request that succeeded.
        samples: memory samples in time order.
        events: verdict events serve emitted (listener count); ``exported``: log records its logger exported.
        final_stuck: whether the looping trace sent after the load got its ``stuck`` event.
        final_idle: whether that trace was then finished by the idle timer (its report published).
        errors: failures in load or abuse threads (empty when everything answered as expected).
    """

    seconds: float
    length: float
    requests: dict[str, int]
    abuse: dict[str, int]
    samples: tuple[Sample, ...]
    stats: ServeStats
    events: int
    exported: int
    final_stuck: bool
    final_idle: bool
    errors: tuple[str, ...]
    max_traces: int
    warmup: float

    def window(self, lo: float, hi: float) -> list[Sample]:
        """Samples taken between fractions ``lo`` and ``hi`` of the run."""
        return [s for s in self.samples if lo * self.length <= s.at <= hi * self.length]

    def growth(self, field: str) -> tuple[float, float, int]:
        """(median right after warm-up, median of the last quarter, growth) of ``heap``, ``rss`` or ``rss_net``."""
        early = [getattr(s, field) for s in self.window(self.warmup, self.warmup + 0.25)]
        late = [getattr(s, field) for s in self.window(0.75, 1.0)]
        a, b = statistics.median(early), statistics.median(late)
        return a, b, int(b - a)


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


def run_soak(seconds: float | None = None, *, requests: int | None = None, max_traces: int = 100,
             idle: float = 0.2, http_clients: int = 3, grpc_clients: int = 1, sample_every: float = 0.25,
             samples: int = 40, warmup: float = 0.4, abuse_pause: float = 0.05, max_body: int = MAX_BODY,
             wait: float = 60.0) -> SoakResult:
    """Run one soak against a fresh in-process Server on free 127.0.0.1 ports (tracemalloc on for its duration).

    Args:
        seconds: load for this long on the wall clock; serve's idle timer runs on the wall clock and memory is
            sampled every ``sample_every`` seconds.
        requests: instead of ``seconds``: every load client makes exactly this many valid requests; serve's clock
            counts the valid load requests made so far (``idle`` is then a number of requests) and ``samples``
            memory samples are taken at evenly spaced request counts (the first before the load, the others by the
            client whose request completes that count). Nothing then depends on the machine's speed.
        wait: the most seconds to wait for the final trace's event and report (they come at once unless serve is
            broken).
    """
    if (seconds is None) == (requests is None):
        raise ValueError("give either seconds or requests")
    by_requests = requests is not None
    made = [0]  # valid load requests made: the soak's clock when bounded by requests
    total = requests * (http_clients + grpc_clients) if requests is not None else 0
    sample_at = {k * total // samples for k in range(1, samples)} if requests is not None else set()
    clock_offset = [0.0]  # how far the soak moved that clock on by itself (past the final trace's idle time)

    def request_clock() -> float:
        return made[0] + clock_offset[0]

    exporter = DropLogs()
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    server = Server(LoopGuardConfig(max_traces=max_traces, signature_key=b"soak-key-0123456789abcdef"),
                    grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", idle=idle,
                    logger_provider=logger_provider, meter_provider=meter_provider, max_body=max_body,
                    clock=request_clock if by_requests else time.monotonic)
    ids = itertools.count(10)
    id_lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []
    accepted: Counter[str] = Counter()
    abuse_counts: Counter[str] = Counter()
    count_lock = threading.Lock()
    taken: list[Sample] = []
    events = [0]
    event_lock = threading.Lock()
    final = threading.Event()
    final_trace = 1 << 40  # above any id the load uses; span ids (trace_no * 64 + i) still fit 8 bytes

    def on_event(event: VerdictEvent) -> None:
        with event_lock:  # listeners run on every receiver thread and the sweeper
            events[0] += 1
        if event.trace_id == final_trace and event.verdict.kind == "stuck":
            final.set()

    server.add_listener(on_event)
    final_finished = threading.Event()
    server.add_report_listener(
        lambda report: final_finished.set() if report.trace_id == f"{final_trace:032x}" else None)

    def next_ids(n: int) -> list[int]:
        with id_lock:
            return [next(ids) for _ in range(n)]

    def sample(at: float) -> None:
        rss = _rss()
        taken.append(Sample(at, tracemalloc.get_traced_memory()[0], rss,
                            rss - tracemalloc.get_tracemalloc_memory(), server.stats()))

    def count(spans: list[trace_pb2.Span], protocol: str | None) -> None:
        """Count an accepted request: a load request (``protocol``) or the valid one after an abuse (None)."""
        with count_lock:
            if protocol is not None:
                accepted[protocol] += 1
                made[0] += 1
            at = made[0]
            accepted["spans"] += len(spans)
            accepted["tool_spans"] += sum(1 for span in spans if span.name.startswith("execute_tool"))
        if protocol is not None and at in sample_at:
            sample(at)

    def load(send: Callable[[bytes], None], protocol: str) -> None:
        pending: list[trace_pb2.Span] = []
        sent = 0
        try:
            while (sent < requests) if requests is not None else not stop.is_set():
                spans = pending
                pending = []
                for trace_no in next_ids(TRACES_PER_BATCH):
                    first, rest = trace_halves(trace_no, trace_no % 2 == 0)
                    spans.extend(first)
                    pending.extend(rest)
                send(request_bytes(spans))
                sent += 1
                count(spans, protocol)
        except Exception as exc:
            errors.append(f"{protocol} load: {type(exc).__name__}: {exc}")

    def http_load() -> None:
        client = HTTPClient(server.http_port)

        def send(body: bytes) -> None:
            status, reply, _ = client.post(body)
            assert status == 200, (status, reply[:200])

        load(send, "http")
        client.close()

    def grpc_load() -> None:
        client = GRPCClient(server.grpc_port)
        load(client.export, "grpc")
        client.close()

    def abuse_loop() -> None:
        http_client, grpc_client = HTTPClient(server.http_port), GRPCClient(server.grpc_port)
        kinds = abuses(max_body)
        try:
            for n in itertools.count():
                if stop.is_set() and n >= len(kinds):  # every kind at least once, however slow the machine
                    break
                kind = kinds[n % len(kinds)]
                kind.send(http_client, grpc_client)
                with count_lock:
                    abuse_counts[kind.name] += 1
                # Still serving: a valid request right after, over the protocol that was abused.
                spans = trace_halves(next_ids(1)[0], False)[0]
                valid = request_bytes(spans)
                if kind.name.startswith("grpc"):
                    grpc_client.export(valid)
                else:
                    status, reply, _ = http_client.post(valid)
                    assert status == 200, (kind.name, status, reply[:200])
                count(spans, None)
                stop.wait(abuse_pause)
        except Exception as exc:
            errors.append(f"abuse: {type(exc).__name__}: {exc!r}")
        finally:
            http_client.close()
            grpc_client.close()

    loaders = ([threading.Thread(target=http_load, name=f"soak-http-{i}") for i in range(http_clients)]
               + [threading.Thread(target=grpc_load, name=f"soak-grpc-{i}") for i in range(grpc_clients)])
    abuser = threading.Thread(target=abuse_loop, name="soak-abuse")
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        with server:
            start = time.monotonic()
            if requests is not None:
                sample(0)
            for thread in [*loaders, abuser]:
                thread.start()
            if requests is None:
                while (now := time.monotonic() - start) < seconds:
                    sample(now)
                    stop.wait(sample_every)
                stop.set()
            for thread in loaders:
                thread.join()
            stop.set()
            abuser.join()
            elapsed = time.monotonic() - start
            length = float(made[0]) if by_requests else elapsed
            client = HTTPClient(server.http_port)
            final_spans = trace_halves(final_trace, True)
            status, _, _ = client.post(request_bytes(final_spans[0] + final_spans[1]))
            client.close()
            count(final_spans[0] + final_spans[1], None)
            final_stuck = status == 200 and final.wait(wait)
            # Nothing else arrives now, so only the idle timer can finish it (the drain comes later, in stop()).
            # The request clock stands still without load: move it past the idle time, as the wall clock moves.
            clock_offset[0] = idle + 1
            final_idle = final_finished.wait((0 if by_requests else idle) + wait)
            stats = server.stats()
    finally:
        if not tracing:
            tracemalloc.stop()
        logger_provider.shutdown()
        meter_provider.shutdown()
    taken.sort(key=lambda x: x.at)  # load clients take their samples concurrently
    return SoakResult(elapsed, length, dict(accepted), dict(abuse_counts), tuple(taken), stats, events[0],
                      exporter.records, final_stuck, final_idle, tuple(errors), max_traces, warmup)


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def report(result: SoakResult) -> str:
    """A readable summary of a soak."""
    s = result.stats
    heap = result.growth("heap")
    rss = result.growth("rss")
    net = result.growth("rss_net")
    abuse_total = sum(result.abuse.values())
    lines = [
        f"soak {result.seconds:.1f} s, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, max_traces "
        f"{result.max_traces}",
        f"requests accepted: {result.requests.get('http', 0)} http + {result.requests.get('grpc', 0)} grpc; "
        f"{s.spans} spans, {s.tool_calls} tool calls judged",
        f"traces finished {s.finished_traces} (evicted {s.evicted_traces}, idle/drain "
        f"{s.finished_traces - s.evicted_traces}); open at most {max(x.stats.open_traces for x in result.samples)}",
        f"verdict events {result.events}, log records exported {result.exported}",
        f"abuse: {abuse_total} bad requests, {s.rejected_requests} rejected by serve, each answered with its OTLP "
        f"status and followed by a valid request that succeeded: "
        + ", ".join(f"{k} {v}" for k, v in sorted(result.abuse.items())),
        f"python heap (tracemalloc): {_mib(heap[0])} after warm-up -> {_mib(heap[1])} at the end "
        f"({heap[2] / 1024:+.0f} KiB)",
        f"RSS: {_mib(rss[0])} after warm-up -> {_mib(rss[1])} at the end ({rss[2] / 1024:+.0f} KiB); less "
        f"tracemalloc's bookkeeping: {_mib(net[0])} -> {_mib(net[1])} ({net[2] / 1024:+.0f} KiB)",
        f"final looping trace stuck: {result.final_stuck}, finished by the idle timer: {result.final_idle}; "
        f"errors: {list(result.errors) or 'none'}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-traces", type=int, default=100)
    parser.add_argument("--idle", type=float, default=0.2)
    parser.add_argument("--http-clients", type=int, default=3)
    parser.add_argument("--grpc-clients", type=int, default=1)
    parser.add_argument("--sample-every", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=0.25, help="fraction of the run before growth is measured")
    parser.add_argument("--table", action="store_true", help="print every sample")
    args = parser.parse_args(argv)
    result = run_soak(args.seconds, max_traces=args.max_traces, idle=args.idle, http_clients=args.http_clients,
                      grpc_clients=args.grpc_clients, sample_every=args.sample_every, warmup=args.warmup)
    if args.table:
        print("   t(s)   heap MiB    RSS MiB    net MiB   open  finished  evicted  rejected")
        for x in result.samples:
            print(f"{x.at:7.1f} {x.heap / 2**20:10.2f} {x.rss / 2**20:10.2f} {x.rss_net / 2**20:10.2f} "
                  f"{x.stats.open_traces:6d} "
                  f"{x.stats.finished_traces:9d} {x.stats.evicted_traces:8d} {x.stats.rejected_requests:9d}")
    print(report(result))
    if result.errors or not result.final_stuck or not result.final_idle:
        sys.exit(1)


if __name__ == "__main__":
    main()
