"""Benchmark of ``otel-loopguard serve``: receive-and-judge throughput against a floor, and verdict latency.

Run: ``.venv/bin/python tests/benchmarks/serve.py [--traces 400] [--rounds 7]``. Prints:

* throughput, for OTLP/HTTP protobuf, OTLP/HTTP JSON and OTLP/gRPC: spans per second received *and judged* by
  ``serve`` (it judges a request before answering, so an answer means its spans were evaluated), and, in the same
  run, the **floor**: the same receivers (aiohttp, grpcio, the same settings, decoding on the same worker threads)
  handing the decoded spans to a sink that discards them. Each round sends every variant its own fresh traces, the
  floor and serve alternately first; medians and ranges are over the rounds, and the ratio serve/floor is taken per
  round. ``CLIENTS`` client processes (their own GIL) post ``BATCH``-span protobuf (or JSON) requests over persistent
  connections. Traces have 10 GenAI tool spans and an agent root; half loop (same call, same result), so serve
  also emits verdict events (through the SDK's batch log processor, to an exporter that drops them) and metrics.
  serve's figures count all it does for a round's spans: after the last answer its traces are finished (what the
  idle sweep does ``idle`` seconds later: the final judgement, the reports and their metrics) and the events
  exported (the log processor's thread), in CPU (the whole process, every thread) and in the round's duration.
* latency: for each of ``LOOPS`` looping traces, the spans are sent one request at a time; the clock starts just
  before the request with the tool span that completes the stuck cycle and stops when the recording OTLP backend
  accepts the log-record batch holding that trace's ``loopguard.verdict`` (stuck) event. serve's log pipeline is the
  SDK's BatchLogRecordProcessor with a 10 ms schedule delay (``OTEL_BLRP_SCHEDULE_DELAY``; the SDK default is 1 s,
  which would dominate the figure); the time from the request to serve's in-process listener is printed too.

Spans are built as protobuf directly (not through an SDK) so the generator costs little next to serve. The
process's garbage collector is set as the ``serve`` command sets it (:func:`tune_gc`; the floor shares the
process); ``--default-gc`` keeps Python's settings.
"""

from __future__ import annotations

import argparse
import http.client
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.grpc_server import OTLPGrpcServer
from otel_loopguard.serve.http_server import OTLPHTTPServer
from otel_loopguard.serve.server import Server, tune_gc
from otel_loopguard.serve.settings import ServeSettings
from tests.benchmarks.serve_clients import JSON, PROTOBUF, Clients, Job, span_rate, summary, to_json
from tests.benchmarks.sinks import DropLogs
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.proto_spans import request_bytes, root_span, tool_span

TOOL_SPANS = 10
BATCH = 200
CLIENTS = 4
LOOPS = 40
PROTOCOLS = ("http/protobuf", "http/json", "grpc")


def trace_spans(trace_no: int, looping: bool, t0: int) -> list[trace_pb2.Span]:
    """One agent trace (trace id ``trace_no + 1``): TOOL_SPANS tool spans then the root, in end order."""
    spans = []
    for i in range(TOOL_SPANS):
        query = "weather in Paris" if looping else f"page {i}"
        result = '{"hits": []}' if looping else f'{{"hits": [{i}]}}'
        spans.append(tool_span(trace_no + 1, i, t0, arguments=f'{{"query": "{query}", "limit": 10}}', result=result))
    spans.append(root_span(trace_no + 1, t0, TOOL_SPANS))
    return spans


def make_bodies(traces: int, offset: int, protocol: str) -> tuple[list[bytes], int]:
    """Requests of BATCH spans covering ``traces`` traces (ids start at ``offset``), in the protocol's encoding."""
    spans: list[trace_pb2.Span] = []
    t0 = time.time_ns()
    for n in range(traces):
        spans.extend(trace_spans(offset + n, n % 2 == 0, t0))
    bodies = [request_bytes(spans[i:i + BATCH]) for i in range(0, len(spans), BATCH)]
    if protocol == "http/json":
        bodies = [to_json(body) for body in bodies]
    return bodies, len(spans)


def _discard(spans: list[SpanRecord], body: bytes, content_type: str, peer: str) -> None:
    pass




class Floor:
    """The same two receivers as serve, with the same settings, whose sink discards the decoded spans."""

    def __init__(self, settings: ServeSettings) -> None:
        self.http = OTLPHTTPServer(("127.0.0.1", 0), _discard, lambda: None, settings)
        self.grpc = OTLPGrpcServer("127.0.0.1:0", _discard, lambda: None, settings)
        self.http.start()
        self.grpc.start()

    def port(self, protocol: str) -> int:
        return self.grpc.port if protocol == "grpc" else self.http.server_address[1]

    def stop(self) -> None:
        self.grpc.stop()
        self.http.stop()


def _jobs(protocol: str, port: int, bodies: list[bytes]) -> list[Job | None]:
    kind = "grpc" if protocol == "grpc" else "http"
    content_type = JSON if protocol == "http/json" else PROTOBUF
    return [Job(kind, port, bodies[i::CLIENTS], content_type) for i in range(CLIENTS)]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def throughput(server: Server, floor: Floor, clients: Clients, traces: int, rounds: int,
               flush: Callable[[], object]) -> None:
    """Print spans/s of serve and of the floor per protocol, interleaved round by round, and their ratio; and the
    same per CPU-second of this process, every thread (the receivers; the clients run in their own processes).
    serve's figures include finishing the round's traces and ``flush()`` (exporting their events)."""
    offset = 1_000_000
    rates: dict[tuple[str, str], list[float]] = {}
    ratios: dict[str, list[float]] = {}
    cpu_rates: dict[tuple[str, str], list[float]] = {}
    cpu_ratios: dict[str, list[float]] = {}
    shares: dict[str, list[float]] = {}
    for round_no in range(rounds + 1):  # round 0 warms up (connections, caches) and is not counted
        for protocol in PROTOCOLS:
            order = ("floor", "serve") if round_no % 2 else ("serve", "floor")
            got: dict[str, float] = {}
            got_cpu: dict[str, float] = {}
            for variant in order:
                bodies, count = make_bodies(traces, offset, protocol)
                offset += traces
                port = floor.port(protocol) if variant == "floor" else (
                    server.grpc_port if protocol == "grpc" else server.http_port)
                assert port is not None
                before = server.stats().tool_calls
                cpu = _cpu()
                results = clients.run(_jobs(protocol, port, bodies))
                finishing = 0.0
                answered = _cpu()
                if variant == "serve":
                    # What serve does for these spans after answering, counted too: finishing their traces (the
                    # idle sweep's work, here at once) and exporting the events (the log processor's thread).
                    finishing = time.monotonic()
                    server.finish_all()
                    flush()
                    finishing = time.monotonic() - finishing
                after = _cpu()
                if variant == "serve" and round_no:
                    shares.setdefault(protocol, []).append((after - answered) / (after - cpu))
                cpu = after - cpu
                assert all(r is not None and r.errors == 0 for r in results), results
                if variant == "serve":
                    judged = server.stats().tool_calls - before
                    assert judged == traces * TOOL_SPANS, (judged, traces * TOOL_SPANS)
                got[variant] = 1 / (1 / span_rate(results, count) + finishing / count)
                got_cpu[variant] = count / cpu
            if round_no:
                for variant, rate in got.items():
                    rates.setdefault((protocol, variant), []).append(rate)
                    cpu_rates.setdefault((protocol, variant), []).append(got_cpu[variant])
                ratios.setdefault(protocol, []).append(got["serve"] / got["floor"])
                cpu_ratios.setdefault(protocol, []).append(got_cpu["serve"] / got_cpu["floor"])
    spans = traces * (TOOL_SPANS + 1)
    print(f"throughput: {rounds} rounds of {spans} spans a variant ({traces} traces, {spans // BATCH + 1} requests "
          f"of up to {BATCH} spans), {CLIENTS} client processes; median (min-max) spans/s")
    for protocol in PROTOCOLS:
        print(f"  {protocol:13s}  floor {summary(rates[(protocol, 'floor')])}  serve "
              f"{summary(rates[(protocol, 'serve')])}  serve/floor {summary(ratios[protocol], '{:.2f}')}")
    print("per CPU-second of the server process (robust to other load on the machine): spans per CPU-second")
    for protocol in PROTOCOLS:
        print(f"  {protocol:13s}  floor {summary(cpu_rates[(protocol, 'floor')])}  serve "
              f"{summary(cpu_rates[(protocol, 'serve')])}  serve/floor {summary(cpu_ratios[protocol], '{:.2f}')}")
    print("share of serve's CPU spent after the last answer (finishing the traces, exporting the events): "
          + ", ".join(f"{protocol} {summary(shares[protocol], '{:.1%}')}" for protocol in PROTOCOLS))


def latency(server: Server, receiver: RecordingOTLPReceiver) -> None:
    """Print the median time from the cycle-completing span's request to the stuck event at the backend."""
    in_process: dict[int, float] = {}
    server.add_listener(lambda e: in_process.setdefault(e.trace_id, time.monotonic())
                        if e.verdict.kind == "stuck" else None)
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    to_backend: list[float] = []
    to_listener: list[float] = []
    for n in range(LOOPS):
        trace_no = 5_000_000 + n
        spans = trace_spans(trace_no, True, time.time_ns())
        trace_hex = (trace_no + 1).to_bytes(16, "big").hex()
        sent = 0.0
        for span in spans:
            body = request_bytes([span])
            before = time.monotonic()
            conn.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
            response = conn.getresponse()
            response.read()
            if trace_no + 1 in in_process and not sent:
                sent = before  # this request completed the stuck cycle
                break

        def arrived(r: RecordingOTLPReceiver, trace_hex: str = trace_hex) -> bool:
            return any(rec["trace_id"] == trace_hex and rec["attributes"].get("loopguard.verdict") == "stuck"
                       for rec in r.log_records())

        assert receiver.wait_for(arrived, timeout=10)
        at = next(rcv.at for rcv in receiver.received("logs")
                  if any(lr.trace_id.hex() == trace_hex for rl in rcv.request.resource_logs
                         for sl in rl.scope_logs for lr in sl.log_records))
        to_backend.append(at - sent)
        to_listener.append(in_process[trace_no + 1] - sent)
        receiver.clear()
    conn.close()
    ms = sorted(x * 1000 for x in to_backend)
    print(f"latency last cycle span -> stuck event at the OTLP backend: median {statistics.median(ms):.1f} ms "
          f"(p90 {ms[int(len(ms) * 0.9)]:.1f} ms, {LOOPS} loops, BLRP schedule delay 10 ms)")
    print(f"latency last cycle span -> serve listener (judged): median "
          f"{statistics.median(to_listener) * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=400, help="traces per variant and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--default-gc", action="store_true",
                        help="keep Python's garbage collector settings (the serve command tunes them)")
    args = parser.parse_args()
    settings = ServeSettings()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"{TOOL_SPANS} tool spans + 1 root per trace")
    with Clients(CLIENTS) as clients:
        # Events go through the SDK's batch processor to an exporter that drops them: serve pays for emitting,
        # not a backend in this process for decoding them.
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        server = Server(LoopGuardConfig(), grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", idle=60,
                        logger_provider=logger_provider, meter_provider=meter_provider, settings=settings)
        floor = Floor(settings)
        with server:
            if not args.default_gc:
                tune_gc()  # what the serve command does once its receivers are up (the floor shares the process)
            throughput(server, floor, clients, args.traces, args.rounds, logger_provider.force_flush)
        floor.stop()
        logger_provider.shutdown()
        meter_provider.shutdown()
    with RecordingOTLPReceiver() as receiver:
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"http://{receiver.endpoint}", insecure=True), schedule_delay_millis=10))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        server = Server(LoopGuardConfig(), grpc_address=None, http_address="127.0.0.1:0", idle=60,
                        logger_provider=logger_provider, meter_provider=meter_provider, settings=settings)
        with server:
            latency(server, receiver)
        logger_provider.shutdown()
        meter_provider.shutdown()


if __name__ == "__main__":
    main()
