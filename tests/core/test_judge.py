"""The trace judge: de-duplication, start order, nesting, compact steps, live judging and exact re-judging.

Default configuration throughout unless a test says otherwise: window 10, max_period 3, min_repetitions 3,
frequency_limit 3, stop_after 1, max_nudges 1. So three identical calls with the same result are stuck at the
third (index 2: the period-1 suffix holds three cycles), which is nudged; the fourth (index 3) is stopped.
"""

from __future__ import annotations

import itertools

import msgspec
import pytest

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import (
    MCP_CLIENT_NESTING,
    ORIGIN_MCP_CLIENT,
    Nesting,
    NestingRule,
    Step,
    TraceJudge,
    compact_value,
)
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000  # ns per second
T0 = 1_767_225_600 * S
ENGINE = LoopEngine(LoopGuardConfig())


def call_step(span_id: int, at: int, tool: str = "search", args: str = '{"q": "x"}', result: str | None = "none",
              parent: int | None = 1, origin: str = "", **call_fields: object) -> Step:
    """A tool step starting ``at`` seconds after T0 and lasting half a second."""
    start, end = T0 + at * S, T0 + at * S + S // 2
    call = ToolCall(tool=tool, arguments=args, result=result, result_captured=result is not None,
                    start=start / S, end=end / S, **call_fields)  # type: ignore[arg-type]
    return Step(span_id=span_id, parent_span_id=parent, start_ns=start, end_ns=end, call=call, origin=origin)


def loop(n: int = 4) -> list[Step]:
    """``n`` identical calls, one per second, span ids 10, 11, ..."""
    return [call_step(10 + i, i) for i in range(n)]


def whole(steps: list[Step], engine: LoopEngine = ENGINE) -> TraceJudge:
    judge = TraceJudge(engine)
    for step in steps:
        judge.add(step)
    judge.finish(None)
    return judge


def summary(judge: TraceJudge) -> tuple[object, ...]:
    return (judge.verdict.kind, judge.steps, [(t.step, t.verdict.kind) for t in judge.transitions],
            [(i.step, i.action) for i in judge.interventions])


def test_a_loop_of_four_identical_calls() -> None:
    """Stuck (period 1) at call index 2 with a nudge there, stopped at index 3 (derived in the module docstring)."""
    assert summary(whole(loop())) == ("stuck", 4, [(2, "stuck")], [(2, "nudge"), (3, "stop")])


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_any_arrival_order_gives_the_same_judgement(order: tuple[int, ...]) -> None:
    """Steps added in any of the 24 orders are judged in start order: the same verdict, transitions, stop."""
    steps = loop()
    assert summary(whole([steps[i] for i in order])) == ("stuck", 4, [(2, "stuck")], [(2, "nudge"), (3, "stop")])


def test_ties_in_start_time_are_broken_by_end_then_span_id() -> None:
    """Two calls with the same start and end are judged in span id order, whatever order they came in."""
    a = call_step(7, 0, tool="a")
    b = [call_step(5, 0, tool="b"), call_step(9, 1, tool="b"), call_step(11, 2, tool="b")]
    # Span id 5 (b) goes before 7 (a): b a b b, no run of three. Judged a first, b b b would be a run at index 1.
    for steps in ([a, *b], [*b, a], [b[0], a, b[1], b[2]]):
        assert whole(steps).report("x", None).violations == ()


def test_a_span_delivered_twice_counts_once() -> None:
    """Three calls, each delivered twice (an exporter retry): three calls, not six; duplicates counted."""
    steps = loop(3)
    judge = TraceJudge(ENGINE)
    added = [judge.add(s) for s in steps + steps]
    judge.finish(None)
    assert added == [True, True, True, False, False, False]
    assert (judge.steps, judge.duplicates) == (3, 3)
    report = judge.report("x", None)
    assert (report.steps_used, report.duplicates) == (3, 3)


def test_an_mcp_client_span_inside_a_tool_span_is_one_call() -> None:
    """An MCP client span whose parent is an execute_tool span is the same call: the pair counts once."""
    outer = call_step(20, 0, parent=1)
    inner = call_step(21, 0, parent=20, origin=ORIGIN_MCP_CLIENT)
    beside = call_step(22, 2, tool="fetch", parent=1, origin=ORIGIN_MCP_CLIENT)  # under the agent: its own call
    for steps in ([outer, inner, beside], [inner, beside, outer], [beside, inner, outer]):
        assert whole(steps).steps == 2


def test_live_inner_step_waits_for_its_open_parent() -> None:
    """Live: the MCP client span ends first while its tool span is open; it waits and the pair is judged once."""
    judge = TraceJudge(ENGINE, keep_steps=False)
    assert judge.judge(call_step(21, 0, parent=20, origin=ORIGIN_MCP_CLIENT), parent_open=True) == []
    assert (judge.steps, judge.pending) == (0, 1)
    judge.judge(call_step(20, 0, parent=1))
    assert (judge.steps, judge.pending) == (1, 0)


def test_a_held_inner_step_whose_parent_never_ends_is_judged_at_finish() -> None:
    """An inner step held for a parent that never arrives is judged on its own when the trace finishes."""
    judge = TraceJudge(ENGINE, keep_steps=False)
    judge.judge(call_step(21, 0, parent=20, origin=ORIGIN_MCP_CLIENT), parent_open=True)
    judge.finish(None)
    assert judge.steps == 1


def test_a_nesting_rule_can_let_the_inner_span_supply_the_call() -> None:
    """A rule (as a convention would add one) joins a wrapper span and the native span it wraps into one call,
    taking the arguments and result from the span that carries them."""

    def wrapper_and_native(outer: Step, inner: Step) -> Step | None:
        assert outer.call is not None and inner.call is not None
        same_tool = outer.call.tool == inner.call.tool
        overlap = inner.start_ns < outer.end_ns and outer.start_ns < inner.end_ns
        if outer.origin != "wrapper" or not same_tool or not overlap:
            return None
        return inner if inner.call.arguments_captured else outer

    nesting = Nesting(NestingRule("native", wrapper_and_native), *MCP_CLIENT_NESTING.rules)
    judge = TraceJudge(ENGINE, nesting=nesting)
    for i in range(3):
        wrapper = call_step(100 + i, 2 * i, args=None, result=None, origin="wrapper", arguments_captured=False)
        native = call_step(200 + i, 2 * i, origin="native", parent=100 + i)
        judge.add(native)
        judge.add(wrapper)
    judge.finish(None)
    # Three calls, not six, each with the native span's content: three identical captured calls are stuck at
    # index 2; had the wrapper (no arguments captured) stood for them, the verdict would be uncertain.
    assert (judge.steps, judge.verdict.kind) == (3, "stuck")


def test_long_text_is_kept_as_a_digest_and_judged_the_same() -> None:
    """Arguments over max_argument_bytes are kept as a short digest: equal ones still repeat, distinct ones don't."""
    config = LoopGuardConfig(max_argument_bytes=1024)
    engine = LoopEngine(config)
    big = "x" * 1_000_000
    same = whole([call_step(10 + i, i, args=big) for i in range(3)], engine)
    distinct = whole([call_step(10 + i, i, args=big + str(i)) for i in range(3)], engine)
    assert (same.verdict.kind, distinct.verdict.kind) == ("stuck", "working")
    # Kept: three steps of a few hundred bytes each, not three megabytes.
    assert same.kept_bytes < 3 * 1024


def test_compact_value_cuts_a_nudge_before_digesting() -> None:
    """A long result with a loopguard nudge appended gives the digest of the result without the nudge."""
    text = "r" * 100
    assert compact_value(text + "\n\n[loopguard] You have made ...", 64)[0] == compact_value(text, 64)[0]
    kept, size = compact_value(text, 64)
    assert kept.startswith("<100 characters, blake2b ") and size == len(kept)
    assert compact_value("short", 64) == ("short", 5)


def test_a_late_step_is_judged_live_then_exactly_at_finish() -> None:
    """Live: a step that starts before one already judged is judged at once (provisional), and finish judges the
    trace again in start order, telling only what was not told."""
    a, b, c, d = (call_step(10 + i, 2 * i) for i in range(4))  # identical searches at 0, 2, 4, 6 s
    other = call_step(30, 1, tool="read", args='{"doc": 1}', result="the doc")  # starts at 1 s, arrives last
    judge = TraceJudge(ENGINE, track_events=True)
    told = []
    for step in (a, b, c, d, other):
        judge.add(step)
        told += judge.advance()
    # Live, in arrival order a b c d other: stuck (period 1) and nudged at index 2, stopped at 3; at index 4 the
    # different call, with a result not seen before, makes it working again, told as provisional (it came out of
    # order).
    assert [(j.observation.index, j.provisional) for j in told] == [(2, False), (3, False), (4, True)]
    assert judge.reordered
    final = judge.finish(None)
    # In start order a other b c d: at index 3 (c) no period holds three cycles, but the search is the 3rd in the
    # window (frequency limit 3): stuck by frequency, nudged; at index 4 (d) b c d is a period-1 run: still stuck,
    # after a nudge: stop.
    assert summary(judge) == ("stuck", 5, [(3, "stuck")], [(3, "nudge"), (4, "stop")])
    assert judge.transitions[0].verdict.rule == "frequency"
    assert [(j.observation.index, j.provisional) for j in final] == [(3, False), (4, False)]
    # None of the three live events is produced by the exact judgement.
    assert (judge.rejudged, judge.retracted) == (1, 3)


def test_a_reordered_judge_without_its_steps_is_partial() -> None:
    """When the kept steps were dropped (budget), a late step cannot be re-judged: the report says partial."""
    a, b, c, d = loop()
    judge = TraceJudge(ENGINE)
    for step in (b, c, d):
        judge.judge(step)
    assert judge.drop_steps() > 0 and not judge.keeps_steps
    judge.judge(a)
    judge.finish(None)
    assert judge.report("x", None).partial is True


def test_usage_steps_add_cost_and_unknown_models_stay_unpriced() -> None:
    """A usage step of a priced model adds its price; an unknown model's tokens are unpriced, never $0."""
    from otel_loopguard.core.config import Prices

    engine = LoopEngine(LoopGuardConfig(prices={"m": Prices(input=1.0, output=2.0)}))
    judge = TraceJudge(engine)
    judge.add(Step(span_id=1, start_ns=T0, end_ns=T0 + 1, model="m", usage=Usage(input_tokens=1_000_000)))
    judge.add(Step(span_id=2, start_ns=T0, end_ns=T0 + 2, model="other", usage=Usage(output_tokens=10)))
    judge.finish(None)
    report = judge.report("x", None)
    # 1M input tokens at $1 per million; the other model's 10 tokens have no price.
    assert report.cost is not None and (report.cost.usd, report.cost.unpriced_tokens) == (1.0, 10)


def test_the_step_audit_follows_start_order() -> None:
    """Three identical calls arriving out of order are one run starting at index 0, as in start order."""
    steps = loop(3)
    report = whole([steps[2], steps[0], steps[1]]).report("x", None)
    assert report.violations == ('repeat_loop:search|q=x@0',)


def _with_a_call_known_at_the_end() -> tuple[list[Step], Step]:
    """Identical searches at 1-4 s (span ids 10-13) and a fetch at 0 s without a result known only when the trace
    ended (``at_end``, span id 20: a call derived from a model span that never got its result)."""
    searches = [call_step(10 + i, 1 + i) for i in range(4)]
    fetch = msgspec.structs.replace(call_step(20, 0, tool="fetch", args='{"u": 1}', result=None), at_end=True)
    return searches, fetch


def test_a_step_known_at_the_end_is_judged_after_the_others() -> None:
    """A step marked at_end is judged after every other step whatever its start: the four searches first (stuck and
    nudged at index 2, stopped at 3), the fetch last (index 4, no result: no new evidence, still stuck)."""
    searches, fetch = _with_a_call_known_at_the_end()
    for steps in ([fetch, *searches], [*searches, fetch], [searches[2], fetch, searches[0], searches[3], searches[1]]):
        judge = whole(steps)
        # In start order (fetch first) the third search would be index 3: stuck, nudged at 3, stopped at 4.
        assert summary(judge) == ("stuck", 5, [(2, "stuck")], [(2, "nudge"), (3, "stop")])
    judge = TraceJudge(ENGINE)
    for step in (fetch, *searches):
        judge.add(step)
    assert [s.span_id for s in judge.assembled()] == [10, 11, 12, 13, 20]


def test_a_step_known_at_the_end_is_not_a_late_arrival() -> None:
    """Live (``serve``): the at_end step added at the finish is judged last without making the judge reordered;
    after a late arrival, the exact re-judgement at the finish still judges it last."""
    searches, fetch = _with_a_call_known_at_the_end()
    judge = TraceJudge(ENGINE, track_events=True)
    for step in searches:
        judge.add(step)
        judge.advance()
    judge.add(fetch)
    judge.finish(None)
    assert (judge.reordered, judge.rejudged) == (False, 0)
    assert summary(judge) == ("stuck", 5, [(2, "stuck")], [(2, "nudge"), (3, "stop")])
    # Searches arriving 11 10 12 13: 10 is late (reordered), so the finish judges 10 11 12 13 20 again, exactly.
    judge = TraceJudge(ENGINE, track_events=True)
    for step in (searches[1], searches[0], searches[2], searches[3]):
        judge.add(step)
        judge.advance()
    assert judge.reordered
    judge.add(fetch)
    judge.finish(None)
    assert judge.rejudged == 1
    assert summary(judge) == ("stuck", 5, [(2, "stuck")], [(2, "nudge"), (3, "stop")])
