"""The ``no_tool_calls`` cause of a trace whose other kinds of step (hand-offs, sub-agent invocations, model turns
with their input) were judged: none, unless a model span was offered tools."""

from __future__ import annotations

from otel_loopguard.conventions.unread import AGENT_TURNS_WITHOUT_CONTENT, NO_TOOL_CALLS, UnreadTrace
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import Step, TraceJudge
from otel_loopguard.core.model import STEP_AGENT, STEP_MODEL, ToolCall

_CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
_TOOLS = {**_CHAT, "gen_ai.tool.definitions": '[{"type": "function", "name": "search"}]'}
_TURN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}


def _reasons(spans: list[dict[str, object]], steps_judged: bool) -> list[str]:
    trace = UnreadTrace()
    for attrs in spans:
        trace.model(attrs)
    return [c.reason for c in trace.causes(steps_judged)]


def test_judged_steps_without_tools_offered_leave_no_note() -> None:
    """Two chat spans offered no tool, with other steps judged: nothing unread; without them, no_tool_calls."""
    assert _reasons([_CHAT, _CHAT], steps_judged=True) == []
    assert _reasons([_CHAT, _CHAT], steps_judged=False) == [NO_TOOL_CALLS]


def test_tools_offered_keep_the_note() -> None:
    """A chat span offered a tool: tool calls may have happened unread, so the note stays though steps were judged."""
    assert _reasons([_CHAT, _TOOLS], steps_judged=True) == [NO_TOOL_CALLS]


def test_bare_agent_turns_with_judged_steps_leave_no_note() -> None:
    """Bare agent turns whose sub-agent invocations were judged: the trace was read, no agent_turns note."""
    assert _reasons([_TURN, _TURN], steps_judged=False) == [AGENT_TURNS_WITHOUT_CONTENT]
    assert _reasons([_TURN, _TURN], steps_judged=True) == []


def test_tools_offered_survive_a_merge() -> None:
    """A batch whose model span was offered tools, merged into one that was not (serve): the note stays."""
    first, second = UnreadTrace(), UnreadTrace()
    first.model(_CHAT)
    second.model(_TOOLS)
    first.merge(second)
    assert [c.reason for c in first.causes(True)] == [NO_TOOL_CALLS]


def _judge(*steps: Step) -> TraceJudge:
    judge = TraceJudge(LoopEngine(LoopGuardConfig()))
    for step in steps:
        judge.add(step)
    judge.finish(None)
    return judge


def _step(span_id: int, kind: str, captured: bool) -> Step:
    call = ToolCall(tool="writer", arguments="digest", result="news" if captured else None, result_captured=captured)
    return Step(span_id=span_id, parent_span_id=None, start_ns=span_id, end_ns=span_id, call=call,
                kind=kind)  # type: ignore[arg-type]


def test_the_judge_says_which_steps_count_as_read() -> None:
    """A model turn with its input, or a sub-agent invocation, is read; a model turn without its input is not."""
    assert _judge(_step(1, STEP_MODEL, True)).lanes_read is True
    assert _judge(_step(1, STEP_AGENT, False)).lanes_read is True
    without_input = _judge(_step(1, STEP_MODEL, False))
    assert (without_input.has_lanes, without_input.lanes_read) == (True, False)
    assert _judge().lanes_read is False
