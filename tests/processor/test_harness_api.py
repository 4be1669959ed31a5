"""The in-process harness API: ``check``, ``verdict``, ``raise_if_stop``, listeners, MCP and conversations."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace

from otel_loopguard import LoopGuardConfig, LoopStopped, VerdictEvent
from tests.processor.conftest import Harness, HarnessFactory


def test_check_in_current_span_nudge_once_then_stop_stays(harness: Harness) -> None:
    """``check()`` answers for the current span's trace: nudge right after the trigger only, then a stop that stays."""
    h = harness
    agent = h.agent()
    with trace.use_span(agent, end_on_exit=False):
        assert h.processor.check().action == "none"
        for _ in range(3):
            h.tool(agent)
        nudge = h.processor.check()
        assert nudge.action == "nudge" and nudge.step == 2
        assert "Try a different approach" in nudge.message
        nudge.raise_if_stop()  # a nudge never raises
        h.tool(agent, tool="read", args={"doc": 1}, result="the document")  # a new result: recovered
        assert h.processor.check().action == "none"
        assert h.processor.check().action == "none"  # still none before the loop resumes
        h.tool(agent)
        # The fourth identical search in the window is stuck again by frequency, and one nudge was already spent.
        stop = h.processor.check()
        assert stop.action == "stop" and stop.step == 4 and stop.rule == "frequency"
        h.tool(agent, tool="other", args={"x": 2})
        assert h.processor.check() == stop
        with pytest.raises(LoopStopped) as raised:
            h.processor.check().raise_if_stop()
        assert raised.value.intervention is stop
        assert "loopguard stopped the run" in str(raised.value)
    h.end(agent)


def test_check_and_verdict_by_trace_id(harness: Harness) -> None:
    """``check(trace_id)`` and ``verdict(trace_id)`` work outside any span; unknown traces answer none, finished
    ones their last verdict (a nudge is not repeated after the root ended)."""
    h = harness
    agent = h.agent()
    trace_id = agent.get_span_context().trace_id
    assert h.processor.verdict(trace_id) is None
    for _ in range(3):
        h.tool(agent)
    assert trace.get_current_span().get_span_context().is_valid is False
    assert h.processor.check(trace_id).action == "nudge"
    verdict = h.processor.verdict(trace_id)
    assert verdict is not None
    assert (verdict.kind, verdict.rule, verdict.period, verdict.repetitions, verdict.cycle_start, verdict.tool) == (
        "stuck", "period", 1, 3, 0, "search")
    assert h.processor.check(trace_id + 1).action == "none"
    assert h.processor.check().action == "none"  # no current span
    h.end(agent)
    assert h.processor.verdict(trace_id) == verdict
    assert h.processor.check(trace_id).action == "none"
    assert h.processor.tracked_traces == 0


def test_a_stopped_trace_stays_stopped_after_its_root_ended(harness: Harness) -> None:
    """After the root ends, verdict() still answers and check() still says stop for a stopped trace."""
    h = harness
    agent = h.agent()
    trace_id = agent.get_span_context().trace_id
    for _ in range(4):  # stuck and nudged at the third identical call, stopped at the fourth
        h.tool(agent)
    h.end(agent)
    assert h.processor.tracked_traces == 0
    stop = h.processor.check(trace_id)
    assert (stop.action, stop.step) == ("stop", 3)
    verdict = h.processor.verdict(trace_id)
    assert verdict is not None and verdict.kind == "stuck"


def test_listeners_receive_events(harness: Harness) -> None:
    """Listeners get one ``VerdictEvent`` per transition or intervention, on the thread that ended the span."""
    h = harness
    received: list[VerdictEvent] = []
    h.processor.add_listener(received.append)
    agent = h.agent()
    tools = [h.tool(agent) for _ in range(4)]
    h.end(agent)
    assert [(e.transition is not None, e.intervention.action if e.intervention else None) for e in received] == [
        (True, "nudge"), (False, "stop")]
    first = received[0]
    assert first.trace_id == agent.get_span_context().trace_id
    assert first.span_context == tools[2].get_span_context()
    assert (first.tool, first.agent, first.steps) == ("search", "research_agent", 3)
    assert first.timestamp_ns == tools[2].end_time
    assert first.signature_digest and len(first.signature_digest) >= 16


def test_raising_listener_is_counted_not_raised(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A listener that raises is counted in ``errors`` and ``loopguard.processor.errors``; later listeners still run."""
    h = harness
    after: list[VerdictEvent] = []

    def broken(event: VerdictEvent) -> None:
        raise KeyError("listener bug")

    h.processor.add_listener(broken)
    h.processor.add_listener(after.append)
    agent = h.agent()
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        for _ in range(4):
            h.tool(agent)  # would raise here if the listener's error escaped
    h.end(agent)
    assert len(after) == 2
    assert h.processor.errors == 2
    assert h.metrics()["loopguard.processor.errors"]["points"] == [{"attributes": {"error.type": "KeyError"},
                                                                  "value": 2}]
    assert h.metrics()["loopguard.processor.errors"]["unit"] == "{error}"
    assert len([r for r in caplog.records if r.name.startswith("otel_loopguard")]) == 1
    assert len(h.finished()) == 5


def test_mcp_client_span_under_execute_tool_counts_once(harness: Harness) -> None:
    """An MCP ``tools/call`` child of an ``execute_tool`` span is the same call: three calls, not six."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        outer = h.start("execute_tool search", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": "a"}', "gen_ai.tool.call.result": "r"}, parent=agent)
        inner = h.start("tools/call search", {
            "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": "a"}', "gen_ai.tool.call.result": "r"}, parent=outer)
        h.end(inner)
        h.end(outer)
    assert [e.steps for e in h.events] == [3]
    assert h.events[0].intervention.action == "nudge"
    h.end(agent)
    assert h.total("loopguard.tool_calls") == 3
    [steps] = h.metrics()["loopguard.trace.steps"]["points"]
    assert steps["sum"] == 3


def test_mcp_span_without_enclosing_tool_span_counts(harness: Harness) -> None:
    """An MCP client span directly under the agent is a tool call of its own."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        h.tool(agent, **{"mcp.method.name": "tools/call"})
    assert h.processor.check(agent.get_span_context().trace_id).action == "nudge"


def test_per_conversation_shares_state_across_traces(make_harness: HarnessFactory) -> None:
    """With ``per_conversation=True`` two traces of one conversation share one loop state."""
    h = make_harness(LoopGuardConfig(per_conversation=True))
    conv = {"gen_ai.conversation.id": "conv-42"}
    first = h.agent(**conv)
    for _ in range(2):
        h.tool(first, **conv)
    h.end(first)
    assert h.events == []
    second = h.agent(**conv)
    h.tool(second, **conv)
    second_id = second.get_span_context().trace_id
    assert second_id != first.get_span_context().trace_id
    assert [e.intervention.action for e in h.events] == ["nudge"]
    assert h.events[0].trace_id == second_id
    assert h.events[0].steps == 3
    assert h.processor.check(second_id).action == "nudge"
    assert h.processor.verdict(second_id).kind == "stuck"
    h.end(second)


def test_per_trace_by_default(harness: Harness) -> None:
    """Without ``per_conversation`` the same conversation in two traces keeps separate states."""
    h = harness
    conv = {"gen_ai.conversation.id": "conv-42"}
    first = h.agent(**conv)
    for _ in range(2):
        h.tool(first, **conv)
    h.end(first)
    second = h.agent(**conv)
    h.tool(second, **conv)
    assert h.events == []
    assert h.processor.verdict(second.get_span_context().trace_id).kind == "working"
