"""A real SDK pipeline around ``LoopGuardSpanProcessor``: tracer, logger and meter providers with in-memory readers.

Tests build spans with explicit start and end times (``Clock``), so verdicts, TTL evictions and span-event
timestamps never depend on the wall clock or on sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import Tracer, set_span_in_context

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, VerdictEvent
from tests.support.span_replay import ReplayIdGenerator

SCOPE = "otel_loopguard"
T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z in ns: far from "now", so nothing depends on the wall clock
SECOND = 10**9


@dataclass
class Clock:
    """Hands out strictly increasing span timestamps (ns), one second apart by default."""

    now: int = T0

    def tick(self, seconds: float = 1.0) -> int:
        """Advance and return the new time."""
        self.now += int(seconds * SECOND)
        return self.now


@dataclass
class Harness:
    """One real pipeline: TracerProvider(LoopGuardSpanProcessor, SimpleSpanProcessor(in-memory)), logs, metrics."""

    provider: TracerProvider
    processor: LoopGuardSpanProcessor
    span_exporter: InMemorySpanExporter
    log_exporter: InMemoryLogRecordExporter
    logger_provider: LoggerProvider
    meter_provider: MeterProvider
    reader: InMemoryMetricReader
    ids: ReplayIdGenerator
    received: list[VerdictEvent] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)

    @property
    def events(self) -> list[VerdictEvent]:
        """Listener events so far (after the processor judged every span it has queued)."""
        self.processor.force_flush()
        return self.received

    @property
    def tracer(self) -> Tracer:
        """A tracer of the provider under test."""
        return self.provider.get_tracer("tests.processor")

    def verdict_records(self) -> list[Any]:
        """Exported ``loopguard.verdict`` log records (SDK ``LogRecord`` objects), in emission order."""
        self.processor.force_flush()
        return [
            r.log_record for r in self.log_exporter.get_finished_logs()
            if r.log_record.event_name == "loopguard.verdict"
        ]

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        """Spans the exporter received, optionally only those named ``name``."""
        return [s for s in self.span_exporter.get_finished_spans() if name is None or s.name == name]

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Loopguard's metrics now: name → {"unit", "points": [{"attributes", value or histogram fields}]}."""
        self.processor.force_flush()
        data = self.reader.get_metrics_data()
        out: dict[str, dict[str, Any]] = {}
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                if sm.scope.name != SCOPE:
                    continue
                for metric in sm.metrics:
                    points = []
                    for p in metric.data.data_points:
                        point: dict[str, Any] = {"attributes": dict(p.attributes or {})}
                        if hasattr(p, "bucket_counts"):
                            point.update(count=p.count, sum=p.sum, bucket_counts=list(p.bucket_counts),
                                         explicit_bounds=list(p.explicit_bounds))
                        else:
                            point["value"] = p.value
                        points.append(point)
                    out[metric.name] = {"unit": metric.unit, "points": points}
        return out

    def total(self, name: str, **attributes: Any) -> float:
        """Sum of a counter's points (or a histogram's counts) whose attributes include ``attributes``."""
        metric = self.metrics().get(name)
        if metric is None:
            return 0
        total = 0
        for p in metric["points"]:
            if all(p["attributes"].get(k) == v for k, v in attributes.items()):
                total += p["value"] if "value" in p else p["count"]
        return total

    # -- span builders -------------------------------------------------------

    def start(self, name: str, attributes: dict[str, Any] | None = None, parent: Span | None = None,
              at: int | None = None) -> Span:
        """Start a span at ``at`` (the clock's next tick when None) under ``parent`` (a new trace when None)."""
        context = set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(  # type: ignore[return-value]
            name, context=context, attributes=attributes, start_time=at if at is not None else self.clock.tick()
        )

    def agent(self, name: str = "research_agent", parent: Span | None = None, **extra: Any) -> Span:
        """Start an ``invoke_agent`` span (a new trace's root when ``parent`` is None)."""
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **extra}
        return self.start(f"invoke_agent {name}", attrs, parent)

    def tool(self, parent: Span | None, tool: str = "search", args: Any = '{"query": "weather in Paris"}',
             result: Any = "sunny, 21C", *, error: str | None = None, duration: float = 0.5,
             **extra: Any) -> Span:
        """Run one GenAI ``execute_tool`` span to completion (start at the next tick, end ``duration`` s later)."""
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if args is not None:
            attrs["gen_ai.tool.call.arguments"] = args if isinstance(args, str) else json.dumps(args)
        if result is not None and error is None:
            attrs["gen_ai.tool.call.result"] = result
        if error is not None:
            attrs["error.type"] = error
        attrs.update(extra)
        span = self.start(f"execute_tool {tool}", attrs, parent)
        span.end(end_time=self.clock.tick(duration))
        return span

    def end(self, span: Span) -> None:
        """End a span at the clock's next tick.

        The processor judges queued spans first, as its background thread would long before a real agent
        or root span ends; that keeps the span-event assertions independent of thread timing.
        """
        self.processor.force_flush()
        span.end(end_time=self.clock.tick())


HarnessFactory = Callable[..., Harness]


@pytest.fixture
def make_harness() -> Iterator[HarnessFactory]:
    """Build pipelines: ``make_harness(config=..., sampler=..., resource=..., batch_logs=False, deferred=True,
    **processor options)``; all are shut down."""
    built: list[Harness] = []

    def factory(config: LoopGuardConfig | None = None, *, sampler: Sampler | None = None,
                resource: Resource | None = None, batch_logs: bool = False, deferred: bool = True, **options: Any) -> Harness:
        log_exporter = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        if batch_logs:
            # A long delay and a large batch: nothing leaves before a flush, so the test sees what force_flush does.
            logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(log_exporter, schedule_delay_millis=600_000, max_export_batch_size=512)
            )
        else:
            logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        ids = ReplayIdGenerator()
        kwargs: dict[str, Any] = {"id_generator": ids}
        if sampler is not None:
            kwargs["sampler"] = sampler
        if resource is not None:
            kwargs["resource"] = resource
        provider = TracerProvider(**kwargs)
        processor = LoopGuardSpanProcessor(
            config if config is not None else LoopGuardConfig(),
            logger_provider=logger_provider,
            meter_provider=meter_provider,
            deferred=deferred,
            **options,
        )
        span_exporter = InMemorySpanExporter()
        # Loopguard first, so the exporter after it proves later processors still see every span.
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        harness = Harness(provider, processor, span_exporter, log_exporter, logger_provider, meter_provider, reader,
                          ids)
        processor.add_listener(harness.received.append)
        built.append(harness)
        return harness

    yield factory
    for h in built:
        h.provider.shutdown()
        h.logger_provider.shutdown()
        h.meter_provider.shutdown()


@pytest.fixture
def harness(make_harness: HarnessFactory) -> Harness:
    """A pipeline with the default configuration."""
    return make_harness()
