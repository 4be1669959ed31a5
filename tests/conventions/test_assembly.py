"""The live paths' shared per-trace record: agent attribution, turn keeping and logging unread causes once."""

from __future__ import annotations

from otel_loopguard.conventions.assembly import MAX_TOOL_ENDS, MAX_UNREAD_LOGGED, AgentSpan, TraceRecord, UnreadLog
from otel_loopguard.conventions.unread import NO_TOOL_CALLS, UNKNOWN_ATTRIBUTES, Unread


def test_each_call_counts_for_the_innermost_agent_holding_its_end() -> None:
    """Calls ending at 15 and 25 fall in the inner agent (10-30), the call at 40 in the outer (0-100) only."""
    record = TraceRecord()
    record.agents += [AgentSpan(1, "outer", start_ns=0, end_ns=100), AgentSpan(2, "inner", start_ns=10, end_ns=30)]
    for end in (15, 25, 40):
        record.tool_ended(end)
    assert (record.agent_at(15), record.agent_at(40), record.agent_at(200)) == ("inner", "outer", None)
    assert record.agent_calls() == (("outer", 1), ("inner", 2))
    assert record.agent_calls() == ()  # each agent is told once


def test_a_single_agent_counts_the_calls_its_time_holds() -> None:
    """One agent span from 5 to 20 holds the calls that ended at 5 and 20, not the one at 21."""
    record = TraceRecord()
    record.agents.append(AgentSpan(1, "solo", start_ns=5, end_ns=20))
    for end in (5, 20, 21):
        record.tool_ended(end)
    assert record.calls_between(5, 20) == 2
    assert record.agent_calls() == (("solo", 2),)


def test_tool_call_end_times_are_bounded() -> None:
    """A trace keeps the first MAX_TOOL_ENDS end times and drops the rest."""
    record = TraceRecord()
    for end in range(MAX_TOOL_ENDS + 5):
        record.tool_ended(end)
    assert len(record.tool_ends) == MAX_TOOL_ENDS
    assert record.tool_ends[-1] == MAX_TOOL_ENDS - 1


def test_a_tool_span_stops_deriving_calls_from_model_spans() -> None:
    """Turns made before a tool span stop deriving at it; turns made after one never derive."""
    before = TraceRecord()
    assert before.turns_now().judge.derive
    assert before.tools_seen() is before.turns and before.has_tools
    assert before.turns is not None and not before.turns.judge.derive
    after = TraceRecord()
    assert after.tools_seen() is None
    assert not after.turns_now().judge.derive
    assert after.model_calls() == 0


def test_a_refused_model_call_marks_the_trace_refused() -> None:
    """A model span whose finish reason is a content filter makes the task's outcome refused."""
    record = TraceRecord()
    record.model_read({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ("stop",)})
    assert not record.refused
    record.model_read({"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ("content_filter",)})
    assert record.refused


def test_each_unread_cause_is_logged_once_up_to_the_limit() -> None:
    """A cause (reason and keys) is new once, whatever its span count; past the limit nothing more is logged."""
    log = UnreadLog()
    cause = Unread(UNKNOWN_ATTRIBUTES, ("my.args",), 3)
    assert log.first(cause)
    assert not log.first(cause._replace(spans=9))
    assert log.first(Unread(NO_TOOL_CALLS, ("my.args",), 1))
    fresh = [log.first(Unread(UNKNOWN_ATTRIBUTES, (f"k{i}",), 1)) for i in range(MAX_UNREAD_LOGGED)]
    assert fresh.count(True) == MAX_UNREAD_LOGGED - 2
