"""The trace judge's fixed examples: stand-ins for oversized values, nesting, replayed calls, late arrivals.

Expected values are worked out from the documented rules (the stand-in text is ``<N characters, blake2b HEX>`` or
``<N bytes of JSON, blake2b HEX>`` with a 12-byte BLAKE2b digest, computed here with hashlib from the same bytes).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from otel_loopguard.core.config import LoopGuardConfig, Prices
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import (
    MCP_CLIENT_NESTING,
    ORIGIN_MCP_CLIENT,
    Judged,
    Nesting,
    NestingRule,
    Step,
    TraceJudge,
    compact_value,
    join_nested,
    replay_calls,
)
from otel_loopguard.core.model import Lease, ToolCall
from otel_loopguard.core.signature import NUDGE_MARKER


def _hex(data: bytes) -> str:
    # 12 bytes of digest = 24 hex digits.
    return hashlib.blake2b(data, digest_size=12).hexdigest()


class _Thing:
    """A value msgspec cannot encode: measured by its repr, which holds a lone surrogate (3 bytes, surrogatepass)."""

    def __repr__(self) -> str:
        return "<\ud800>"


# --- nothing, and text -------------------------------------------------------------------------------------------


def test_nothing_is_kept_and_weighs_nothing() -> None:
    assert compact_value(None, 10) == (None, 0)


def test_text_up_to_the_limit_is_kept_as_it_is() -> None:
    # 5 characters against a limit of 5: kept (the limit is inclusive), size 5.
    assert compact_value("abcde", 5) == ("abcde", 5)


def test_longer_text_becomes_a_stand_in_naming_its_length_and_digest() -> None:
    text = "abcdef"  # 6 characters, limit 5
    stand_in = f"<6 characters, blake2b {_hex(b'abcdef')}>"
    assert len(_hex(b"abcdef")) == 24
    assert compact_value(text, 5) == (stand_in, len(stand_in))


def test_text_with_lone_surrogates_gets_a_stand_in_too() -> None:
    # OTLP JSON may carry lone surrogates; each is encoded with surrogatepass (3 bytes) for the digest.
    text = "\ud800" * 6
    digest = _hex(text.encode("utf-8", "surrogatepass"))
    stand_in = f"<6 characters, blake2b {digest}>"
    assert compact_value(text, 5) == (stand_in, len(stand_in))


def test_a_nudge_is_cut_before_measuring_and_only_the_first_marker_counts() -> None:
    # "he lo" + nudge: the engine cuts at the first marker (not at the first space), so the kept value is "he lo"
    # (5 <= 5, inclusive).
    assert compact_value("he lo" + NUDGE_MARKER + "You have made the same call", 5) == ("he lo", 5)
    # Two markers: cut at the first ("ab"), not the last ("ab" + marker + "cd", too long: a stand-in).
    assert compact_value("ab" + NUDGE_MARKER + "cd" + NUDGE_MARKER + "ef", 5) == ("ab", 2)
    # Still too long after the cut: the stand-in describes the cut text (8 characters), not the whole.
    stand_in = f"<8 characters, blake2b {_hex(b'abcdefgh')}>"
    assert compact_value("abcdefgh" + NUDGE_MARKER + "x", 5) == (stand_in, len(stand_in))


# --- other values: measured by their JSON, keys sorted --------------------------------------------------------------


def test_a_map_is_measured_by_its_sorted_json() -> None:
    # {"b": 1, "a": 2} encodes (keys sorted, compact) as {"a":2,"b":1}: 13 bytes.
    value = {"b": 1, "a": 2}
    assert compact_value(value, 13) == (value, 13)  # at the limit: kept
    encoded = b'{"a":2,"b":1}'
    assert len(encoded) == 13
    stand_in = f"<13 bytes of JSON, blake2b {_hex(encoded)}>"
    assert compact_value(value, 12) == (stand_in, len(stand_in))


def test_a_value_json_cannot_hold_is_measured_by_its_repr() -> None:
    # repr "<\ud800>" is 5 bytes with surrogatepass ("<", 3 bytes, ">").
    thing = _Thing()
    assert compact_value(thing, 5) == (thing, 5)
    digest = _hex("<\ud800>".encode("utf-8", "surrogatepass"))
    stand_in = f"<5 bytes of JSON, blake2b {digest}>"
    assert compact_value(thing, 4) == (stand_in, len(stand_in))


# --- nesting rules ------------------------------------------------------------------------------------------------


def test_nesting_names_its_rules_in_its_repr() -> None:
    assert repr(MCP_CLIENT_NESTING) == "Nesting(mcp.client)"
    assert repr(Nesting(NestingRule("genai", lambda o, i: None), NestingRule("x", lambda o, i: None))) == (
        "Nesting(genai, x)")
    assert repr(Nesting()) == "Nesting()"


# --- judging in the order given, at the observation time ------------------------------------------------------------

def _lease_call() -> ToolCall:
    # No start or end time: such a call is judged at the observation time. The lease (owner alice, deadline t=1000)
    # is ahead of t=500, so the repetition is a wait.
    return ToolCall("check_approval", {"id": 1}, result="pending", result_captured=True, lease=Lease("alice", 1000.0))


def test_calls_without_times_are_judged_at_the_observation_time() -> None:
    # At t=500 every call is within the lease: waiting (rule lease) from the first call, and nothing else. Judged
    # at any later time (the wall clock, past t=1000) the lease would be over and the third equal call stuck.
    judge = replay_calls(LoopEngine(), [_lease_call()] * 3, 500.0)
    assert [(t.step, t.previous, t.verdict.kind, t.verdict.rule) for t in judge.transitions] == [
        (0, "working", "waiting", "lease")]
    assert judge.interventions == []


# --- live judging with late arrivals (serve): provisional events, then one exact judgement ---------------------------

def _step(tool: str, span_id: int, start: int) -> Step:
    # One call per tool name, always with the same arguments and result (one per tool): the repetitions are real.
    call = ToolCall(tool, {"q": "x"}, result=f"r {tool}", result_captured=True, start=float(start), end=float(start))
    return Step(span_id=span_id, start_ns=start, end_ns=start, call=call)


def _told(judged: list[Judged]) -> list[tuple[Any, ...]]:
    out = []
    for j in judged:
        t, i = j.observation.transition, j.observation.intervention
        out.append((j.observation.index,
                    (t.previous, t.verdict.kind, t.verdict.rule) if t is not None else None,
                    (i.action, i.rule) if i is not None else None))
    return out


def test_an_exact_judgement_tells_a_stop_that_now_ends_a_new_stuck_episode() -> None:
    # Spans A@0 A@1 A@2 B@3 A@4 (one search call A, another tool B) arrive as A@0 A@1 B@3 A@2 A@4.
    # Live: calls 0, 1 (A A) and 2 (B) are working; A@2 comes late (starts before B@3): judged at once as call 3,
    # provisional: A three times in the window (frequency limit 3) -> stuck (frequency), nudge. A@4, call 4: still
    # stuck after the nudge (stop_after 1) -> stop (frequency), no transition.
    # Exact order A A A B A: call 2 completes a period-1 cycle of 3 -> stuck (period), nudge; call 3 B -> working;
    # call 4 A, four times in the window -> stuck (frequency) again after the one nudge allowed -> stop at once,
    # with a transition. None of the three events was told before (the stop at call 4 was told without a
    # transition): all three are told; the two provisional events are retracted.
    judge = TraceJudge(LoopEngine(), track_events=True)
    a0, a1, a2, b3, a4 = _step("A", 1, 0), _step("A", 2, 1), _step("A", 3, 2), _step("B", 4, 3), _step("A", 5, 4)
    live = [_told(judge.judge(s)) for s in (a0, a1, b3, a2, a4)]
    assert live == [[], [], [], [(3, ("working", "stuck", "frequency"), ("nudge", "frequency"))],
                    [(4, None, ("stop", "frequency"))]]
    assert judge.reordered
    assert _told(judge.finish()) == [
        (2, ("working", "stuck", "period"), ("nudge", "period")),
        (3, ("stuck", "working", "recovered"), None),
        (4, ("working", "stuck", "frequency"), ("stop", "frequency")),
    ]
    assert (judge.rejudged, judge.retracted, judge.reordered) == (1, 2, False)


def _told_then_exact() -> tuple[TraceJudge, list[tuple[Any, ...]]]:
    # Spans A@0 A@10 B@20 A@30 A@40 (span ids 10..50) arrive as A@0 B@20 A@10 A@30 A@40.
    # Live: 0 A, 1 B working; A@10 late (before B@20), call 2, provisional: two A's -> working; call 3 (A@30): three
    # A's in the window -> stuck (frequency), nudge; call 4 (A@40): A A A in a row -> stuck by period after the
    # nudge -> stop (period).
    # Exact order A A B A A: call 3 -> stuck (frequency), nudge, as told; call 4: four A's, no period of 3 (B
    # between) -> still stuck (frequency) after the nudge -> stop (frequency), not told before (the stop told was
    # by period). Told: only that stop; retracted: the stop by period.
    judge = TraceJudge(LoopEngine(), track_events=True)
    steps = {s: _step("B" if s == 20 else "A", s + 10, s) for s in (0, 10, 20, 30, 40)}
    live = [_told(judge.judge(steps[s])) for s in (0, 20, 10, 30, 40)]
    assert live == [[], [], [], [(3, ("working", "stuck", "frequency"), ("nudge", "frequency"))],
                    [(4, None, ("stop", "period"))]]
    return judge, _told(judge.finish())


def test_an_exact_judgement_tells_only_what_was_not_told() -> None:
    judge, told = _told_then_exact()
    assert told == [(4, None, ("stop", "frequency"))]
    assert (judge.rejudged, judge.retracted) == (1, 1)


def test_judgements_and_retractions_add_up_over_two_finishes() -> None:
    # After the first exact judgement a step starting before the last one (A@35 between A@30 and A@40) arrives:
    # judged at once as call 5 (the run was stopped at call 4: a stop stays, nothing new to tell), and the judge is
    # reordered again. The second finish judges A A B A A A exactly: call 3 stuck (frequency) and nudge, call 4
    # stop (frequency), as told before, and call 5 (A@40) keeps the stuck verdict (now by period: A A A): nothing
    # new, nothing retracted. Totals: two exact judgements, one retraction (from the first).
    judge, _ = _told_then_exact()
    assert _told(judge.judge(_step("A", 99, 35))) == []
    assert judge.reordered
    assert _told(judge.finish()) == []
    assert (judge.rejudged, judge.retracted, judge.steps) == (2, 1, 6)
    assert (judge.verdict.kind, judge.verdict.rule) == ("stuck", "period")


@pytest.mark.parametrize(("probe", "reordered"), [
    ((35, 35, 98), True),    # starts before the last step judged (A@40)
    ((40, 39, 98), True),    # same start, ends earlier
    ((40, 40, 45), True),    # same start and end, smaller span id than the last (50)
    ((40, 40, 55), False),   # same start and end, larger span id: in order
    ((41, 41, 97), False),   # starts after: in order
])
def test_after_an_exact_judgement_order_is_checked_against_the_last_step(
        probe: tuple[int, int, int], reordered: bool) -> None:
    # The exact judgement ends at A@40 (start 40, end 40, span id 50): a later step is in order unless its
    # (start, end, span id) sorts before that.
    judge, _ = _told_then_exact()
    assert not judge.reordered
    start, end, span_id = probe
    call = ToolCall("C", {}, result="c", result_captured=True, start=float(start), end=float(end))
    judge.judge(Step(span_id=span_id, start_ns=start, end_ns=end, call=call))
    assert judge.reordered is reordered


def test_an_exact_judgement_of_calls_without_times_uses_the_observation_time() -> None:
    # Three lease calls without times arrive out of span order; finish(500) judges them again in start order at
    # t=500: within the lease, waiting from the first call (as replay_calls says).
    judge = TraceJudge(LoopEngine())
    for span_id, start in ((1, 0), (3, 2), (2, 1)):
        judge.add(Step(span_id=span_id, start_ns=start, end_ns=start, call=_lease_call()))
        judge.advance(500.0)
    assert judge.reordered
    judge.finish(500.0)
    assert [(t.step, t.verdict.kind, t.verdict.rule) for t in judge.transitions] == [(0, "waiting", "lease")]


def test_dropping_the_steps_of_a_reordered_trace_makes_its_report_partial() -> None:
    # Without its steps a reordered trace cannot be judged again exactly: partial. In order, nothing is lost.
    judge = TraceJudge(LoopEngine())
    for s in (_step("A", 1, 0), _step("B", 2, 1)):
        judge.judge(s)
    assert judge.drop_steps() > 0
    assert judge.partial is False
    judge = TraceJudge(LoopEngine())
    for s in (_step("A", 2, 1), _step("B", 1, 0)):
        judge.judge(s)
    assert judge.reordered
    judge.drop_steps()
    assert judge.partial is True
    assert judge.report("x", None).partial is True


# --- the live processor's path ------------------------------------------------------------------------------------

def test_a_live_judge_hands_back_the_compacted_step() -> None:
    # The processor's judge keeps no steps; an argument longer than max_argument_bytes (65536) is replaced by its
    # stand-in before it is judged, and the step handed back in `judged` carries the stand-in.
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    args = "x" * 70_000
    judged: list[Step] = []
    judge.judge(Step(span_id=1, call=ToolCall("t", args)), judged=judged)
    stand_in, _ = compact_value(args, 65_536)
    assert [s.call.arguments for s in judged if s.call is not None] == [stand_in]
    assert stand_in.startswith("<70000 characters, blake2b ")


def test_an_inner_step_is_judged_at_once_unless_its_parent_is_said_to_be_open() -> None:
    # An MCP client step under span 7: with parent_open left at its default (False) it is judged at once; with
    # parent_open=True it waits for its parent.
    mcp = Step(span_id=8, parent_span_id=7, call=ToolCall("t", {}), origin=ORIGIN_MCP_CLIENT)
    judge = TraceJudge(LoopEngine())
    judge.judge(mcp)
    assert (judge.steps, judge.pending) == (1, 0)
    judge = TraceJudge(LoopEngine())
    judge.judge(mcp, parent_open=True)
    assert (judge.steps, judge.pending) == (0, 1)


def test_a_live_judge_compacts_a_long_result_and_long_structured_values() -> None:
    # Either side over the limit is compacted: a 70000-character result with short arguments; a map argument and a
    # list result whose JSON is over 65536 bytes (a map's len() is its number of keys, not its size).
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    judged: list[Step] = []
    judge.judge(Step(span_id=1, start_ns=1, end_ns=1, call=ToolCall("t", "{}", result="r" * 70_000,
                                                                    result_captured=True)), judged=judged)
    big_map = {"k": "v" * 70_000}
    big_list = ["w" * 70_000]
    judge.judge(Step(span_id=2, start_ns=2, end_ns=2, call=ToolCall("t", big_map, result=big_list,
                                                                    result_captured=True)), judged=judged)
    calls = [s.call for s in judged if s.call is not None]
    assert calls[0].arguments == "{}"
    assert calls[0].result == compact_value("r" * 70_000, 65_536)[0]
    assert calls[1].arguments == compact_value(big_map, 65_536)[0]
    assert calls[1].result == compact_value(big_list, 65_536)[0]
    # '{"k":"' + 70000 v + '"}' = 70008 bytes; '["' + 70000 w + '"]' = 70004 bytes.
    assert str(calls[1].arguments).startswith("<70008 bytes of JSON, blake2b ")
    assert str(calls[1].result).startswith("<70004 bytes of JSON, blake2b ")


def _live(order: list[tuple[int, int, int]]) -> TraceJudge:
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    for i, (start, end, span_id) in enumerate(order):
        judge.judge(Step(span_id=span_id, start_ns=start, end_ns=end, call=ToolCall(f"t{i}", {})))
    return judge


def test_a_live_judge_notes_a_step_that_starts_before_the_last_one() -> None:
    # The processor judges spans as they end. In start order: nothing to note. A step starting before the last one
    # judged: reordered, and since the live judge keeps no steps to judge again, the report is partial.
    assert (_live([(0, 5, 1), (1, 6, 2), (2, 7, 3)]).reordered, _live([(0, 5, 1), (1, 6, 2)]).partial) == (
        False, False)
    late = _live([(0, 5, 1), (2, 7, 3), (1, 6, 2)])
    assert (late.reordered, late.partial) == (True, True)
    # The order is checked against the latest step in order, not against a step judged out of order: after
    # (2, 7, 3) and the late (1, 6, 2), a step at (1, 8, 4) still starts before (2, 7, 3).
    assert _live([(0, 5, 1), (2, 7, 3), (3, 8, 4)]).reordered is False
    # The same span judged twice (no span ids kept to see the duplicate) is not out of order: equal, not before.
    assert _live([(0, 5, 1), (0, 5, 1)]).reordered is False


def test_a_live_judge_judges_calls_without_times_at_the_given_time() -> None:
    # untimed_at=500 is within the lease (deadline 1000): waiting from the first call, on both paths (the
    # processor's judge without kept steps, and a judge that keeps them).
    for keep in (False, True):
        judge = TraceJudge(LoopEngine(), keep_steps=keep)
        for span_id in (1, 2, 3):
            judge.judge(Step(span_id=span_id, start_ns=span_id, end_ns=span_id, call=_lease_call()), untimed_at=500.0)
        assert [(t.step, t.verdict.kind) for t in judge.transitions] == [(0, "waiting")], keep


def test_a_judge_that_keeps_steps_hands_back_the_steps_it_judged() -> None:
    judge = TraceJudge(LoopEngine())
    judged: list[Step] = []
    step = Step(span_id=1, start_ns=1, end_ns=1, call=ToolCall("t", {}))
    judge.judge(step, judged=judged)
    assert judged == [step]


# --- nesting: the calls of nested tool spans counted once ----------------------------------------------------------

def _tool(span_id: int, start: int, parent: int | None = None, origin: str = "", tool: str = "t") -> Step:
    return Step(span_id=span_id, parent_span_id=parent, start_ns=start, end_ns=start + 100,
                call=ToolCall(tool, {"n": span_id}), origin=origin)


def test_an_outer_step_without_a_call_never_stands_for_an_mcp_call() -> None:
    # The MCP rule joins an MCP client span into the tool span around it; a parent that is no tool call (None) is
    # not that call.
    inner = _tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT)
    assert MCP_CLIENT_NESTING.join(Step(span_id=1), inner) is None
    outer = _tool(1, 0)
    assert MCP_CLIENT_NESTING.join(outer, inner) is outer


def test_an_mcp_span_that_starts_before_its_tool_span_waits_for_it() -> None:
    # Clock skew: the MCP client span (id 2) starts at 0, its parent tool span (id 1) at 5, another call (id 3) at 9.
    # The MCP span waits for its parent and is joined into it: two calls, the tool span and the other one.
    steps = [_tool(2, 0, parent=1, origin=ORIGIN_MCP_CLIENT), _tool(1, 5), _tool(3, 9)]
    assert [s.span_id for s in join_nested(steps, MCP_CLIENT_NESTING)] == [1, 3]


def test_nested_mcp_spans_join_through_their_parent() -> None:
    # Tool span 1 > MCP span 2 > MCP span 3 (a transport inside a transport): one call. In start order; and with
    # span 3 starting before span 2 (it waits for 2, which joins 1, and then joins 1 too).
    in_order = [_tool(1, 0), _tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT), _tool(3, 2, parent=2,
                                                                                    origin=ORIGIN_MCP_CLIENT)]
    assert [s.span_id for s in join_nested(in_order, MCP_CLIENT_NESTING)] == [1]
    skewed = [_tool(1, 0), _tool(3, 1, parent=2, origin=ORIGIN_MCP_CLIENT), _tool(2, 2, parent=1,
                                                                                  origin=ORIGIN_MCP_CLIENT)]
    assert [s.span_id for s in join_nested(skewed, MCP_CLIENT_NESTING)] == [1]


def test_a_tool_span_under_a_tool_span_is_another_call_in_start_order() -> None:
    # A plain tool span (no rule names its origin) under another tool span is a call of its own; with clock skew
    # it starts before its parent, and stays there: start order.
    steps = [_tool(2, 0, parent=1), _tool(1, 5)]
    assert [s.span_id for s in join_nested(steps, MCP_CLIENT_NESTING)] == [2, 1]


def test_a_joined_step_takes_its_place_by_the_times_the_rule_gives_it() -> None:
    # A rule that lets the inner step stand for the call (it carries the content): tool 1 starts at 0, its inner
    # step 2 at 50; tool 3 (unrelated) at 20. The call now starts at 50: order 3, 2.
    nesting = Nesting(NestingRule("inner", lambda outer, inner: inner))
    steps = [_tool(1, 0), _tool(3, 20), _tool(2, 50, parent=1, origin="inner")]
    assert [s.span_id for s in join_nested(steps, nesting)] == [3, 2]


def test_inner_spans_whose_parents_never_come_are_calls_in_start_order() -> None:
    # MCP spans 1 and 2 name each other as parent (broken ids): neither can be placed under the other; both count
    # as calls, in start order with tool 3 (start 10, after them): 1, 2, 3.
    steps = [_tool(1, 5, parent=2, origin=ORIGIN_MCP_CLIENT), _tool(2, 6, parent=1, origin=ORIGIN_MCP_CLIENT),
             _tool(3, 10)]
    assert [s.span_id for s in join_nested(steps, MCP_CLIENT_NESTING)] == [1, 2, 3]


def test_live_nesting_an_mcp_span_waits_for_its_open_parent() -> None:
    # The processor: the MCP client span (parent 1, still open) ends first and waits; an unrelated call ends
    # meanwhile and is judged; then the parent ends and the two are one call: two calls judged in all.
    judge = TraceJudge(LoopEngine(), keep_steps=False)
    judge.judge(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT), parent_open=True)
    assert (judge.steps, judge.pending) == (0, 1)
    judge.judge(_tool(9, 200, tool="other"))
    assert (judge.steps, judge.pending) == (1, 1)
    judge.judge(_tool(1, 0))
    assert (judge.steps, judge.pending) == (2, 0)


def test_serve_nesting_a_batch_holding_both_is_one_call_in_order() -> None:
    # A batch with the tool span and its MCP span: joined at once, nothing out of order.
    judge = TraceJudge(LoopEngine())
    judge.add(_tool(1, 0))
    judge.add(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    assert (judge.steps, judge.reordered) == (1, False)


def test_serve_nesting_a_late_mcp_span_of_a_judged_call_is_joined_by_the_exact_judgement() -> None:
    # Batch 1: tool span 1 (judged: one call). Batch 2: its MCP span 2 alone: judged at once as a second call,
    # provisionally; finish judges the trace again in start order and joins them: one call.
    judge = TraceJudge(LoopEngine())
    judge.add(_tool(1, 0))
    judge.advance()
    judge.add(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    assert (judge.steps, judge.reordered) == (2, True)
    judge.finish()
    assert (judge.steps, judge.reordered, judge.rejudged) == (1, False, 1)


def test_serve_nesting_an_mcp_span_before_its_parent_is_joined_by_the_exact_judgement() -> None:
    # Batch 1: the MCP span 2 alone (its parent 1 not seen yet): judged as a call. Batch 2: the parent, starting
    # earlier: out of order, and the pair may be one call -> the exact judgement joins them: one call.
    judge = TraceJudge(LoopEngine())
    judge.add(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    judge.add(_tool(1, 0))
    judge.advance()
    assert (judge.steps, judge.reordered) == (2, True)
    judge.finish()
    assert judge.steps == 1


def test_serve_nesting_a_parent_arriving_later_in_order_still_asks_for_the_exact_judgement() -> None:
    # The MCP span 2 (parent 1 unseen) starts at 1 and is judged alone; its parent 1 arrives later with a later
    # start (10: not out of start order). The parent had a child judged alone: the exact judgement must decide,
    # so the judge is reordered, and finish joins them (the MCP rule keeps the tool span).
    judge = TraceJudge(LoopEngine())
    judge.add(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    judge.add(_tool(1, 10))
    judge.advance()
    assert judge.reordered
    judge.finish()
    assert judge.steps == 1


def test_live_nesting_other_steps_pass_while_a_child_waits() -> None:
    # A held child for parent 7; an unrelated tool span 9 ends: judged (nothing to join), the child still waits.
    judge = TraceJudge(LoopEngine())
    judge.judge(_tool(8, 1, parent=7, origin=ORIGIN_MCP_CLIENT), parent_open=True)
    judge.judge(_tool(9, 2, tool="other"))
    assert (judge.steps, judge.pending) == (1, 1)


# --- the report ---------------------------------------------------------------------------------------------------

def test_a_report_without_step_audit_is_ok_and_prices_bring_the_cost() -> None:
    # No step audit computed (the processor): nothing violated, ok. The cost is reported when usage was seen or
    # prices are configured, even with no usage at all (0 USD).
    judge = TraceJudge(LoopEngine(), step_audit=False)
    judge.judge(Step(span_id=1, call=ToolCall("t", {})))
    report = judge.report("x", None)
    assert (report.ok, report.violations, report.cost) == (True, (), None)
    priced = LoopEngine(LoopGuardConfig(prices={"m": Prices(input=1.0, output=2.0)}))
    judge = TraceJudge(priced, step_audit=False)
    judge.judge(Step(span_id=1, call=ToolCall("t", {})))
    cost = judge.report("x", None).cost
    assert cost is not None and cost.usd == 0.0


# --- kept steps: what they hold and what they weigh ------------------------------------------------------------------

def test_kept_steps_weigh_their_overhead_and_their_text() -> None:
    # A kept step is estimated at 480 bytes (STEP_OVERHEAD_BYTES) plus its argument and result text:
    # '{"a":1}' (7) + "ok" (2) -> 489; a step without a call (usage) -> 480; nothing kept -> 0.
    judge = TraceJudge(LoopEngine())
    assert judge.kept_bytes == 0
    judge.add(Step(span_id=1, call=ToolCall("t", '{"a":1}', result="ok", result_captured=True)))
    assert judge.kept_bytes == 489
    judge.add(Step(span_id=2, model="m"))
    assert judge.kept_bytes == 969
    # A long argument is kept as its stand-in: 480 + len(stand-in) + 2.
    stand_in, size = compact_value("x" * 70_000, 65_536)
    judge.add(Step(span_id=3, call=ToolCall("t", "x" * 70_000, result="ok", result_captured=True)))
    assert judge.kept_bytes == 969 + 480 + size + 2
    assert size == len(stand_in)


def test_a_compacted_call_keeps_everything_but_the_long_text() -> None:
    # Only the oversized side changes; tool, flags, error, progress, times and lease stay as they were.
    call = ToolCall("t", "a" * 70_000, arguments_captured=True, result="short", result_captured=True,
                    error="TimeoutError", progress="p1", start=1.0, end=2.0, lease=Lease("ci", 9.0))
    judged: list[Step] = []
    TraceJudge(LoopEngine()).judge(Step(span_id=1, start_ns=1, end_ns=2, call=call), judged=judged)
    got = judged[0].call
    assert got is not None
    assert got.arguments == compact_value("a" * 70_000, 65_536)[0]
    assert (got.tool, got.arguments_captured, got.result, got.result_captured, got.error, got.progress, got.start,
            got.end, got.lease) == ("t", True, "short", True, "TimeoutError", "p1", 1.0, 2.0, Lease("ci", 9.0))
    # And only the result, when only the result is long.
    call = ToolCall("t", "short", result="r" * 70_000, result_captured=True)
    judged = []
    TraceJudge(LoopEngine()).judge(Step(span_id=1, call=call), judged=judged)
    got = judged[0].call
    assert got is not None
    assert (got.arguments, got.result) == ("short", compact_value("r" * 70_000, 65_536)[0])


def test_a_live_judge_keeps_nothing_and_counts_every_delivery() -> None:
    # keep_steps=False (the processor): no steps, no span ids, so the same span judged twice is two calls.
    judge = TraceJudge(LoopEngine(), keep_steps=False)
    step = Step(span_id=1, start_ns=1, end_ns=1, call=ToolCall("t", {}))
    judge.judge(step)
    judge.judge(step)
    assert (judge.keeps_steps, judge.kept_bytes, judge.steps, judge.duplicates) == (False, 0, 2, 0)
    assert judge.seen_usage is False
    # A judge that keeps its steps counts the second delivery as a duplicate.
    judge = TraceJudge(LoopEngine())
    judge.judge(step)
    judge.judge(step)
    assert (judge.keeps_steps, judge.steps, judge.duplicates) == (True, 1, 1)


def test_a_judge_without_event_tracking_tells_the_whole_exact_judgement() -> None:
    # The default judge does not track events: its exact judgement tells every event again (A@0 B@20 A@10 A@30
    # A@40 as in _told_then_exact: call 3 stuck (frequency) and nudge, call 4 stop (frequency)).
    judge = TraceJudge(LoopEngine())
    for s in (0, 20, 10, 30, 40):
        judge.judge(_step("B" if s == 20 else "A", s + 10, s))
    assert _told(judge.finish()) == [(3, ("working", "stuck", "frequency"), ("nudge", "frequency")),
                                     (4, None, ("stop", "frequency"))]
    assert judge.retracted == 0


# --- waiting for open parents, in numbers ---------------------------------------------------------------------------

def test_an_added_inner_step_waits_only_when_told_its_parent_is_open() -> None:
    mcp = Step(span_id=8, parent_span_id=7, start_ns=1, end_ns=1, call=ToolCall("t", {}), origin=ORIGIN_MCP_CLIENT)
    judge = TraceJudge(LoopEngine())
    judge.add(mcp)  # parent_open defaults to False: judged by the next advance
    judge.advance()
    assert (judge.steps, judge.pending) == (1, 0)
    # A plain tool step never waits, even when its parent is open: no rule can join it.
    judge = TraceJudge(LoopEngine())
    judge.judge(Step(span_id=9, parent_span_id=7, call=ToolCall("t", {})), parent_open=True)
    assert (judge.steps, judge.pending) == (1, 0)


def test_at_most_256_inner_steps_wait_for_open_parents() -> None:
    # MAX_HELD = 256: the 257th MCP step whose parent is open is judged at once instead of waiting.
    judge = TraceJudge(LoopEngine())
    for i in range(257):
        judge.judge(Step(span_id=1000 + i, parent_span_id=i + 1, start_ns=i, end_ns=i, call=ToolCall("t", {"i": i}),
                         origin=ORIGIN_MCP_CLIENT), parent_open=True)
    assert (judge.pending, judge.steps) == (256, 1)


def test_a_batch_is_judged_in_start_order() -> None:
    # Two steps added in reverse start order and advanced together: sorted first, so nothing is out of order.
    judge = TraceJudge(LoopEngine())
    judge.add(_step("B", 2, 5))
    judge.add(_step("A", 1, 0))
    judged: list[Step] = []
    judge.advance(judged=judged)
    assert ([s.span_id for s in judged], judge.reordered) == ([1, 2], False)


def test_the_same_span_twice_on_the_general_path_is_not_out_of_order() -> None:
    # Without span ids an MCP step (no parent) takes the general path; delivered twice, its second judgement has
    # the same (start, end, id) as the last: not before it.
    judge = TraceJudge(LoopEngine(), keep_steps=False)
    mcp = Step(span_id=5, start_ns=3, end_ns=4, call=ToolCall("t", {}), origin=ORIGIN_MCP_CLIENT)
    judge.judge(mcp)
    judge.judge(mcp)
    assert (judge.steps, judge.reordered) == (2, False)


# --- events kept and told ----------------------------------------------------------------------------------------

def test_the_report_keeps_the_first_thousand_transitions_and_interventions() -> None:
    # One call repeated with its result changing every third call (r0 r0 r0 r1 r1 r1 ...): each block of three is a
    # stuck episode (working, working, stuck): per block a transition into stuck and (from the second block) one
    # back to working, and a nudge per episode when nudges never run out and stops never come. 3300 calls = 1100
    # blocks: 1 + 2 * 1099 = 2199 transitions and 1100 nudges; the judge keeps the first 1000 of each.
    config = LoopGuardConfig(max_nudges=5000, stop_after=1_000_000, max_steps=1_000_000)
    calls = [ToolCall("poll", {"job": 7}, result=f"r{i // 3}", result_captured=True, start=float(i), end=float(i))
             for i in range(3300)]
    judge = replay_calls(LoopEngine(config), calls, None)
    assert judge.state.transition_count == 2199
    assert (len(judge.transitions), len(judge.interventions)) == (1000, 1000)
    assert (judge.transitions[0].step, judge.interventions[0].step) == (2, 2)
    # The thousandth transition: numbered from 0 (into stuck at call 2), block b >= 1 gives number 2b-1 (back to
    # working at call 3b) and 2b (into stuck at call 3b+2); number 999 = 2b-1 is block 500's return to working, at
    # call 1500.
    assert (judge.transitions[-1].step, judge.transitions[-1].verdict.kind) == (1500, "working")
    # The thousandth nudge: block 999's, at call 2999.
    assert judge.interventions[-1].step == 2999


def test_an_event_names_the_step_that_caused_it() -> None:
    judge = TraceJudge(LoopEngine())
    steps = [_step("A", i + 1, i) for i in range(3)]
    out = [j for s in steps for j in judge.judge(s)]
    assert [(j.observation.index, j.step, j.steps, j.provisional) for j in out] == [(2, steps[2], 3, False)]


# --- calls with one time -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("times", [{"start": 0.0}, {"end": 0.0}, {"start": 0.0, "end": 0.0}])
def test_a_call_with_a_time_is_judged_at_its_own_time(times: dict[str, float]) -> None:
    # The observation time given (5000, past the lease deadline 1000) is for calls without times only; a call
    # with a start or an end is judged at that time (0: within the lease): waiting from the first call.
    judge = TraceJudge(LoopEngine())
    for span_id in (1, 2, 3):
        call = ToolCall("check_approval", {"id": 1}, result="pending", result_captured=True,
                        lease=Lease("alice", 1000.0), **times)
        judge.judge(Step(span_id=span_id, start_ns=span_id, end_ns=span_id, call=call), untimed_at=5000.0)
    assert [(t.step, t.verdict.kind) for t in judge.transitions] == [(0, "waiting")]


def test_the_cost_in_the_audit_output_is_rounded_to_a_millionth() -> None:
    # 1 input token at $1.25 per million = $0.00000125 -> 0.000001 when rounded to 6 decimals (not 0.0000013).
    engine = LoopEngine(LoopGuardConfig(prices={"m": Prices(input=1.25, output=0.0)}))
    judge = TraceJudge(engine)
    judge.judge(Step(span_id=1, model="m", usage=Usage(input_tokens=1)))
    assert judge.report("x", None).as_dict()["cost_usd"] == 0.000001


def test_kept_bytes_of_empty_calls_and_structured_values() -> None:
    # No arguments and no result: the overhead alone (480). A map argument and a list result are measured by their
    # JSON: {"a":1} is 7 bytes, [1,2] is 5: 480 + 7 + 5 = 492 (not their numbers of items).
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, call=ToolCall("t")))
    assert judge.kept_bytes == 480
    judge.add(Step(span_id=2, call=ToolCall("t", {"a": 1}, result=[1, 2], result_captured=True)))
    assert judge.kept_bytes == 480 + 492


def test_a_compacted_result_keeps_arguments_not_recorded() -> None:
    # Arguments not recorded (arguments_captured False) stay so when only the result is replaced by its stand-in.
    judged: list[Step] = []
    call = ToolCall("t", None, arguments_captured=False, result="r" * 70_000, result_captured=True)
    TraceJudge(LoopEngine()).judge(Step(span_id=1, call=call), judged=judged)
    got = judged[0].call
    assert got is not None and (got.arguments, got.arguments_captured) == (None, False)


@pytest.mark.parametrize("side", ["arguments", "result"])
def test_a_live_judge_compacts_one_large_structured_side(side: str) -> None:
    # A map argument (or list result) whose JSON is over 65536 bytes, the other side empty: compacted.
    big: Any = {"k": "v" * 70_000} if side == "arguments" else ["w" * 70_000]
    call = ToolCall("t", big) if side == "arguments" else ToolCall("t", None, result=big, result_captured=True)
    judged: list[Step] = []
    TraceJudge(LoopEngine(), keep_steps=False).judge(Step(span_id=1, call=call), judged=judged)
    got = judged[0].call
    assert got is not None
    assert getattr(got, side) == compact_value(big, 65_536)[0]


def test_span_ids_are_remembered_up_to_65536() -> None:
    # MAX_SPAN_IDS = 65536: spans 0..65535 are remembered (a second delivery is a duplicate); span 65536, the
    # 65537th, is not, so its second delivery counts again.
    judge = TraceJudge(LoopEngine())
    for span_id in range(65_537):
        judge.add(Step(span_id=span_id, model="m"))
    assert judge.add(Step(span_id=65_535, model="m")) is False
    assert judge.add(Step(span_id=65_536, model="m")) is True
    assert judge.duplicates == 1


def test_finish_judges_waiting_children_and_leaves_nothing_pending() -> None:
    # Two MCP steps wait for open parents that never end; finish judges them on their own: two calls, none pending.
    judge = TraceJudge(LoopEngine())
    for i in (1, 2):
        judge.judge(Step(span_id=10 + i, parent_span_id=i, start_ns=i, end_ns=i, call=ToolCall("t", {"i": i}),
                         origin=ORIGIN_MCP_CLIENT), parent_open=True)
    assert judge.pending == 2
    judge.finish()
    assert (judge.steps, judge.pending) == (2, 0)
    # It can wait for parents again afterwards.
    judge.judge(Step(span_id=20, parent_span_id=3, start_ns=9, end_ns=9, call=ToolCall("t", {}),
                     origin=ORIGIN_MCP_CLIENT), parent_open=True)
    assert judge.pending == 1


def test_a_whole_trace_added_then_finished_judges_untimed_calls_at_the_observation_time() -> None:
    # audit: every step added, none advanced; finish(500) judges them, calls without times at t=500 (lease ahead).
    judge = TraceJudge(LoopEngine())
    for span_id in (1, 2, 3):
        judge.add(Step(span_id=span_id, start_ns=span_id, end_ns=span_id, call=_lease_call()))
    judge.finish(500.0)
    assert [(t.step, t.verdict.kind) for t in judge.transitions] == [(0, "waiting")]


def test_a_parent_seen_after_its_child_in_a_batch_with_another_inner_step_asks_for_the_exact_judgement() -> None:
    # MCP span 2 (parent 1 unseen) is judged alone; then a batch holds its parent 1 (starting later: clock skew) and
    # another MCP span whose parent is unknown: the parent had a child judged alone, so the exact judgement must
    # decide: reordered.
    judge = TraceJudge(LoopEngine())
    judge.judge(_tool(2, 1, parent=1, origin=ORIGIN_MCP_CLIENT))
    judge.add(_tool(1, 10))
    judge.add(_tool(3, 11, parent=99, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    assert judge.reordered


def test_at_most_256_parents_of_inner_steps_judged_alone_are_remembered() -> None:
    # MAX_HELD = 256 parents are remembered; the 257th MCP span's parent (id 257) is not, so when it comes (in a
    # batch with another inner step, in start order) nothing is out of order.
    judge = TraceJudge(LoopEngine())
    for i in range(1, 258):
        judge.judge(_tool(1000 + i, i, parent=i, origin=ORIGIN_MCP_CLIENT))
    judge.add(_tool(257, 2000))
    judge.add(_tool(5000, 2001, parent=9999, origin=ORIGIN_MCP_CLIENT))
    judge.advance()
    assert judge.reordered is False


def test_a_usage_step_without_token_counts_is_usage_all_the_same() -> None:
    # A model span without usage attributes: judged as usage (zero tokens), the report then carries a cost (0 USD).
    judge = TraceJudge(LoopEngine())
    judge.judge(Step(span_id=1, model="m"))
    assert judge.seen_usage is True
    cost = judge.report("x", None).cost
    assert cost is not None and cost.usd == 0.0


# --- steps of one origin discarded (serve: tool calls derived from model spans) -------------------------------------

def test_discarding_an_origin_drops_its_steps_and_asks_for_the_exact_judgement() -> None:
    # Two derived steps (origin "model") and one tool step are kept: 3 x (480 + 2 for '{}' arguments) bytes.
    # Discarding "model" drops two; what is kept is the tool step alone (482 bytes), and the judge is reordered, so
    # finish judges the trace again without them: one call.
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, start_ns=0, end_ns=0, call=ToolCall("a", "{}"), origin="model"))
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, call=ToolCall("b", "{}"), origin="model"))
    judge.add(Step(span_id=3, start_ns=2, end_ns=2, call=ToolCall("c", "{}")))
    judge.advance()
    assert (judge.steps, judge.kept_bytes) == (3, 3 * 482)
    assert judge.discard("nothing-of-this-origin") == 0
    assert judge.reordered is False
    assert judge.discard("model") == 2
    assert (judge.kept_bytes, judge.reordered) == (482, True)
    judge.finish()
    assert judge.steps == 1
    # A discarded span delivered again is no duplicate (its id is forgotten).
    assert judge.add(Step(span_id=1, start_ns=0, end_ns=0, call=ToolCall("a", "{}"), origin="model")) is True


def test_discarding_without_kept_steps_makes_the_report_partial() -> None:
    judge = TraceJudge(LoopEngine(), keep_steps=False)
    judge.judge(Step(span_id=1, call=ToolCall("a", "{}"), origin="model"))
    assert (judge.discard("model"), judge.partial) == (0, True)


def test_discarding_counts_again_the_bytes_of_what_is_kept_results_and_missing_arguments_included() -> None:
    # Kept after the discard: a step without arguments whose result is "hello" (480 + 0 + 5 = 485 bytes) and a step
    # with arguments "ab" and result "xyz" (480 + 2 + 3 = 485): 970, counted again step by step.
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, start_ns=0, end_ns=0, call=ToolCall("a", None, result="hello"), origin=""))
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, call=ToolCall("b", "ab", result="xyz"), origin=""))
    judge.add(Step(span_id=3, start_ns=2, end_ns=2, call=ToolCall("c", "{}"), origin="model"))
    assert judge.kept_bytes == 485 + 485 + 482
    assert judge.discard("model") == 1
    assert judge.kept_bytes == 970


def test_discarding_drops_the_waiting_steps_of_the_origin_and_keeps_the_others() -> None:
    # Added, not judged yet: two derived calls of "a" and one tool call of "b". After the discard only "b" is
    # judged: one call, of tool "b" (judged alone, a working verdict at step 0).
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, start_ns=0, end_ns=0, call=ToolCall("a", "{}"), origin="model"))
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, call=ToolCall("a", "{}"), origin="model"))
    judge.add(Step(span_id=3, start_ns=2, end_ns=2, call=ToolCall("b", "{}")))
    assert judge.discard("model") == 2
    judged: list[Step] = []
    judge.advance(judged=judged)
    assert [s.call.tool for s in judged if s.call is not None] == ["b"]
    assert judge.steps == 1


def test_arguments_that_are_no_text_are_weighed_by_their_json() -> None:
    # Arguments as a mapping {"q": "abc"}: kept as they are (11 bytes of JSON, under the 1 MiB default limit), so
    # the step weighs 480 + 11 + 2 (result "ok"); a result as a list [1, 2] (5 bytes of JSON) the same way.
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, call=ToolCall("a", {"q": "abc"}, result="ok")))
    assert judge.kept_bytes == 480 + 11 + 2
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, call=ToolCall("a", "x", result=[1, 2])))
    assert judge.kept_bytes == (480 + 11 + 2) + (480 + 1 + 5)


def test_text_of_exactly_the_limit_weighs_its_length() -> None:
    # max_argument_bytes = 4: arguments "abcd" and result "wxyz" (4 characters each) are kept whole: 480 + 4 + 4.
    judge = TraceJudge(LoopEngine(LoopGuardConfig(max_argument_bytes=4)))
    judge.add(Step(span_id=1, call=ToolCall("a", "abcd", result="wxyz")))
    assert judge.kept_bytes == 488


def test_dropping_the_kept_steps_frees_their_bytes() -> None:
    # Two steps of 480 + 2 bytes: dropping them frees 964 and leaves nothing counted.
    judge = TraceJudge(LoopEngine())
    judge.add(Step(span_id=1, call=ToolCall("a", "{}")))
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, call=ToolCall("a", "{}")))
    assert judge.drop_steps() == 964
    assert judge.kept_bytes == 0


def test_failed_calls_are_counted_once_each_on_both_paths() -> None:
    # Three calls, two of which failed (error class set): 2 failed calls, whether judged live (one step at a time)
    # or kept and judged at the end; a new judge starts from 0.
    calls = [ToolCall("a", '{"n": 1}', error="TimeoutError"), ToolCall("a", '{"n": 2}'),
             ToolCall("b", "{}", error="ValueError")]
    live = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    kept = TraceJudge(LoopEngine())
    for i, call in enumerate(calls):
        live.judge(Step(span_id=i + 1, start_ns=i, end_ns=i, call=call))
        kept.add(Step(span_id=i + 1, start_ns=i, end_ns=i, call=call))
    kept.finish()
    assert live.report("x", None).failed_calls == 2
    assert kept.report("x", None).failed_calls == 2
    assert TraceJudge(LoopEngine()).report("x", None).failed_calls == 0


def test_a_usage_step_judged_live_tells_nothing() -> None:
    # The live path's usage step: no cost budget, so the engine has no observation to give (None): nothing is told.
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    assert judge.judge(Step(span_id=1, model="m", usage=Usage(input_tokens=5))) == []


def test_an_event_judged_live_names_the_step_that_caused_it() -> None:
    # Three equal calls with one result, judged live: the third is stuck (frequency limit 3) with a nudge; what is
    # told names that third step.
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    steps = [Step(span_id=i + 1, start_ns=i, end_ns=i, call=ToolCall("s", '{"q": 1}', result="r", result_captured=True))
             for i in range(3)]
    told = [j for s in steps for j in judge.judge(s)]
    assert [(j.step, j.observation.verdict.kind) for j in told] == [(steps[2], "stuck")]


def test_the_step_audit_of_a_live_judge_sees_every_call() -> None:
    # A live judge (no kept steps) with the step audit on: four equal calls in a row reach the repeat limit of 3,
    # so the audit reports one repeat loop starting at call 0.
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=True)
    for i in range(4):
        judge.judge(Step(span_id=i + 1, start_ns=i, end_ns=i,
                         call=ToolCall("s", '{"q": 1}', result="r", result_captured=True)))
    report = judge.report("x", None)
    assert report.ok is False
    assert len(report.violations) == 1
    assert report.violations[0].startswith("repeat_loop:") and report.violations[0].endswith("@0")


def test_a_repetition_that_is_not_stuck_reports_no_period() -> None:
    # Six equal calls without recorded results under frequency_limit 10: the period rule finds a cycle of 1 at the
    # third call, but the evidence is missing, so the verdict is uncertain (its period is 1); the report and its
    # transition give a period for a stuck verdict only: None.
    engine = LoopEngine(LoopGuardConfig(frequency_limit=10))
    judge = TraceJudge(engine)
    for i in range(6):
        judge.add(Step(span_id=i + 1, start_ns=i, end_ns=i, call=ToolCall("s", '{"q": 1}', result_captured=False)))
    judge.finish()
    report = judge.report("x", None)
    assert (report.verdict.kind, report.verdict.period) == ("uncertain", 1)
    assert report.stuck_period is None
    out = report.as_dict()
    assert out["period"] is None
    assert [(t["to"], t["period"]) for t in out["transitions"]] == [("uncertain", None)]


def test_unpriced_models_are_listed_sorted_in_the_report() -> None:
    # Prices for "m" only: usage of "zeta" (3 tokens) and "alpha" (4 tokens) is unpriced: 7 unpriced tokens, the
    # models sorted by name.
    engine = LoopEngine(LoopGuardConfig(prices={"m": Prices(input=1.0, output=2.0)}))
    judge = TraceJudge(engine)
    judge.add(Step(span_id=1, model="zeta", usage=Usage(input_tokens=3)))
    judge.add(Step(span_id=2, start_ns=1, end_ns=1, model="alpha", usage=Usage(input_tokens=4)))
    judge.finish()
    out = judge.report("x", None).as_dict()
    assert (out["unpriced_tokens"], out["unpriced_models"]) == (7, ["alpha", "zeta"])


def test_at_most_1000_transitions_and_interventions_are_kept() -> None:
    # 1 100 cycles of three equal calls, each cycle with new arguments: the third call of a cycle is stuck (frequency
    # limit 3) and nudged; the next cycle's first call is working again. That is 2 transitions and 1 nudge per cycle
    # (no stop: the call after a nudge, with a new result, is working again; nudges unlimited here), so 2 199
    # transitions and 1 100 nudges
    # happen; the report keeps the first 1 000 of each.
    engine = LoopEngine(LoopGuardConfig(max_steps=100_000, max_nudges=100_000))
    judge = TraceJudge(engine, keep_steps=False, step_audit=False)
    k = 0
    for cycle in range(1100):
        for _ in range(3):
            judge.judge(Step(span_id=k + 1, start_ns=k, end_ns=k,
                             call=ToolCall("s", f'{{"c": {cycle}}}', result=f"r{cycle}", result_captured=True)))
            k += 1
    report = judge.report("x", None)
    assert (len(report.transitions), len(report.interventions)) == (1000, 1000)
    assert report.transitions[0].step == 2 and report.interventions[0].step == 2
