"""Shared pieces for reliability tests: a real in-memory SDK pipeline around the processor, tool-span helpers,
and the collector fixtures (rotel forwarding to a recording OTLP receiver) for the outage and secrets tests.

Collector tests follow the ``tests/e2e`` policy: skipped when rotel cannot run here, failed instead under
``LOOPGUARD_REQUIRE_E2E=1`` (CI). The variable is read at import, before the autouse fixture clears ``LOOPGUARD_*``.
"""

from __future__ import annotations

import os
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
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.rotel import RotelCollector, rotel_available

REQUIRE_E2E = os.environ.get("LOOPGUARD_REQUIRE_E2E", "").strip() == "1"
ROTEL_AGENT_OVERRIDE = os.environ.get("LOOPGUARD_E2E_ROTEL_AGENT") or None

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


# --- collector fixtures (same policy as tests/e2e) -------------------------------------------------------------


@pytest.fixture(scope="session")
def rotel_unavailable_reason() -> str | None:
    """Why rotel cannot run in this session, or None; checked once."""
    return rotel_available(ROTEL_AGENT_OVERRIDE)


@pytest.fixture
def otlp_receiver() -> Iterator[RecordingOTLPReceiver]:
    """A fresh recording OTLP/gRPC backend on a free 127.0.0.1 port."""
    with RecordingOTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def rotel(rotel_unavailable_reason: str | None, otlp_receiver: RecordingOTLPReceiver) -> Iterator[RotelCollector]:
    """A running rotel-agent forwarding every signal to ``otlp_receiver`` (skips or fails when rotel cannot run)."""
    if rotel_unavailable_reason is not None:
        message = f"rotel collector unavailable: {rotel_unavailable_reason}"
        if REQUIRE_E2E:
            pytest.fail(f"{message} (LOOPGUARD_REQUIRE_E2E=1 makes this a failure)", pytrace=False)
        pytest.skip(message)
    collector = RotelCollector(otlp_receiver.endpoint, agent=ROTEL_AGENT_OVERRIDE)
    collector.start()
    try:
        yield collector
    finally:
        collector.stop()
        print(collector.diagnostics(1500))
        collector.remove_files()
