"""The trace judge's fixed examples: stand-ins for oversized values, nesting, replayed calls, late arrivals.

Expected values are worked out from the documented rules (the stand-in text is ``<N characters, blake2b HEX>`` or
``<N bytes of JSON, blake2b HEX>`` with a 12-byte BLAKE2b digest, computed here with hashlib from the same bytes).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

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
    # "hello" + nudge: the engine cuts at the first marker, so the kept value is "hello" (5 <= 5, inclusive).
    assert compact_value("hello" + NUDGE_MARKER + "You have made the same call", 5) == ("hello", 5)
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
    # One call per tool name, always with the same arguments and result: the repetitions are real.
    call = ToolCall(tool, {"q": "x"}, result="r", result_captured=True, start=float(start), end=float(start))
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
        (3, ("stuck", "working", "none"), None),
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
