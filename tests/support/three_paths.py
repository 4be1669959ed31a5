"""One recorded fixture through the processor, ``serve`` and ``audit``, for tests that compare what each path
reports about it (the verdict sequences are compared by tests/integration/test_four_paths_judge_alike.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.processor import LoopGuardSpanProcessor
from otel_loopguard.serve.server import Server
from tests.support.span_replay import ReplayIdGenerator, replay_spans


def audit_reports(path: Path) -> list[Any]:
    """``audit``'s reports of the file's traces."""
    collector = TraceCollector(LoopEngine(LoopGuardConfig()))
    list(collector.add_all(read_spans(str(path)), str(path)))
    return [r for r in collector.finish() if r.trace_id]


def serve_reports(path: Path) -> list[Any]:
    """``serve``'s reports of the file's traces (ingested in one request, then finished)."""
    return serve_batches([list(read_spans(str(path)))])[0]


def serve_batches(batches: Iterable[list[Any]]) -> tuple[list[Any], Any]:
    """``serve``'s reports and counters after it received ``batches`` (one request each), then finished."""
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    server = Server(LoopGuardConfig(), grpc_address=None, http_address=None, idle=3600,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    reports: list[Any] = []
    server.add_report_listener(reports.append)
    try:
        for batch in batches:
            server.ingest(batch)
        server.finish_all()
    finally:
        logger_provider.shutdown()
        meter_provider.shutdown()
    return reports, server.stats()


def processor_points(path: Path, metric: str) -> list[Any]:
    """The data points of ``metric`` after the file's spans were replayed through a live processor."""
    ids = ReplayIdGenerator()
    reader = InMemoryMetricReader()
    provider, meter_provider = TracerProvider(id_generator=ids), MeterProvider(metric_readers=[reader])
    logger_provider = LoggerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logger_provider,
                                       meter_provider=meter_provider, deferred=False)
    provider.add_span_processor(processor)
    try:
        replay_spans(provider, list(read_spans(str(path))), ids=ids)
        provider.force_flush()
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
        logger_provider.shutdown()
        meter_provider.shutdown()
    return [p for rm in (data.resource_metrics if data else ()) for sm in rm.scope_metrics for m in sm.metrics
            if m.name == metric for p in m.data.data_points]
