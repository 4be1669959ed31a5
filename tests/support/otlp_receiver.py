"""A real OTLP/gRPC server on 127.0.0.1 that records every export request.

Tests point an SDK exporter or a collector at :attr:`RecordingOTLPReceiver.endpoint`, then block in
:meth:`RecordingOTLPReceiver.wait_for` until the data they expect has arrived; every accepted request wakes the
waiters, so no test needs a polling sleep. The decoded views (:meth:`~RecordingOTLPReceiver.spans`,
:meth:`~RecordingOTLPReceiver.log_records`, :meth:`~RecordingOTLPReceiver.metric_points`) flatten OTLP protobufs into
plain dicts with hex ids, so assertions read like the data model rather than like protobuf.

Outage tests can make the receiver refuse requests (:meth:`~RecordingOTLPReceiver.fail_with`), stall them
(:meth:`~RecordingOTLPReceiver.pause`), or disappear and come back on the same port
(:meth:`~RecordingOTLPReceiver.stop` then :meth:`~RecordingOTLPReceiver.start`).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

__all__ = ["Received", "RecordingOTLPReceiver", "decode_any_value", "decode_attributes", "free_port"]

TRACES = "traces"
LOGS = "logs"
METRICS = "metrics"


@dataclass(frozen=True)
class Received:
    """One accepted export request.

    Attributes:
        kind: ``"traces"``, ``"logs"`` or ``"metrics"``.
        request: the decoded ``Export*ServiceRequest`` protobuf.
        at: ``time.monotonic()`` when the request was accepted.
    """

    kind: str
    request: Any
    at: float


def decode_any_value(value: common_pb2.AnyValue) -> Any:
    """Turn an OTLP ``AnyValue`` into the matching plain Python value (None when unset)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [decode_any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return decode_attributes(value.kvlist_value.values)
    return getattr(value, which)


def decode_attributes(attributes: Any) -> dict[str, Any]:
    """Turn a repeated OTLP ``KeyValue`` field into a plain dict."""
    return {kv.key: decode_any_value(kv.value) for kv in attributes}


def _hex(raw: bytes) -> str:
    return raw.hex()


class RecordingOTLPReceiver:
    """OTLP/gRPC trace, log and metric receiver that records every request it accepts.

    Usable as a context manager. After :meth:`stop` it can be started again and keeps its port, so a collector
    configured with :attr:`endpoint` reconnects to it (collector-outage tests).

    Args:
        port: TCP port on 127.0.0.1; 0 picks a free one on first start and keeps it afterwards.
        max_workers: gRPC handler threads; stalled requests (see :meth:`pause`) each hold one.
    """

    def __init__(self, port: int = 0, *, max_workers: int = 16) -> None:
        self._port = port
        self._max_workers = max_workers
        # RLock-backed so predicates passed to wait_for may call the decoded views.
        self._cond = threading.Condition(threading.RLock())
        self._received: list[Received] = []
        self._attempts = {TRACES: 0, LOGS: 0, METRICS: 0}
        self._refused = {TRACES: 0, LOGS: 0, METRICS: 0}
        self._fail_code: grpc.StatusCode | None = None
        self._fail_message = ""
        self._paused = False
        self._server: grpc.Server | None = None

    # --- lifecycle ---------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (0 before the first start when no port was given)."""
        return self._port

    @property
    def endpoint(self) -> str:
        """``"127.0.0.1:PORT"``; prefix ``http://`` for exporters that want a URL."""
        return f"127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        """Whether the gRPC server is currently serving."""
        return self._server is not None

    def start(self) -> RecordingOTLPReceiver:
        """Bind and start serving; on a restart, bind the same port as before.

        Returns:
            self, for chaining.

        Raises:
            RuntimeError: already running, or the port cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("receiver already running")
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="otlp-receiver"),
            # gRPC enables SO_REUSEPORT by default on Linux; then a second server could silently share the port
            # and steal half the requests. Failing to bind is the honest outcome.
            options=[("grpc.so_reuseport", 0)],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceServicer(self), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsServicer(self), server)
        try:
            bound = server.add_insecure_port(f"127.0.0.1:{self._port}")
        except RuntimeError as exc:
            raise RuntimeError(f"cannot bind 127.0.0.1:{self._port}: {exc}") from exc
        if bound == 0:
            raise RuntimeError(f"cannot bind 127.0.0.1:{self._port}")
        self._port = bound
        server.start()
        self._server = server
        return self

    def stop(self, grace: float | None = 0.5) -> None:
        """Stop serving (idempotent); stalled requests are released first so shutdown cannot hang.

        Args:
            grace: seconds in-flight requests may take to finish before they are cancelled.
        """
        server, self._server = self._server, None
        if server is None:
            return
        with self._cond:
            self._cond.notify_all()
        server.stop(grace).wait()

    def restart(self) -> RecordingOTLPReceiver:
        """Stop, then start again on the same port."""
        self.stop()
        return self.start()

    def __enter__(self) -> RecordingOTLPReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- fault injection ---------------------------------------------------------------------------------

    def fail_with(self, code: grpc.StatusCode | None, message: str = "refused by test") -> None:
        """Answer every following request with ``code`` without recording it; ``None`` accepts again.

        ``UNAVAILABLE`` is retryable for OTLP clients, ``INVALID_ARGUMENT`` is not.
        """
        with self._cond:
            self._fail_code = code
            self._fail_message = message

    def pause(self) -> None:
        """Hold every following request unanswered until :meth:`resume` or :meth:`stop`.

        A held request whose client gave up (deadline passed) is neither recorded nor answered.
        """
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        """Release held requests and stop holding new ones."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    # --- recorded data -----------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget everything recorded so far (counters included)."""
        with self._cond:
            self._received.clear()
            for counts in (self._attempts, self._refused):
                for kind in counts:
                    counts[kind] = 0

    def received(self, kind: str | None = None) -> list[Received]:
        """Accepted requests in arrival order, optionally only one kind (``"traces"``, ``"logs"``, ``"metrics"``)."""
        with self._cond:
            return [r for r in self._received if kind is None or r.kind == kind]

    def attempts(self, kind: str) -> int:
        """Requests of ``kind`` that reached a handler, whether accepted, refused or abandoned."""
        with self._cond:
            return self._attempts[kind]

    def refused(self, kind: str) -> int:
        """Requests of ``kind`` answered with the :meth:`fail_with` status."""
        with self._cond:
            return self._refused[kind]

    def wait_for(self, predicate: Callable[[RecordingOTLPReceiver], bool], timeout: float = 60.0) -> bool:
        """Block until ``predicate(self)`` holds or ``timeout`` seconds pass (a deadline for a loaded machine: the
        call returns as soon as the predicate holds).

        The predicate is re-evaluated after every accepted or refused request, under the recording lock, so it
        may call :meth:`spans` and the other views.

        Returns:
            whether the predicate held before the timeout.
        """
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def spans(self) -> list[dict[str, Any]]:
        """Every received span, flattened.

        Keys: ``trace_id``, ``span_id``, ``parent_span_id`` (hex; ``""`` for roots), ``name``, ``kind`` (int),
        ``status_code`` (int), ``attributes`` (dict), ``events`` (list of ``(name, attributes)``), ``resource``
        (dict), ``scope`` (instrumentation scope name).
        """
        out: list[dict[str, Any]] = []
        for received in self.received(TRACES):
            for resource_spans in received.request.resource_spans:
                resource = decode_attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.append(
                            {
                                "trace_id": _hex(span.trace_id),
                                "span_id": _hex(span.span_id),
                                "parent_span_id": _hex(span.parent_span_id),
                                "name": span.name,
                                "kind": span.kind,
                                "status_code": span.status.code,
                                "attributes": decode_attributes(span.attributes),
                                "events": [(e.name, decode_attributes(e.attributes)) for e in span.events],
                                "resource": resource,
                                "scope": scope_spans.scope.name,
                            }
                        )
        return out

    def log_records(self) -> list[dict[str, Any]]:
        """Every received log record, flattened.

        Keys: ``event_name``, ``severity_number`` (int), ``severity_text``, ``trace_id``, ``span_id`` (hex; ``""``
        when absent), ``attributes`` (dict), ``body`` (plain value or None), ``resource`` (dict), ``scope``.
        """
        out: list[dict[str, Any]] = []
        for received in self.received(LOGS):
            for resource_logs in received.request.resource_logs:
                resource = decode_attributes(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        out.append(
                            {
                                "event_name": record.event_name,
                                "severity_number": record.severity_number,
                                "severity_text": record.severity_text,
                                "trace_id": _hex(record.trace_id),
                                "span_id": _hex(record.span_id),
                                "attributes": decode_attributes(record.attributes),
                                "body": decode_any_value(record.body),
                                "resource": resource,
                                "scope": scope_logs.scope.name,
                            }
                        )
        return out

    def metric_points(self) -> list[dict[str, Any]]:
        """Every received metric data point, flattened, in arrival order (cumulative points repeat per export).

        Keys for all points: ``name``, ``unit``, ``type`` (``"sum"``, ``"gauge"``, ``"histogram"``,
        ``"exponential_histogram"`` or ``"summary"``), ``attributes`` (dict), ``resource`` (dict), ``scope``.
        Sum and gauge points add ``value`` (int or float) and, for sums, ``monotonic``; histogram points add
        ``count``, ``sum``, ``bucket_counts`` and ``explicit_bounds``; exponential histograms add ``count``, ``sum``
        and ``scale``; summaries add ``count`` and ``sum``.
        """
        out: list[dict[str, Any]] = []
        for received in self.received(METRICS):
            for resource_metrics in received.request.resource_metrics:
                resource = decode_attributes(resource_metrics.resource.attributes)
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        base = {
                            "name": metric.name,
                            "unit": metric.unit,
                            "resource": resource,
                            "scope": scope_metrics.scope.name,
                        }
                        out.extend(_metric_points(metric, base))
        return out


def _number_value(point: Any) -> int | float | None:
    which = point.WhichOneof("value")
    return None if which is None else getattr(point, which)


def _metric_points(metric: Any, base: dict[str, Any]) -> list[dict[str, Any]]:
    which = metric.WhichOneof("data")
    points: list[dict[str, Any]] = []
    if which in ("sum", "gauge"):
        data = getattr(metric, which)
        for p in data.data_points:
            point = {**base, "type": which, "attributes": decode_attributes(p.attributes), "value": _number_value(p)}
            if which == "sum":
                point["monotonic"] = data.is_monotonic
            points.append(point)
    elif which == "histogram":
        for p in metric.histogram.data_points:
            points.append(
                {
                    **base,
                    "type": which,
                    "attributes": decode_attributes(p.attributes),
                    "count": p.count,
                    "sum": p.sum,
                    "bucket_counts": list(p.bucket_counts),
                    "explicit_bounds": list(p.explicit_bounds),
                }
            )
    elif which == "exponential_histogram":
        for p in metric.exponential_histogram.data_points:
            points.append(
                {
                    **base,
                    "type": which,
                    "attributes": decode_attributes(p.attributes),
                    "count": p.count,
                    "sum": p.sum,
                    "scale": p.scale,
                }
            )
    elif which == "summary":
        for p in metric.summary.data_points:
            points.append(
                {**base, "type": which, "attributes": decode_attributes(p.attributes), "count": p.count, "sum": p.sum}
            )
    return points


class _Recorder:
    """Shared handler logic: count, honour fail/pause switches, record, wake waiters."""

    kind = ""

    def __init__(self, owner: RecordingOTLPReceiver) -> None:
        self._owner = owner

    def _handle(self, request: Any, context: grpc.ServicerContext) -> None:
        owner = self._owner

        def wake() -> None:
            with owner._cond:
                owner._cond.notify_all()

        # Fires when the RPC ends (client deadline, cancellation, server stop), so a held request notices.
        context.add_callback(wake)
        with owner._cond:
            owner._attempts[self.kind] += 1
            # Re-check liveness while held: a stalled client may time out, and stop() must not wait on us forever.
            owner._cond.wait_for(lambda: not owner._paused or owner._server is None or not context.is_active())
            code, message = owner._fail_code, owner._fail_message
            if code is not None:
                owner._refused[self.kind] += 1
                owner._cond.notify_all()
            elif context.is_active():
                owner._received.append(Received(self.kind, request, time.monotonic()))
                owner._cond.notify_all()
        if code is not None:
            context.abort(code, message)


class _TraceServicer(_Recorder, trace_service_pb2_grpc.TraceServiceServicer):
    kind = TRACES

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._handle(request, context)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsServicer(_Recorder, logs_service_pb2_grpc.LogsServiceServicer):
    kind = LOGS

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._handle(request, context)
        return logs_service_pb2.ExportLogsServiceResponse()


class _MetricsServicer(_Recorder, metrics_service_pb2_grpc.MetricsServiceServicer):
    kind = METRICS

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._handle(request, context)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller must tolerate a lost race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
