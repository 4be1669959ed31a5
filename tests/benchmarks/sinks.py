"""Exporters that count what they are handed and keep none of it: the benchmarks' sinks.

A sink that kept its input would grow during a run and be measured with the code under test; counting lets a
benchmark check that the work it timed really reached the exporter.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class DropSpans(SpanExporter):
    """Counts exported spans (``spans``)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class DropLogs(LogRecordExporter):
    """Counts exported log records (``records``); safe to read from another thread while batches arrive."""

    def __init__(self) -> None:
        self.records = 0
        self._lock = threading.Lock()

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        with self._lock:  # once per batch, not per record
            self.records += len(batch)
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


class DropMetrics(MetricExporter):
    """Counts metric exports (``exports``), with the SDK's default temporality and aggregation."""

    def __init__(self) -> None:
        super().__init__(preferred_temporality={}, preferred_aggregation={})
        self.exports = 0

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.exports += 1
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass
