"""A failed tool call that only the model's messages record (Anthropic ``tool_result`` with ``"is_error": true``)
is read as a failed call by every path: processor, ``serve``, ``audit`` and ``calibrate``.

The two fixtures were recorded from the real packages (``tests/fixtures/generate/model_spans_runs.py``): the
scripted agent calls ``get_quote(ACME)`` three times; the first two results are ``tool_result`` blocks with
``"is_error": true`` and the text ``Error: RateLimitError: 429 Too Many Requests: retry after 1s``, the third is
``ACME: 101.5 USD``. So each trace has 3 derived tool calls, 2 of them failed (read by eye from the JSON files).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.calibrate import replay_judge
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.processor import LoopGuardSpanProcessor
from otel_loopguard.serve.server import Server
from tests.support.span_replay import ReplayIdGenerator, replay_spans

MODEL_SPANS = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "model_spans"
FIXTURES = [MODEL_SPANS / "anthropic_openinference__errors_then_success.json",
            MODEL_SPANS / "anthropic_traceloop_0_53__errors_then_success.json"]
#: (tool calls, failed calls) of each fixture's one trace, counted by hand (module docstring).
EXPECTED = (3, 2)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_audit_counts_the_failed_calls(path: Path) -> None:
    """``audit`` reads the two ``is_error`` results as failed calls of the trace's three."""
    collector = TraceCollector(LoopEngine(LoopGuardConfig()))
    list(collector.add_all(read_spans(str(path)), str(path)))
    [report] = [r for r in collector.finish() if r.trace_id]
    assert (report.steps_used, report.failed_calls) == EXPECTED


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_calibrate_counts_the_failed_calls(path: Path) -> None:
    """``calibrate`` replays the trace with the two ``is_error`` results as failed calls."""
    config = LoopGuardConfig()
    [trace] = read_traces([(str(path), None)], config).traces
    judge = replay_judge(trace, LoopEngine(config))
    assert (judge.steps, judge.failed_calls) == EXPECTED


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_serve_counts_the_failed_calls(path: Path) -> None:
    """``serve`` reports the two ``is_error`` results as failed calls of the trace's three."""
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    server = Server(LoopGuardConfig(), grpc_address=None, http_address=None, idle=3600,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    reports: list = []
    server.add_report_listener(reports.append)
    try:
        server.ingest(list(read_spans(str(path))))
        server.finish_all()
    finally:
        logger_provider.shutdown()
        meter_provider.shutdown()
    [report] = reports
    assert (report.steps_used, report.failed_calls) == EXPECTED


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_processor_counts_the_failed_calls(path: Path) -> None:
    """The processor's ``loopguard.task.tool_errors`` for the replayed trace is 2 of 3 tool calls."""
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
    sums = {m.name: sum(p.sum for p in m.data.data_points)
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name in ("loopguard.task.tool_calls", "loopguard.task.tool_errors")}
    assert (sums["loopguard.task.tool_calls"], sums["loopguard.task.tool_errors"]) == EXPECTED
