"""Benchmark of ``otel-loopguard serve``: receive-and-judge throughput and verdict latency, over loopback.

Run: ``.venv/bin/python tests/benchmarks/serve.py [traces]``. Prints:

* throughput: spans per second received *and judged* (serve judges a request before it answers, so a request's
  reply means its spans were evaluated). A load generator with ``CLIENTS`` threads posts protobuf
  ``ExportTraceServiceRequest`` batches of ``BATCH`` spans over OTLP/HTTP (persistent connections) and, separately,
  over OTLP/gRPC. Traces have 10 GenAI tool spans plus an agent root; half loop (same call, same result).
* latency: for each of ``LOOPS`` looping traces, the spans are sent one request at a time; the clock starts just
  before the request with the tool span that completes the stuck cycle and stops when the recording OTLP backend
  accepts the log-record batch holding that trace's ``loopguard.verdict`` (stuck) event. serve's log pipeline is the
  SDK's BatchLogRecordProcessor with a 10 ms schedule delay (``OTEL_BLRP_SCHEDULE_DELAY``; the SDK default is 1 s,
  which would dominate the figure); the time from the request to serve's in-process listener is printed too.

Spans are built as protobuf directly (not through an SDK) so the generator costs little next to serve.
"""

from __future__ import annotations

import http.client
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.server import Server
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.proto_spans import request_bytes, root_span, tool_span

TOOL_SPANS = 10
BATCH = 200
CLIENTS = 4
LOOPS = 40
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def trace_spans(trace_no: int, looping: bool, t0: int) -> list[trace_pb2.Span]:
    """One agent trace (trace id ``trace_no + 1``): TOOL_SPANS tool spans then the root, in end order."""
    spans = []
    for i in range(TOOL_SPANS):
        query = "weather in Paris" if looping else f"page {i}"
        result = '{"hits": []}' if looping else f'{{"hits": [{i}]}}'
        spans.append(tool_span(trace_no + 1, i, t0, arguments=f'{{"query": "{query}", "limit": 10}}', result=result))
    spans.append(root_span(trace_no + 1, t0, TOOL_SPANS))
    return spans


def make_batches(traces: int, offset: int) -> tuple[list[bytes], int]:
    """Protobuf requests of BATCH spans covering ``traces`` traces (ids start at ``offset``)."""
    spans: list[trace_pb2.Span] = []
    t0 = time.time_ns()
    for n in range(traces):
        spans.extend(trace_spans(offset + n, n % 2 == 0, t0))
    return [request_bytes(spans[i:i + BATCH]) for i in range(0, len(spans), BATCH)], len(spans)


def post_all_http(port: int, bodies: list[bytes]) -> None:
    """Post every body over one persistent HTTP connection per client thread."""
    def client(chunk: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for body in chunk:
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
        conn.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, [bodies[i::CLIENTS] for i in range(CLIENTS)]))


def post_all_grpc(port: int, bodies: list[bytes]) -> None:
    """Export every body over one gRPC channel per client thread."""
    def client(chunk: list[bytes]) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
            for body in chunk:
                export(body, timeout=30)

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, [bodies[i::CLIENTS] for i in range(CLIENTS)]))


def throughput(server: Server, traces: int) -> None:
    """Print spans/s for HTTP and gRPC."""
    offset = 1_000_000
    for name, send, port in (("http", post_all_http, server.http_port), ("grpc", post_all_grpc, server.grpc_port)):
        rates = []
        for _ in range(3):
            bodies, count = make_batches(traces, offset)
            offset += traces
            before = server.stats().tool_calls
            start = time.perf_counter()
            send(port, bodies)
            elapsed = time.perf_counter() - start
            judged = server.stats().tool_calls - before
            assert judged == traces * TOOL_SPANS, (judged, traces * TOOL_SPANS)
            rates.append(count / elapsed)
            server.finish_all()
        print(f"throughput {name}: {statistics.median(rates):,.0f} spans/s received and judged "
              f"(median of 3 runs of {count} spans in {len(bodies)} requests of {BATCH}, {CLIENTS} clients; "
              f"runs {', '.join(f'{r:,.0f}' for r in rates)})")


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
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
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
    traces = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with RecordingOTLPReceiver() as receiver:
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"http://{receiver.endpoint}", insecure=True), schedule_delay_millis=10))
        meter_provider = MeterProvider()
        server = Server(LoopGuardConfig(), grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", idle=60,
                        logger_provider=logger_provider, meter_provider=meter_provider)
        with server:
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {TOOL_SPANS} tool spans + 1 root per trace")
            throughput(server, traces)
            latency(server, receiver)
        logger_provider.shutdown()
        meter_provider.shutdown()


if __name__ == "__main__":
    main()
