"""Shared pieces for reliability tests: a real in-memory SDK pipeline around the processor and tool-span helpers.

The outage and secrets tests use the suite-wide collector fixtures (``rotel``, ``otlp_receiver``) from
``tests/support/collector_fixtures.py``, with the same skip-or-fail policy as ``tests/e2e``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, VerdictEvent

KEY = b"reliability-test-key-0123456789"
T0 = 1_767_225_600 * 10**9  # a fixed epoch (ns) so TTLs and verdicts never depend on the wall clock
SECOND = 10**9
TOOL = {"gen_ai.operation.name": "execute_tool"}


def settle(processor: LoopGuardSpanProcessor) -> None:
    """Wait until the processor has judged every span ended so far, without flushing any exporter.

    The processor may judge spans off the application thread; ``verdict()`` drains that work first (documented),
    so after this call listeners have run and metrics are up to date.
    """
    processor.verdict(0)


@dataclass
class Pipeline:
    """TracerProvider(LoopGuardSpanProcessor, SimpleSpanProcessor(in-memory)) with in-memory logs and metrics."""

    provider: TracerProvider
    processor: LoopGuardSpanProcessor
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter
    logger_provider: LoggerProvider
    reader: InMemoryMetricReader
    meter_provider: MeterProvider
    events: list[VerdictEvent] = field(default_factory=list)

    def metric_total(self, name: str, **attributes: Any) -> float:
        """Sum of the data points (sums) or counts (histograms) of metric ``name`` whose attributes include ``attributes``."""
        settle(self.processor)
        data = self.reader.get_metrics_data()
        total = 0.0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        if all(point.attributes.get(k) == v for k, v in attributes.items()):
                            total += point.value if hasattr(point, "value") else point.count
        return total

    def shutdown(self) -> None:
        """Stop every provider of the pipeline."""
        self.provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def build_pipeline(config: LoopGuardConfig | None = None, *, export_spans: bool = True, **provider_args: Any) -> Pipeline:
    """A fresh pipeline; ``export_spans=False`` leaves out the span exporter (memory tests must not hold every span)."""
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logs = InMemoryLogRecordExporter()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    processor = LoopGuardSpanProcessor(
        config or LoopGuardConfig(signature_key=KEY), logger_provider=logger_provider, meter_provider=meter_provider
    )
    provider = TracerProvider(shutdown_on_exit=False, **provider_args)
    provider.add_span_processor(processor)
    spans = InMemorySpanExporter()
    if export_spans:
        provider.add_span_processor(SimpleSpanProcessor(spans))
    pipeline = Pipeline(provider, processor, spans, logs, logger_provider, reader, meter_provider)
    processor.add_listener(pipeline.events.append)
    return pipeline


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    """A pipeline with the default configuration and a fixed signature key."""
    built = build_pipeline()
    yield built
    built.shutdown()


