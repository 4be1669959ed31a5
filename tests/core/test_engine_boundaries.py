"""The engine's boundaries, one fixed example each, expected values worked out by hand from the README's rules.

Budgets ("more than max_steps", "over max_cost_usd"), the bound on the transition history and the equality of
non-object arguments are places where an off-by-one or a dropped branch changed nothing any other test saw.
Everything here goes through the public API: ``LoopEngine``, ``ToolCall``, ``LoopGuardConfig``.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.core.config import LoopGuardConfig, Prices
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import Intervention, Lease, ToolCall

T0 = 1_767_225_600.0


def _call(tool: str, args: Any, result: Any = "same result", at: float = 0.0, **kw: Any) -> ToolCall:
    return ToolCall(tool, args, result=result, result_captured=True, start=T0 + at, end=T0 + at + 0.5, **kw)


def _run(config: LoopGuardConfig | None, calls: list[ToolCall]) -> tuple[list[str], list[tuple[int, str, str]]]:
    engine = LoopEngine(config)
    state = engine.new_state()
    kinds, interventions = [], []
    for c in calls:
        obs = engine.observe(state, c)
        kinds.append(obs.verdict.kind)
        if obs.intervention is not None:
            interventions.append((obs.index, obs.intervention.action, obs.intervention.rule))
    return kinds, interventions


# --- the step budget --------------------------------------------------------------------------------------------

def test_distinct_calls_are_stopped_by_the_call_after_the_budget() -> None:
    # max_steps = 3 means "more than 3 tool calls is over the budget": calls 1-3 are fine, the 4th (index 3) stops
    # the run with rule step_limit, and a stop stays (nothing more on the 5th call).
    calls = [_call("t", {"n": i}, result=f"r{i}", at=i) for i in range(5)]
    kinds, interventions = _run(LoopGuardConfig(max_steps=3, max_period=1, window=3), calls)
    assert kinds == ["working"] * 5
    assert interventions == [(3, "stop", "step_limit")]


def test_step_budget_message_names_the_count_and_the_budget() -> None:
    engine = LoopEngine(LoopGuardConfig(max_steps=3, max_period=1, window=3))
    state = engine.new_state()
    stops = [o.intervention for o in (engine.observe(state, _call("t", {"n": i}, at=i)) for i in range(4))
             if o.intervention is not None]
    # 4 calls, budget 3: the text says both numbers.
    assert [s.message for s in stops] == ["loopguard stopped the run: 4 tool calls, over the step budget of 3"]


def test_a_stuck_call_exactly_on_the_budget_is_nudged_not_stopped() -> None:
    # Four identical calls with the same result, max_steps = 3. The third call completes a period-1 cycle of three
    # (min_repetitions 3): stuck, and since 3 calls are not *more* than the budget of 3, the ladder's first step
    # applies: a nudge (rule period). The fourth call is over the budget: the step budget stops the run (it is
    # checked before the ladder, so the rule is step_limit, not period).
    calls = [_call("search", {"q": "x"}, at=i) for i in range(4)]
    kinds, interventions = _run(LoopGuardConfig(max_steps=3), calls)
    assert kinds == ["working", "working", "stuck", "stuck"]
    assert interventions == [(2, "nudge", "period"), (3, "stop", "step_limit")]


def test_a_stuck_call_one_past_the_budget_is_a_step_limit_stop() -> None:
    # max_steps = 2: the third call is both over the budget and stuck; the budget wins (no nudge first).
    calls = [_call("search", {"q": "x"}, at=i) for i in range(3)]
    kinds, interventions = _run(LoopGuardConfig(max_steps=2, max_period=1, window=3), calls)
    assert kinds == ["working", "working", "stuck"]
    assert interventions == [(2, "stop", "step_limit")]


# --- the cost budget ----------------------------------------------------------------------------------------------

def test_a_cost_exactly_on_the_budget_is_not_over_it() -> None:
    # Price 1 USD per million input tokens: 1000 tokens cost 1000 / 1e6 = 0.001 USD, exactly the budget (both sides
    # are the double nearest to 0.001: the division is correctly rounded). "Over the budget" means more than it,
    # so no stop; one more token (0.001001 USD) is over it and stops the run with rule cost_limit.
    config = LoopGuardConfig(max_cost_usd=0.001, prices={"m": Prices(input=1.0, output=0.0)})
    engine = LoopEngine(config)
    state = engine.new_state()
    engine.observe(state, _call("t", {}))
    assert engine.add_usage(state, "m", Usage(input_tokens=1000)) is None
    assert state.cost.usd == 0.001
    obs = engine.add_usage(state, "m", Usage(input_tokens=1))
    assert obs is not None and obs.intervention is not None
    stop: Intervention = obs.intervention
    assert (stop.action, stop.rule, stop.step) == ("stop", "cost_limit", 0)
    assert stop.message == "loopguard stopped the run: model usage cost $0.0010, over the budget of $0.0010"
    # A stop stays: more usage stops nothing again.
    assert engine.add_usage(state, "m", Usage(input_tokens=5000)) is None


def test_no_cost_budget_never_stops() -> None:
    config = LoopGuardConfig(prices={"m": Prices(input=1000.0, output=0.0)})
    engine = LoopEngine(config)
    state = engine.new_state()
    assert engine.add_usage(state, "m", Usage(input_tokens=10**9)) is None
    assert state.cost.usd == 1_000_000.0  # 1e9 tokens at 1000 USD per million


# --- the transition history ---------------------------------------------------------------------------------------

def test_the_transition_history_keeps_the_last_thousand() -> None:
    # One call repeated 1800 times; its result changes every third call (r0 r0 r0 r1 r1 r1 ...). Within a block of
    # three equal results the verdicts are working (the result changed: progress), working, stuck (three calls with
    # one result), so the kinds flip at 3b (stuck -> working, b >= 1) and at 3b + 2 (working -> stuck): for 600
    # blocks that is 1 + 2 * 599 = 1199 transitions. The state keeps the last 1000 of them (memory per trace is
    # bounded): transitions number 199..1198, the first kept being block 100's return to working at call 300, the
    # last the relapse at call 1799.
    engine = LoopEngine()
    state = engine.new_state()
    for i in range(1800):
        engine.observe(state, _call("poll", {"job": 7}, result=f"r{i // 3}", at=i))
    assert state.transition_count == 1199
    # The history is the ladder's, inside the state (no public accessor): read it there.
    history = state._ladder.transitions
    assert len(history) == 1000
    first, last = history[0], history[-1]
    assert (first.step, first.previous, first.verdict.kind) == (300, "stuck", "working")
    assert (last.step, last.previous, last.verdict.kind) == (1799, "working", "stuck")


# --- non-object arguments -----------------------------------------------------------------------------------------

def test_list_arguments_spelt_differently_are_one_call_by_period() -> None:
    # "[1, 2]" and "[1,2]" are the same JSON value: one signature. Three such calls with one result in a row are a
    # period-1 loop of three: stuck after the third, cycle starting at call 0.
    engine = LoopEngine()
    state = engine.new_state()
    obs = [engine.observe(state, _call("pick", a, at=i)) for i, a in enumerate(["[1, 2]", "[1,2]", " [1 ,2] "])]
    assert [o.verdict.kind for o in obs] == ["working", "working", "stuck"]
    assert (obs[2].verdict.rule, obs[2].verdict.period, obs[2].verdict.repetitions, obs[2].verdict.cycle_start) == (
        "period", 1, 3, 0)


def test_list_arguments_spelt_differently_are_one_call_by_frequency() -> None:
    # The same three spellings interleaved with two unrelated calls: no period holds (the other calls differ), but
    # one signature three times in the window is the frequency rule's repetition: stuck after call 4, with
    # repetitions 3 and the first of them at call 0.
    engine = LoopEngine()
    state = engine.new_state()
    calls = [_call("pick", "[1, 2]", at=0), _call("other", {"n": 1}, result="a", at=1), _call("pick", "[1,2]", at=2),
             _call("else", {"n": 2}, result="b", at=3), _call("pick", "[ 1, 2 ]", at=4)]
    obs = [engine.observe(state, c) for c in calls]
    assert [o.verdict.kind for o in obs] == ["working"] * 4 + ["stuck"]
    v = obs[4].verdict
    assert (v.rule, v.repetitions, v.cycle_start, v.tool) == ("frequency", 3, 0, "pick")


def test_different_lists_and_scalars_are_different_calls() -> None:
    # The other side: [1, 2] and [2, 1] differ (list order matters), and so do "7" (the number) and "\"7\""
    # (the string): no call repeats, all working.
    engine = LoopEngine()
    state = engine.new_state()
    args = ["[1, 2]", "[2, 1]", "[1, 2, 3]", "7", '"7"', "[1, 2.5]"]
    kinds = [engine.observe(state, _call("pick", a, at=i)).verdict.kind for i, a in enumerate(args)]
    assert kinds == ["working"] * 6


# --- the four rules that only the randomised differential test used to catch -----------------------------------------

def test_missing_evidence_counts_only_inside_the_judged_cycle() -> None:
    # The same call four times; the first one's result was not recorded. After call 2 the judged cycle is calls 0-2
    # (period 1, min_repetitions 3) and holds the incomplete call 0: uncertain. After call 3 the last three calls
    # (1-3) all have the same recorded result: the incomplete call has left the judged window, so stuck.
    calls = [ToolCall("search", {"q": "x"}, start=T0, end=T0 + 0.5)]
    calls += [_call("search", {"q": "x"}, at=i) for i in range(1, 4)]
    kinds, _ = _run(None, calls)
    assert kinds == ["working", "working", "uncertain", "stuck"]


def test_one_incomplete_call_among_frequent_ones_is_uncertain() -> None:
    # search three times in the window between other calls (the frequency rule, no period): the middle one has no
    # recorded result. One incomplete call among the repeated ones is enough to withhold "stuck": uncertain.
    calls = [_call("search", {"q": "x"}, at=0), _call("read", {"n": 1}, result="a", at=1),
             ToolCall("search", {"q": "x"}, start=T0 + 2, end=T0 + 2.5), _call("edit", {"n": 2}, result="b", at=3),
             _call("search", {"q": "x"}, at=4)]
    kinds, _ = _run(None, calls)
    assert kinds == ["working"] * 4 + ["uncertain"]


def test_a_failure_among_frequent_calls_is_not_progress() -> None:
    # The same pattern with the middle search failing (ValueError: not retryable) instead: a failure is never
    # progress, so the evidence of the three searches is one result ("same result") plus a failure -> stuck by
    # frequency, not working.
    calls = [_call("search", {"q": "x"}, at=0), _call("read", {"n": 1}, result="a", at=1),
             ToolCall("search", {"q": "x"}, error="ValueError", start=T0 + 2, end=T0 + 2.5),
             _call("edit", {"n": 2}, result="b", at=3), _call("search", {"q": "x"}, at=4)]
    engine = LoopEngine()
    state = engine.new_state()
    obs = [engine.observe(state, c) for c in calls]
    assert [o.verdict.kind for o in obs] == ["working"] * 4 + ["stuck"]
    assert (obs[4].verdict.rule, obs[4].verdict.repetitions) == ("frequency", 3)


def test_a_cycle_of_two_failing_calls_is_not_a_retry() -> None:
    # A B A B A B, every call failing with RateLimitError (retryable), 10 s apart (any backoff is met). A retry is
    # the same call again: after call 4, A is frequent (3 times) and the last call is a retryable failure whose
    # retry run is intact -> retrying. After call 5 the period-2 cycle holds three times: a cycle of two different
    # calls is not a retry, and failures are equal evidence -> stuck (period 2).
    calls = [ToolCall(tool, {"id": 1}, error="RateLimitError", start=T0 + 10 * i, end=T0 + 10 * i + 0.5)
             for i, tool in enumerate("ABABAB")]
    engine = LoopEngine()
    state = engine.new_state()
    obs = [engine.observe(state, c) for c in calls]
    assert [o.verdict.kind for o in obs] == ["working"] * 4 + ["retrying", "stuck"]
    assert (obs[5].verdict.rule, obs[5].verdict.period) == ("period", 2)


def test_a_failure_among_frequent_calls_with_equal_digests_is_not_progress() -> None:
    # As above, but the two successful results differ in a volatile field only ({"request_id": 1, "v": 2} and
    # {"request_id": 2, "v": 2}): as evidence they are one result (the volatile key is removed before digesting),
    # and the failure is still not progress -> stuck by frequency.
    calls = [_call("search", {"q": "x"}, result='{"request_id": 1, "v": 2}', at=0),
             _call("read", {"n": 1}, result="a", at=1),
             ToolCall("search", {"q": "x"}, error="ValueError", start=T0 + 2, end=T0 + 2.5),
             _call("edit", {"n": 2}, result="b", at=3),
             _call("search", {"q": "x"}, result='{"request_id": 2, "v": 2}', at=4)]
    kinds, _ = _run(None, calls)
    assert kinds == ["working"] * 4 + ["stuck"]


# --- retry gaps and leases ------------------------------------------------------------------------------------------

def _failing(at: float | None, length: float | None = 0.1) -> ToolCall:
    start = None if at is None else T0 + at
    end = None if at is None or length is None else T0 + at + length
    return ToolCall("quote", {"s": "ACME"}, error="RateLimitError", start=start, end=end)


def test_retry_gaps_without_end_times_are_measured_from_starts() -> None:
    # Spans without an end: the gap is taken from the previous start. Starts 0, 1, 3, 7 s: gaps 1, 2, 4 s against
    # the minimum 0.8, 1.6, 3.2 s -> retrying from the third call.
    kinds, _ = _run(None, [_failing(t, None) for t in (0.0, 1.0, 3.0, 7.0)])
    assert kinds == ["working", "working", "retrying", "retrying"]


def test_retry_gaps_are_measured_from_the_previous_end() -> None:
    # Calls 1 s long; the first retry starts 0.5 s after the first call ended (1.5 s after it started): a gap of
    # 0.5 s, under the 0.8 s minimum -> not a backoff, stuck after the third call. (Measured from the starts, the
    # gaps 1.5 s and 2.5 s would pass the minimum 0.8 s and 1.6 s.)
    kinds, _ = _run(None, [_failing(t, 1.0) for t in (0.0, 1.5, 4.0)])
    assert kinds == ["working", "working", "stuck"]


def test_retries_without_times_are_not_a_backoff() -> None:
    # The first failure has times, the next two none: without times no backoff can be shown -> stuck.
    kinds, _ = _run(None, [_failing(0.0), _failing(None), _failing(None)])
    assert kinds == ["working", "working", "stuck"]


def test_a_lease_ends_when_another_call_is_made() -> None:
    # A lease declared by poll {"job": 7} (owner ci, deadline an hour ahead): waiting. The wait is over when the
    # next call is a different one, whether the same tool with other arguments or another tool with the same
    # arguments: working again.
    lease = Lease("ci", T0 + 3600)
    for other in (ToolCall("poll", {"job": 8}, result="x", result_captured=True, start=T0 + 10, end=T0 + 11),
                  ToolCall("fetch", {"job": 7}, result="x", result_captured=True, start=T0 + 10, end=T0 + 11)):
        calls = [ToolCall("poll", {"job": 7}, result="pending", result_captured=True, start=T0, end=T0 + 1,
                          lease=lease), other]
        kinds, _ = _run(None, calls)
        assert kinds == ["waiting", "working"], other.tool
    # The same call again without declaring the lease anew: still the same wait.
    again = [ToolCall("poll", {"job": 7}, result="pending", result_captured=True, start=T0 + i, end=T0 + i + 1,
                      lease=lease if i == 0 else None) for i in range(2)]
    assert _run(None, again)[0] == ["waiting", "waiting"]


@pytest.mark.parametrize(("results", "kind"), [
    (("r1", "r2", "r3"), "working"),   # three different results: progress
    (("r1", "r1", "r2"), "working"),   # two different results: still progress
    (("r1", "r1", "r1"), "stuck"),     # one result: stuck
])
def test_frequent_calls_are_stuck_only_with_one_result(results: tuple[str, str, str], kind: str) -> None:
    # search three times in the window between other calls (the frequency rule): stuck only when every result is
    # the same; any change of result is progress (rule progress).
    calls = [_call("search", {"q": "x"}, result=results[0], at=0), _call("read", {"n": 1}, result="a", at=1),
             _call("search", {"q": "x"}, result=results[1], at=2), _call("edit", {"n": 2}, result="b", at=3),
             _call("search", {"q": "x"}, result=results[2], at=4)]
    engine = LoopEngine()
    state = engine.new_state()
    last = [engine.observe(state, c) for c in calls][-1].verdict
    assert (last.kind, last.rule) == (kind, "frequency" if kind == "stuck" else "progress")


def test_a_trace_stopped_by_its_cost_budget_still_recovers_when_the_loop_ends() -> None:
    # Three identical calls with identical results: stuck at the third (the default minimum of 3 repetitions). A
    # cost stop then ends the run; the next call is a different one, so nothing repeats at the end of the trace and
    # the README's decision order gives working: a transition stuck -> working, whatever stopped the run before.
    config = LoopGuardConfig(max_cost_usd=0.001, prices={"m": Prices(input=1.0, output=0.0)})
    engine = LoopEngine(config)
    state = engine.new_state()
    kinds = [engine.observe(state, _call("search", {"q": "x"}, at=i)).verdict.kind for i in range(3)]
    assert kinds == ["working", "working", "stuck"]
    stop = engine.add_usage(state, "m", Usage(input_tokens=2000))  # 0.002 USD, over the 0.001 budget
    assert stop is not None and stop.intervention is not None and stop.intervention.rule == "cost_limit"
    obs = engine.observe(state, _call("fetch", {"url": "u"}, result="page", at=3))
    assert obs.verdict.kind == "working"
    assert obs.transition is not None and (obs.transition.previous, obs.transition.verdict.kind) == ("stuck", "working")


@pytest.mark.parametrize("fast", [True, False])
def test_a_working_verdict_is_handed_out_again_while_it_holds(fast: bool) -> None:
    # Verdict.step is the call after which the verdict was reached, and the engine hands out the same working
    # verdict while nothing repeats: two different calls are working from the first (step 0) on, so the second
    # call's verdict is that same verdict, step 0, on the fast path and on the general decision order alike.
    engine = LoopEngine()
    engine.fast = fast
    state = engine.new_state()
    first = engine.observe(state, _call("search", {"q": "a"}, result="r1", at=0)).verdict
    second = engine.observe(state, _call("fetch", {"url": "u"}, result="r2", at=1)).verdict
    assert (first.kind, first.rule, first.step) == ("working", "none", 0)
    assert second is first
