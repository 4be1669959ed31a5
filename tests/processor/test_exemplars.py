"""Exemplars: loopguard's metric records are made outside any span, and ``serve``'s providers keep none by default."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    MeterProvider,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_loopguard.sdk.emit import Emitter
from otel_loopguard.sdk.providers import exemplar_filter

SAMPLED = SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED))


def _histogram_points(reader: InMemoryMetricReader) -> dict[str, list[HistogramDataPoint]]:
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[HistogramDataPoint]] = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                found = [p for p in metric.data.data_points if isinstance(p, HistogramDataPoint)]
                if found:
                    points[metric.name] = found
    return points


def _record_inside_a_sampled_span(meter_provider: MeterProvider) -> None:
    """A finished trace and agent recorded while an application's sampled span is current (as when check() or
    force_flush() drains the processor on the application's thread)."""
    emitter = Emitter(LoggerProvider(), meter_provider, 10, "1")
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(SAMPLED)))
    try:
        emitter.trace_finished("working", 5, 0.25)
        emitter.agent_finished("researcher", 5)
    finally:
        context.detach(token)


def test_records_inside_an_application_span_take_it_as_no_exemplar() -> None:
    """A user's provider with the SDK's default (trace-based) filter: the span current when loopguard records a
    finished trace is not that trace's, so none of the three histograms keeps an exemplar pointing at it."""
    reader = InMemoryMetricReader()
    _record_inside_a_sampled_span(MeterProvider(metric_readers=[reader], exemplar_filter=TraceBasedExemplarFilter()))
    points = _histogram_points(reader)
    # Three histograms recorded once each: trace steps (5), trace cost (0.25), the agent's tool calls (5).
    assert sorted(points) == ["gen_ai.invoke_agent.tool_calls", "loopguard.trace.cost", "loopguard.trace.steps"]
    for name, found in points.items():
        assert [(p.count, p.sum) for p in found] == [(1, 0.25 if name == "loopguard.trace.cost" else 5)], name
        assert [list(p.exemplars) for p in found] == [[]], name


def test_always_on_still_gives_exemplars_without_a_trace_link() -> None:
    """Whoever asks for every record as an exemplar gets it (value 5), with no span: none was ours to give."""
    reader = InMemoryMetricReader()
    _record_inside_a_sampled_span(MeterProvider(metric_readers=[reader], exemplar_filter=AlwaysOnExemplarFilter()))
    [point] = _histogram_points(reader)["loopguard.trace.steps"]
    [exemplar] = point.exemplars
    assert (exemplar.value, exemplar.trace_id, exemplar.span_id) == (5, None, None)


@pytest.mark.parametrize(("value", "expected"), [
    (None, AlwaysOffExemplarFilter),  # unset: off, not the SDK's trace-based default
    ("", AlwaysOffExemplarFilter),
    ("always_on", AlwaysOnExemplarFilter),
    (" Trace_Based ", TraceBasedExemplarFilter),  # the names are matched trimmed and case-insensitively
    ("always_off", AlwaysOffExemplarFilter),
])
def test_serve_exemplar_filter_follows_the_standard_variable(value: str | None, expected: type) -> None:
    environ = {} if value is None else {"OTEL_METRICS_EXEMPLAR_FILTER": value}
    assert type(exemplar_filter(environ)) is expected


def test_unknown_exemplar_filter_warns_and_turns_exemplars_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        chosen = exemplar_filter({"OTEL_METRICS_EXEMPLAR_FILTER": "sometimes"})
    assert type(chosen) is AlwaysOffExemplarFilter
    assert "'sometimes'" in caplog.text
