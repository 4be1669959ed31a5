"""Events and histogram records held for the end of a drain (deferred processor), and released in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_loopguard import VerdictEvent
from otel_loopguard.core.model import STUCK, WORKING, Intervention, Transition, Verdict
from otel_loopguard.sdk.emit import Emitter
from tests.processor.conftest import Harness, HarnessFactory


def _event(steps: int) -> VerdictEvent:
    verdict = Verdict(kind=STUCK, rule="period", step=steps - 1, period=1, repetitions=3, cycle_start=0)
    return VerdictEvent(trace_id=1, span_context=None, verdict=verdict,
                        transition=Transition(step=steps - 1, previous=WORKING, verdict=verdict),
                        intervention=Intervention(action="nudge", rule="period", message="same call", step=steps - 1),
                        tool="search",
                        agent=None, conversation=None, signature_digest=None, steps=steps, timestamp_ns=None)


def _histogram_counts(reader: InMemoryMetricReader, name: str) -> int:
    data = reader.get_metrics_data()
    total = 0
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    total += sum(p.count for p in metric.data.data_points)
    return total


def _failing_once(real: Callable[..., None]) -> Callable[..., None]:
    """``real``, except that its first call raises (a log pipeline that breaks once)."""
    calls: list[int] = []

    def fail_once(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("exporter pipeline broke")
        real(*args, **kwargs)

    return fail_once


def test_held_emissions_wait_for_release_and_leave_in_order() -> None:
    """After hold(), two events and a trace's histogram record reach nothing until release(); then the log records
    leave in the order the events happened, and the histogram holds one record. The counts change at once."""
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    emitter = Emitter(logger_provider, MeterProvider(metric_readers=[reader]), 100, "1")
    emitter.hold()
    emitter.emit(_event(3), None)
    emitter.emit(_event(4), None)
    emitter.trace_finished(STUCK, 4, None)
    assert logs.get_finished_logs() == ()
    assert _histogram_counts(reader, "loopguard.trace.steps") == 0
    emitter.release()
    assert [r.log_record.attributes["loopguard.steps"] for r in logs.get_finished_logs()] == [3, 4]
    assert _histogram_counts(reader, "loopguard.trace.steps") == 1
    emitter.release()  # nothing left: nothing sent twice
    assert len(logs.get_finished_logs()) == 2


def test_a_failing_emission_is_reported_and_the_others_still_leave() -> None:
    """release(on_error): the first of two held events fails inside the SDK's logger; it is reported once and the
    second still leaves."""
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    emitter = Emitter(logger_provider, MeterProvider(), 100, "1")
    emitter.hold()
    emitter.emit(_event(3), None)
    emitter.emit(_event(4), None)
    emitter._logger.emit = _failing_once(emitter._logger.emit)  # type: ignore[method-assign]
    failures: list[Exception] = []
    emitter.release(failures.append)
    assert [str(e) for e in failures] == ["exporter pipeline broke"]
    assert [r.log_record.attributes["loopguard.steps"] for r in logs.get_finished_logs()] == [4]


def test_processor_counts_an_emission_failure_and_keeps_judging(harness: Harness,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferred: four identical calls give a nudge and a stop event (see test_events); the nudge's log record fails
    in the SDK at the end of the drain, so one processor error is counted and only the stop leaves."""
    h = harness
    logger = h.processor._emitter._logger
    monkeypatch.setattr(logger, "emit", _failing_once(logger.emit))
    agent = h.agent()
    for _ in range(4):
        h.tool(agent)
    h.end(agent)
    [stop] = h.verdict_records()
    assert stop.attributes["loopguard.intervention"] == "stop"
    assert h.processor.errors == 1


def test_inline_processor_holds_nothing(make_harness: HarnessFactory) -> None:
    """deferred=False: the nudge's log record is exported before the span that caused it returns from end()."""
    h = make_harness(deferred=False)
    agent = h.agent()
    for _ in range(3):
        h.tool(agent)
    [nudge] = [r.log_record for r in h.log_exporter.get_finished_logs()]
    assert nudge.attributes["loopguard.intervention"] == "nudge"
