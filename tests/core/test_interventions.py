"""The intervention ladder: nudge on the first stuck verdict, then stop; budgets stop once."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import LoopGuardConfig, Prices
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import NO_INTERVENTION, Intervention
from otel_loopguard.errors import LoopGuardError, LoopStopped

from ._helpers import letters, observe_all


def ladder(config: LoopGuardConfig, sequence: str) -> list[tuple[int, str, str]]:
    """(index, action, rule) of every intervention over ``sequence``."""
    _, obs = observe_all(LoopEngine(config), letters(sequence))
    return [(o.index, o.intervention.action, o.intervention.rule) for o in obs if o.intervention]


def test_first_stuck_nudges_naming_the_tool_and_count() -> None:
    """The first stuck verdict gives a nudge whose message names the tool and how often it repeated."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig()), letters("AAA"))
    nudge = obs[2].intervention
    assert nudge is not None and nudge.action == "nudge" and bool(nudge)
    assert nudge.message == "You have made the same search call 3 times with the same result. Try a different approach."
    assert (nudge.step, nudge.rule, nudge.verdict.kind) == (2, "period", "stuck")
    nudge.raise_if_stop()  # a nudge never raises


def test_period_two_nudge_describes_the_sequence() -> None:
    """A ping-pong nudge names the cycle length and its first tool."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig(frequency_limit=10)), letters("ABABAB"))
    assert obs[5].intervention.message == (
        "You have repeated the same sequence of 2 tool calls (starting with search) 3 times with the same results. "
        "Try a different approach."
    )


def test_stuck_after_the_nudge_stops_on_the_next_call() -> None:
    """With stop_after 1 the call after the nudge, still stuck, stops the run; nothing follows the stop."""
    assert ladder(LoopGuardConfig(), "AAAAAA") == [(2, "nudge", "period"), (3, "stop", "period")]
    _, obs = observe_all(LoopEngine(LoopGuardConfig()), letters("AAAA"))
    assert obs[3].intervention.message == (
        "loopguard stopped the run: made the same search call 4 times with the same result, and it went on after a nudge"
    )


def test_stop_after_two() -> None:
    """With stop_after 2 the stop comes two stuck calls after the nudge."""
    assert ladder(LoopGuardConfig(stop_after=2), "AAAAAA") == [(2, "nudge", "period"), (4, "stop", "period")]


def test_recovery_resets_the_episode_and_relapse_stops() -> None:
    """After a nudge and a recovery, a second loop stops at once when the nudges are used up."""
    assert ladder(LoopGuardConfig(), "AAAbBBB") == [(2, "nudge", "period"), (6, "stop", "period")]
    _, obs = observe_all(LoopEngine(LoopGuardConfig()), letters("AAAbBBB"))
    assert obs[3].verdict.kind == "working"
    assert obs[6].intervention.message.endswith("again after 1 nudge(s)")


def test_more_nudges_allow_a_second_nudge_after_recovery() -> None:
    """With max_nudges 2 a relapse is nudged again, and a third episode stops."""
    assert ladder(LoopGuardConfig(max_nudges=2), "AAAbBBBcCCC") == [
        (2, "nudge", "period"), (6, "nudge", "period"), (10, "stop", "period"),
    ]


def test_step_budget_stops_once() -> None:
    """Exceeding max_steps stops the run once, at the first call over the budget."""
    assert ladder(LoopGuardConfig(max_steps=4), "abcdefgh") == [(4, "stop", "step_limit")]
    _, obs = observe_all(LoopEngine(LoopGuardConfig(max_steps=4)), letters("abcde"))
    assert obs[4].intervention.message == "loopguard stopped the run: 5 tool calls, over the step budget of 4"


def test_step_budget_exactly_reached_is_fine() -> None:
    """max_steps calls do not stop the run."""
    assert ladder(LoopGuardConfig(max_steps=4), "abcd") == []


def test_cost_budget_stops() -> None:
    """Usage that takes the trace over max_cost_usd stops it once, naming the cost and the budget."""
    engine = LoopEngine(LoopGuardConfig(max_cost_usd=0.05, prices={"m": Prices(input=5.0, output=25.0)}))
    state = engine.new_state()
    engine.observe(state, letters("a")[0])
    usage = Usage(input_tokens=300, output_tokens=1000)  # $0.0265 each
    assert engine.add_usage(state, "m", usage) is None
    obs = engine.add_usage(state, "m", usage)
    assert obs is not None
    stop = obs.intervention
    assert (stop.action, stop.rule, stop.step) == ("stop", "cost_limit", 0)
    assert stop.message == "loopguard stopped the run: model usage cost $0.0530, over the budget of $0.0500"
    assert engine.add_usage(state, "m", usage) is None
    # After a stop nothing else intervenes, not even a loop.
    later = [engine.observe(state, c).intervention for c in letters("BBBB")]
    assert later == [None] * 4


def test_raise_if_stop_raises_loop_stopped() -> None:
    """A stop intervention raises LoopStopped carrying itself; none and nudge do not raise."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig()), letters("AAAA"))
    stop = obs[3].intervention
    with pytest.raises(LoopStopped) as info:
        stop.raise_if_stop()
    assert info.value.intervention is stop
    assert str(info.value) == stop.message
    assert isinstance(info.value, (LoopGuardError, RuntimeError))
    NO_INTERVENTION.raise_if_stop()
    assert not NO_INTERVENTION and Intervention().action == "none"


def test_uncertain_and_retrying_never_intervene() -> None:
    """Only stuck verdicts and budgets intervene; repeated calls without evidence do not."""
    from otel_loopguard.core.model import ToolCall

    engine = LoopEngine(LoopGuardConfig())
    _, obs = observe_all(engine, [ToolCall("write", None, arguments_captured=False, result="ok", result_captured=True)] * 6)
    assert {o.verdict.kind for o in obs[2:]} == {"uncertain"}
    assert all(o.intervention is None for o in obs)


def test_intervention_as_dict() -> None:
    """The JSON form of an intervention has step, action, message and rule."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig()), letters("AAA"))
    d = obs[2].intervention.as_dict()
    assert d == {"step": 2, "action": "nudge", "message": obs[2].intervention.message, "rule": "period"}
