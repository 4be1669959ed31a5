"""Load-generating client processes for the serve benchmarks (not a benchmark itself).

Clients run in their own processes (``spawn``), so the load generator does not share the server's GIL; they are
started once and reused for every round. For a round the parent hands each client its request bodies, every
client says it is ready, the parent says go, and each client sends its bodies one after the other over one
persistent connection (HTTP/1.1 keep-alive, or one gRPC channel) and returns when it sent them and when it got the
last answer, on ``time.monotonic`` (CLOCK_MONOTONIC: one clock for every process of the machine).
"""

from __future__ import annotations

import base64
import http.client
import multiprocessing
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def to_json(body: bytes) -> bytes:
    """The OTLP/JSON form of a protobuf ExportTraceServiceRequest (hex ids, integer enums)."""
    import json

    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    doc = MessageToDict(request, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Job:
    """What one client sends in one round.

    Attributes:
        kind: ``http`` or ``grpc``.
        port: the receiver's port on 127.0.0.1.
        bodies: request bodies, sent in order.
        content_type: HTTP content type.
        chunked: send HTTP bodies chunked (no Content-Length), as Node.js exporters do.
        record_latency: keep each request's round-trip time.
        seconds: stop sending after this long (the bodies not sent are skipped); None sends them all.
    """

    kind: str
    port: int
    bodies: Sequence[bytes]
    content_type: str = PROTOBUF
    chunked: bool = False
    record_latency: bool = False
    seconds: float | None = None


@dataclass(frozen=True)
class Done:
    """A client's round: when it started and finished, requests answered, failures and (when asked) each request's
    latency."""

    start: float
    end: float
    errors: int
    latencies: tuple[float, ...]
    sent: int


def _pieces(body: bytes, size: int = 16 * 1024) -> Any:
    for i in range(0, len(body), size):
        yield body[i:i + size]


def _client(conn: Connection) -> None:
    import grpc

    http_conns: dict[int, http.client.HTTPConnection] = {}
    channels: dict[int, Any] = {}
    while True:
        job: Job | None = conn.recv()
        if job is None:
            return
        conn.send("ready")
        conn.recv()  # go
        errors = 0
        latencies: list[float] = []
        start = time.monotonic()
        deadline = start + job.seconds if job.seconds is not None else float("inf")
        sent = 0
        if job.kind == "http":
            for body in job.bodies:
                t = time.monotonic()
                if t > deadline:
                    break
                sent += 1
                try:
                    http_conn = http_conns.get(job.port)
                    if http_conn is None:
                        http_conn = http_conns[job.port] = http.client.HTTPConnection("127.0.0.1", job.port,
                                                                                      timeout=60)
                    if job.chunked:
                        http_conn.request("POST", "/v1/traces", _pieces(body), {"Content-Type": job.content_type},
                                          encode_chunked=True)
                    else:
                        http_conn.request("POST", "/v1/traces", body, {"Content-Type": job.content_type})
                    response = http_conn.getresponse()
                    response.read()
                    if response.status != 200:
                        errors += 1
                except (OSError, http.client.HTTPException):
                    errors += 1
                    http_conns.pop(job.port, None)
                if job.record_latency:
                    latencies.append(time.monotonic() - t)
        else:
            channel = channels.get(job.port)
            if channel is None:
                channel = channels[job.port] = grpc.insecure_channel(f"127.0.0.1:{job.port}")
            export = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
            for body in job.bodies:
                t = time.monotonic()
                if t > deadline:
                    break
                sent += 1
                try:
                    export(body, timeout=60)
                except grpc.RpcError:
                    errors += 1
                if job.record_latency:
                    latencies.append(time.monotonic() - t)
        conn.send(Done(start, time.monotonic(), errors, tuple(latencies), sent))


class Clients:
    """``count`` client processes; :meth:`run` sends one round of jobs (one per client) and waits for them."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._procs = []
        for _ in range(count):
            parent, child = context.Pipe()
            proc = context.Process(target=_client, args=(child,), daemon=True)
            proc.start()
            self._pipes.append(parent)
            self._procs.append(proc)

    def __len__(self) -> int:
        return len(self._pipes)

    def run(self, jobs: Sequence[Job | None]) -> list[Done | None]:
        """Give client ``i`` job ``i`` (None: it sits this round out), start them together, return their results."""
        self.start(jobs)
        return self.wait()

    def start(self, jobs: Sequence[Job | None]) -> None:
        """Start a round (see :meth:`run`) without waiting for it."""
        self._active = [(pipe, job) for pipe, job in zip(self._pipes, jobs) if job is not None]
        for pipe, job in self._active:
            pipe.send(job)
        for pipe, _ in self._active:
            assert pipe.recv() == "ready"
        for pipe, _ in self._active:
            pipe.send("go")

    def wait(self) -> list[Done | None]:
        """The results of the round :meth:`start` started (client order; None for clients without a job)."""
        done = {id(pipe): pipe.recv() for pipe, _ in self._active}
        return [done.get(id(pipe)) for pipe in self._pipes]

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.send(None)
        for proc in self._procs:
            proc.join(10)

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def span_rate(results: Sequence[Done | None], spans: int) -> float:
    """Spans per second of a round: every span over the time from the first client's start to the last's end."""
    done = [r for r in results if r is not None]
    return spans / (max(r.end for r in done) - min(r.start for r in done))


def summary(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """``median (min-max)``."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"
