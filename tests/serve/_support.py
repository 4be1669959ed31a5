"""Helpers for the serve tests: fixture requests, re-batching, OTLP clients and the audit reference."""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import random
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_loopguard import cli
from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.judge import TraceReport
from otel_loopguard.serve.server import Server
from tests.support.recorded_fixtures import judged_fixture_files

FIXTURE_FILES = judged_fixture_files()
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

Item = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]  # (resource, scope, span) of one span


def load_items(paths: Iterable[Path] = FIXTURE_FILES) -> list[Item]:
    """Every span of the fixture files with its resource and scope, in file order."""
    items: list[Item] = []
    for path in paths:
        doc = json.loads(path.read_text())
        for rs in doc["resourceSpans"]:
            resource = rs.get("resource", {})
            for ss in rs["scopeSpans"]:
                scope = ss.get("scope", {})
                for span in ss["spans"]:
                    items.append((resource, scope, span))
    return items


def request_dict(items: Iterable[Item]) -> dict[str, Any]:
    """An OTLP/JSON request holding ``items`` (consecutive spans of one resource and scope share an entry)."""
    resource_spans: list[dict[str, Any]] = []
    last: tuple[int, int] | None = None
    for resource, scope, span in items:
        key = (id(resource), id(scope))
        if key != last:
            resource_spans.append({"resource": resource, "scopeSpans": [{"scope": scope, "spans": []}]})
            last = key
        resource_spans[-1]["scopeSpans"][0]["spans"].append(span)
    return {"resourceSpans": resource_spans}


_PROTO_CACHE: dict[int, tuple[Any, Any, Any]] = {}


def _parsed(resource: dict[str, Any], scope: dict[str, Any], span: dict[str, Any]) -> tuple[Any, Any, Any]:
    # ParseDict is slow; each fixture object is parsed once per session (the dicts are never mutated).
    key = id(span)
    hit = _PROTO_CACHE.get(key)
    if hit is None or hit[2] is not span:
        doc = dict(span)
        for name in ("traceId", "spanId", "parentSpanId"):
            if doc.get(name):
                doc[name] = base64.b64encode(bytes.fromhex(doc[name])).decode()
        hit = (ParseDict({"resource": resource, "scopeSpans": [{"scope": scope, "spans": [doc]}]},
                         trace_pb2.ResourceSpans()), span, span)
        _PROTO_CACHE[key] = hit
    return hit


def to_proto(doc: dict[str, Any]) -> bytes:
    """The protobuf form of an OTLP/JSON request (hex ids become bytes)."""
    request = trace_service_pb2.ExportTraceServiceRequest()
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            out_rs = request.resource_spans.add()
            out_ss = out_rs.scope_spans.add()
            first = True
            for span in ss["spans"]:
                parsed = _parsed(rs.get("resource", {}), ss.get("scope", {}), span)[0]
                if first:
                    out_rs.resource.CopyFrom(parsed.resource)
                    out_ss.scope.CopyFrom(parsed.scope_spans[0].scope)
                    first = False
                out_ss.spans.add().CopyFrom(parsed.scope_spans[0].spans[0])
    return request.SerializeToString()


def batches(items: list[Item], seed: int, max_batches: int = 6) -> list[list[Item]]:
    """``items`` shuffled and cut into 1..max_batches requests (out of order and split, deterministically)."""
    rng = random.Random(seed)
    shuffled = items[:]
    rng.shuffle(shuffled)
    count = rng.randint(1, max_batches)
    cuts = sorted(rng.sample(range(1, len(shuffled)), count - 1)) if count > 1 else []
    bounds = [0, *cuts, len(shuffled)]
    return [shuffled[a:b] for a, b in zip(bounds, bounds[1:])]


def post(port: int, body: bytes, content_type: str, *, gzip_body: bool = False,
         headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    """POST to /v1/traces; returns (status, body, content type)."""
    all_headers = {"Content-Type": content_type}
    if gzip_body:
        body = gzip.compress(body)
        all_headers["Content-Encoding"] = "gzip"
    all_headers.update(headers or {})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body, headers=all_headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def grpc_export(port: int, body: bytes, *, compression: grpc.Compression | None = None) -> None:
    """Send one serialised request over OTLP/gRPC (raises grpc.RpcError on failure)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        export(body, timeout=60, compression=compression)


def audit_reports(paths: Iterable[Path] = FIXTURE_FILES) -> dict[str, dict[str, Any]]:
    """``otel-loopguard audit --json`` over ``paths``, keyed by trace id, without the source."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["audit", "--json", *map(str, paths)])
    reports: dict[str, dict[str, Any]] = {}
    for line in out.getvalue().splitlines():
        doc = json.loads(line)
        doc.pop("source")
        reports[doc["trace_id"]] = doc
    return reports


def as_reference(reports: Iterable[TraceReport]) -> dict[str, dict[str, Any]]:
    """Serve's reports in the same shape as :func:`audit_reports`."""
    out: dict[str, dict[str, Any]] = {}
    for report in reports:
        doc = report.as_dict()
        doc.pop("source")
        out[doc["trace_id"]] = doc
    return out


def event_key(event: VerdictEvent) -> tuple[Any, ...]:
    """What identifies an event across serve instances (the signature key is per process)."""
    t, i = event.transition, event.intervention
    return (
        f"{event.trace_id:032x}",
        # Absent parts as empty tuples / -1, so keys of one trace sort without comparing None with a value.
        event.span_context.span_id if event.span_context is not None else -1,
        event.verdict.kind, event.verdict.rule or "", event.steps,
        (t.step, t.previous, t.verdict.kind) if t else (),
        (i.step, i.action, i.rule or "") if i else (),
    )


class Harness:
    """A started :class:`Server` on free 127.0.0.1 ports with in-memory log and metric readers."""

    def __init__(self, config: LoopGuardConfig | None = None, *, idle: float = 30.0, grpc_on: bool = True,
                 http_on: bool = True, **kwargs: Any) -> None:
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.events: list[VerdictEvent] = []
        self.reports: list[TraceReport] = []
        self._cond = threading.Condition()
        self.server = Server(
            config or LoopGuardConfig(),
            grpc_address="127.0.0.1:0" if grpc_on else None,
            http_address="127.0.0.1:0" if http_on else None,
            idle=idle, logger_provider=self.logger_provider, meter_provider=self.meter_provider, **kwargs,
        )
        self.server.add_listener(self._on_event)
        self.server.add_report_listener(self._on_report)

    def _on_event(self, event: VerdictEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def _on_report(self, report: TraceReport) -> None:
        with self._cond:
            self.reports.append(report)
            self._cond.notify_all()

    def wait_reports(self, count: int, timeout: float = 60.0) -> bool:
        """Block until ``count`` traces were finished (a deadline: returns as soon as they are)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.reports) >= count, timeout)

    def points(self, name: str) -> list[Any]:
        """The data points of one metric recorded so far."""
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics if m.name == name
                for p in m.data.data_points]

    def metric_names(self) -> set[str]:
        """Names of the metrics recorded so far."""
        data = self.metrics.get_metrics_data()
        if data is None:
            return set()
        return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}

    def __enter__(self) -> Harness:
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.stop()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def served(path: Path) -> tuple[dict[str, Any], TraceReport]:
    """One OTLP/JSON file sent to a fresh ``serve``: its one trace's report once finished, and the partial success
    of the sender's next (empty) export, which tells what could not be read."""
    with Harness() as h:
        status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        assert h.wait_reports(1)
        status, body, _ = post(h.server.http_port, b'{"resourceSpans": []}', "application/json")
        assert status == 200
        [report] = h.reports
    return json.loads(body).get("partialSuccess", {}), report
