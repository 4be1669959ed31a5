"""The processor never raises into the application, never starves later processors, and logs failures once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_loopguard import LoopGuardConfig
from tests.processor.conftest import Harness, HarnessFactory

HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("int tool name", {"gen_ai.tool.name": 42}),
    ("list tool name", {"gen_ai.tool.name": ["a", "b"]}),
    ("dict tool name", {"gen_ai.tool.name": {"nested": "name"}}),
    ("non-json args", {"gen_ai.tool.call.arguments": "{not json at all"}),
    ("bytes args", {"gen_ai.tool.call.arguments": b"\x00\xff\xfe"}),
    ("huge args", {"gen_ai.tool.call.arguments": '{"q": "' + "x" * 3_000_000 + '"}'}),
    ("deep json args", {"gen_ai.tool.call.arguments": "[" * 50_000 + "]" * 50_000}),
    ("deep dict args", {"gen_ai.tool.call.arguments": {"a": {"b": {"c": {"d": {"e": [1, {"f": None}]}}}}}}),
    ("dict result", {"gen_ai.tool.call.result": {"rows": [1, 2], "x": {"y": "z"}}}),
    ("float args", {"gen_ai.tool.call.arguments": float("nan")}),
    ("bool operation", {"gen_ai.operation.name": True}),
    ("dict operation", {"gen_ai.operation.name": {"op": "execute_tool"}}),
    ("dict openinference kind", {"openinference.span.kind": {"k": "TOOL"}, "gen_ai.operation.name": None}),
    ("list traceloop kind", {"traceloop.span.kind": ["tool"], "gen_ai.operation.name": None}),
    ("bad lease deadline", {"loopguard.wait.owner": "ci", "loopguard.wait.deadline": "tomorrow"}),
    ("dict lease", {"loopguard.wait.owner": {"o": 1}, "loopguard.wait.deadline": 1e30}),
    ("dict progress", {"loopguard.progress": {"p": 1}}),
    ("dict conversation", {"gen_ai.conversation.id": {"c": 1}}),
    ("huge error type", {"error.type": "E" * 100_000}),
    ("redacted", {"gen_ai.tool.call.arguments": "__REDACTED__", "gen_ai.tool.call.result": "__REDACTED__"}),
]


@pytest.mark.parametrize("attrs", [a for _, a in HOSTILE], ids=[name for name, _ in HOSTILE])
def test_hostile_attributes_never_reach_the_with_block(harness: Harness, attrs: dict[str, Any]) -> None:
    """Spans with hostile attribute types and sizes raise nothing in the ``with`` block and all reach the exporter."""
    h = harness
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "r"}
    merged = {k: v for k, v in {**base, **attrs}.items() if v is not None}
    with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for _ in range(4):
            with h.tracer.start_as_current_span("execute_tool", attributes=merged):
                pass
    assert len(h.finished()) == 5
    assert h.processor.tracked_traces == 0
    # Hostile values are data to judge (or to ignore), not failures of the processor.
    assert h.processor.errors == 0


def test_hostile_values_are_judged_not_errors(harness: Harness) -> None:
    """Unusual but valid attribute types (int tool name, non-JSON args, bytes, dicts) are judged, not errors."""
    h = harness
    for _, attrs in HOSTILE[:10]:
        with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for _ in range(3):
                with h.tracer.start_as_current_span("execute_tool", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "r", **attrs}):
                    pass
    assert h.processor.errors == 0
    # Ten traces of three identical calls each: ten nudges.
    assert [e.intervention.action for e in h.events if e.intervention] == ["nudge"] * 10


def test_end_before_start_no_parent_and_zero_duration(harness: Harness) -> None:
    """Tool spans ending before they start, without any parent, or with zero duration are handled quietly."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        span = h.start("execute_tool search", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                                               "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "r"},
                       parent=agent)
        span.end(end_time=span.start_time - 5 * 10**9)
    assert h.processor.check(agent.get_span_context().trace_id).action == "nudge"
    for _ in range(3):
        h.tool(None)  # each is the root of its own trace
        at = h.clock.tick()
        h.start("execute_tool search", {"gen_ai.operation.name": "execute_tool"}, agent, at=at).end(end_time=at)
    h.end(agent)
    assert h.processor.errors == 0
    assert h.processor.tracked_traces == 0
    assert len(h.finished()) == 10


class _ConstantIds(IdGenerator):
    """Every span gets the same span id, and every trace the same trace id."""

    def generate_span_id(self) -> int:
        return 0xABCDEF

    def generate_trace_id(self) -> int:
        return 0x1234


def test_duplicated_span_ids(make_harness: HarnessFactory) -> None:
    """Spans sharing one span id (a broken id generator) raise nothing and are all exported."""
    h = make_harness()
    provider = TracerProvider(id_generator=_ConstantIds())
    provider.add_span_processor(h.processor)
    provider.add_span_processor(SimpleSpanProcessor(h.span_exporter))
    tracer = provider.get_tracer("dup")
    for _ in range(2):
        with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for _ in range(4):
                with tracer.start_as_current_span("execute_tool", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "r"}):
                    pass
    assert len(h.finished()) == 10
    assert h.processor.errors == 0
    assert h.processor.tracked_traces == 0


def test_internal_failure_counted_and_logged_once(harness: Harness, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A failing engine is counted per span, logged once, and every span still reaches the exporter."""
    h = harness

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(h.processor._engine, "observe", broken)
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        with h.tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for _ in range(25):
                with h.tracer.start_as_current_span("execute_tool", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}):
                    pass
    assert h.processor.errors == 25
    assert h.metrics()["loopguard.processor.errors"]["points"] == [
        {"attributes": {"error.type": "RuntimeError"}, "value": 25}]
    ours = [r for r in caplog.records if r.name.startswith("otel_loopguard")]
    assert len(ours) == 1
    assert "engine exploded" in ours[0].getMessage() and ours[0].levelno == logging.WARNING
    assert len(h.finished()) == 26
    assert h.verdict_records() == []


def test_force_flush_delivers_batched_events(make_harness: HarnessFactory) -> None:
    """Through a ``BatchLogRecordProcessor``, pending verdict events leave on ``force_flush``."""
    h = make_harness(LoopGuardConfig(), batch_logs=True)
    agent = h.agent()
    for _ in range(4):
        h.tool(agent)
    assert h.log_exporter.get_finished_logs() == ()
    assert h.processor.force_flush(30_000) is True
    assert [r.attributes["loopguard.intervention"] for r in h.verdict_records()] == ["nudge", "stop"]
    h.end(agent)


def test_force_flush_without_sdk_logger_provider() -> None:
    """``force_flush`` is true when the logger provider has nothing to flush (the global no-op API provider)."""
    from opentelemetry._logs import NoOpLoggerProvider
    from opentelemetry.metrics import NoOpMeterProvider

    from otel_loopguard import LoopGuardSpanProcessor

    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=NoOpLoggerProvider(),
                                       meter_provider=NoOpMeterProvider())
    assert processor.force_flush() is True


def test_shutdown_twice_and_spans_after_shutdown_ignored(harness: Harness) -> None:
    """``shutdown`` releases tracked traces, is safe twice, and later spans are ignored but still exported."""
    h = harness
    open_agent = h.agent()
    h.tool(open_agent)
    assert h.processor.tracked_traces == 1
    h.processor.shutdown()
    h.processor.shutdown()
    assert h.processor.tracked_traces == 0
    assert h.total("loopguard.traces.active") == 0
    [steps] = h.metrics()["loopguard.trace.steps"]["points"]
    assert steps["count"] == 1
    agent = h.agent()
    for _ in range(4):
        h.tool(agent)
    h.end(agent)
    assert h.events == [] and h.verdict_records() == []
    assert h.processor.tracked_traces == 0
    assert h.processor.errors == 0
    assert len(h.finished()) == 1 + 4 + 1
