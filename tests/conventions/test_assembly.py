"""The live paths' shared per-trace record: agent attribution, turn keeping, model spans, the task outcome and
logging unread causes once."""

from __future__ import annotations

from otel_loopguard.conventions.assembly import (
    MAX_TOOL_ENDS,
    MAX_UNREAD_LOGGED,
    OPEN_NS,
    AgentSpan,
    TraceRecord,
    UnreadLog,
)
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.live import MAX_AGENTS, LiveTrace
from otel_loopguard.conventions.unread import NO_TOOL_CALLS, UNKNOWN_ATTRIBUTES, Unread
from otel_loopguard.core.agent_steps import LANE_SPAN_BIT
from otel_loopguard.core.config import LoopGuardConfig


def test_each_call_counts_for_the_innermost_agent_holding_its_end() -> None:
    """Calls ending at 15 and 25 fall in the inner agent (10-30), the call at 40 in the outer (0-100) only."""
    record = TraceRecord()
    record.agents += [AgentSpan(1, "outer", start_ns=0, end_ns=100), AgentSpan(2, "inner", start_ns=10, end_ns=30)]
    for end in (15, 25, 40):
        record.tool_ended(end)
    assert (record.agent_at(15), record.agent_at(40), record.agent_at(200)) == ("inner", "outer", None)
    assert record.agent_calls() == (("outer", 1), ("inner", 2))
    assert record.agent_calls() == ()  # each agent is told once


def test_an_open_agent_span_holds_every_time_after_its_start() -> None:
    """An agent span still open (ending at OPEN_NS) names a call ending at 10**15, not one ending before its start."""
    record = TraceRecord()
    record.agents.append(AgentSpan(1, "open", start_ns=50, end_ns=OPEN_NS))
    assert (record.agent_at(10**15), record.agent_at(50), record.agent_at(49)) == ("open", "open", None)


def test_equal_starts_name_the_agent_span_that_ends_first() -> None:
    """Two agent spans both starting at 10: the one ending at 30 is the inner one, whichever was noted first; the
    call ending at 40 is only in the one ending at 100."""
    for order in ((0, 1), (1, 0)):
        spans = [AgentSpan(1, "outer", start_ns=10, end_ns=100), AgentSpan(2, "inner", start_ns=10, end_ns=30)]
        record = TraceRecord()
        record.agents += [spans[i] for i in order]
        record.tool_ended(20)
        record.tool_ended(40)
        assert (record.agent_at(20), record.agent_at(40)) == ("inner", "outer")
        assert sorted(record.agent_calls()) == [("inner", 1), ("outer", 1)]


def test_an_ended_agent_span_still_names_a_call_its_time_holds() -> None:
    """Closed at 30, an agent span (10-30) names a call that ended at 25 and was judged after its end; its span
    reference is dropped."""
    agent = AgentSpan(1, "inner", start_ns=10, end_ns=OPEN_NS)
    record = TraceRecord()
    record.agents.append(agent)
    agent.close(30)
    assert (record.agent_at(25), record.agent_at(31), agent.span()) == ("inner", None, None)


def test_a_full_live_record_gives_way_with_its_oldest_ended_agent_span() -> None:
    """With MAX_AGENTS agent spans kept, a new one replaces the first ended one; when all are open, it is not kept."""
    record = LiveTrace()
    for i in range(MAX_AGENTS):
        record.add_agent(AgentSpan(i, f"a{i}", start_ns=i, end_ns=OPEN_NS))
    record.agents[3].close(100)
    record.add_agent(AgentSpan(1000, "new", start_ns=500, end_ns=OPEN_NS))
    assert len(record.agents) == MAX_AGENTS and 3 not in {a.span_id for a in record.agents}
    record.add_agent(AgentSpan(1001, "refused", start_ns=600, end_ns=OPEN_NS))
    assert record.agents[-1].name == "new"


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
    extractor = Extractor()
    for span_id, reason in ((1, "stop"), (2, "content_filter")):
        assert not record.refused
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": (reason,)}
        record.model_span(extractor, attrs, "chat m", span_id, None, 0, 1, context=False, agent=None,
                          with_news=False)
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


def test_the_task_outcome_reads_the_record_without_a_judge() -> None:
    """A failed trace without a judge ends in error with no figures, 2.5 s from 1 s to 3.5 s, and its versions."""
    record = TraceRecord()
    record.versions.note((("app.version", "2"),), 7, 1)
    record.agent_read({}, True)
    task = record.outcome(None, "planner", (1_000_000_000, 3_500_000_000))
    assert (task.outcome, task.agent, task.turns, task.tool_calls, task.tool_errors, task.cost_usd) == (
        "error", "planner", 0, 0, 0, None)
    assert task.duration_s == 2.5
    assert dict(task.versions) == {"app.version": "2"}
    assert record.outcome(None, None, (5, 4)).duration_s is None  # an end before its start: unknown
    assert record.outcome(None, None, None).duration_s is None


def test_a_refusal_outranks_success_but_not_an_error() -> None:
    """Refused alone gives refused; refused and failed gives error (the outcome order stop, error, refused)."""
    record = TraceRecord()
    record.refused = True
    assert record.outcome(None, None, None).outcome == "refused"
    record.agent_read({}, False)
    assert record.outcome(None, None, None).outcome == "refused"
    record.agent_read({}, True)
    assert record.outcome(None, None, None).outcome == "error"


_TEXT = '[{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]'
_ASK = ('[{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", '
        '"arguments": {"q": "x"}}]}]')


def test_a_model_span_gives_its_turn_and_its_lane_step_named_by_the_adapter() -> None:
    """Assistant text is a lane step named after the given agent, or with context after the span's own agent."""
    extractor = Extractor.from_config(LoopGuardConfig())
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.agent.name": "writer", "gen_ai.output.messages": _TEXT,
             "gen_ai.response.finish_reasons": ("content_filter",)}
    live = TraceRecord()
    turn, lane = live.model_span(extractor, attrs, "chat m", 0x10, 0x1, 5, 9, context=False, agent="planner",
                                 with_news=False)
    assert turn is not None and turn.span_id == 0x10 and turn.agent is None
    assert lane is not None and lane.span_id == 0x10 | LANE_SPAN_BIT and lane.call is not None
    assert lane.call.tool == "planner"
    assert live.refused  # noted as the record reads it
    received = TraceRecord()
    turn, lane = received.model_span(extractor, attrs, "chat m", 0x10, 0x1, 5, 9, context=True, agent=None,
                                     with_news=False)
    assert turn is not None and turn.agent == "writer"
    assert lane is not None and lane.call is not None and lane.call.tool == "writer"


def test_a_call_asked_for_and_never_answered_is_pending_at_the_finish() -> None:
    """One model span asking for `search` and no later model input leaves that one call pending, none once tool
    spans were seen."""
    extractor = Extractor.from_config(LoopGuardConfig())
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": _ASK}
    record = TraceRecord()
    turn, _ = record.model_span(extractor, attrs, "chat m", 0x10, None, 5, 9, context=False, agent=None,
                                with_news=False)
    assert turn is not None
    assert [s for s in record.turns_now().judge.add(turn) if s.call is not None] == []
    pending = record.pending_calls()
    assert [s.call.tool for s in pending if s.call is not None] == ["search"]
    tools = TraceRecord()
    tools.tools_seen()
    assert tools.pending_calls() == []
