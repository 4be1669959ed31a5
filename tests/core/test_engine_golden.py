"""Golden call sequences with the default configuration: the exact call index where each verdict fires."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import LoopGuardConfig, ToolSettings
from otel_loopguard.core.engine import LoopEngine

from ._helpers import call, first_index, kinds, letters, observe_all

DEFAULT = LoopGuardConfig()


def test_defaults_are_the_documented_ones() -> None:
    """The goldens below assume window 10, max_period 3, min_repetitions 3 and frequency_limit 3."""
    assert (DEFAULT.window, DEFAULT.max_period, DEFAULT.min_repetitions, DEFAULT.frequency_limit) == (10, 3, 3, 3)


@pytest.mark.parametrize(
    ("sequence", "index", "rule", "period"),
    [
        ("AAA", 2, "period", 1),
        # A is seen a third time at index 4: the frequency rule fires before two more cycles complete.
        ("ABABAB", 4, "frequency", None),
        ("ABCABCABC", 6, "frequency", None),
        ("AxAyA", 4, "frequency", None),
        ("xyAzAwvA", 7, "frequency", None),
        ("xyzAAA", 5, "period", 1),
    ],
)
def test_stuck_fires_at_the_exact_index(sequence: str, index: int, rule: str, period: int | None) -> None:
    """Stuck fires first at the given call index, by the given rule, and never before."""
    _, obs = observe_all(LoopEngine(DEFAULT), letters(sequence))
    assert first_index(obs, "stuck") == index
    v = obs[index].verdict
    assert (v.rule, v.period) == (rule, period)
    assert all(k == "working" for k in kinds(obs)[:index])
    assert obs[index].transition is not None and obs[index].transition.previous == "working"


def test_ping_pong_becomes_periodic_after_three_cycles() -> None:
    """A B A B A B is stuck by frequency at index 4 and by period 2 at index 5, with cycle start 0."""
    _, obs = observe_all(LoopEngine(DEFAULT), letters("ABABAB"))
    v = obs[5].verdict
    assert (v.kind, v.rule, v.period, v.repetitions, v.cycle_start, v.tool) == ("stuck", "period", 2, 3, 0, "search")
    assert obs[5].transition is None


def test_without_frequency_the_period_rule_fires_at_the_third_cycle() -> None:
    """With the frequency limit at the window size, A B A B A B is stuck at index 5 and A B C x3 at index 8."""
    engine = LoopEngine(LoopGuardConfig(frequency_limit=10))
    _, obs = observe_all(engine, letters("ABABAB"))
    assert first_index(obs, "stuck") == 5 and obs[5].verdict.period == 2
    _, obs = observe_all(engine, letters("ABCABCABC"))
    assert first_index(obs, "stuck") == 8 and obs[8].verdict.period == 3


def test_frequency_example_fires_at_the_fifth_call() -> None:
    """read, edit, read, run, read with identical results is stuck by frequency at index 4, not before."""
    seq = [("read", {"path": "a.py", "limit": 10}), ("edit", {"path": "a.py"}),
           ("read", {"limit": 10, "path": "a.py"}), ("run", {"cmd": "test"}),
           ("read", {"path": "a.py", "limit": 10})]
    calls = [call(t, a, result="same", at=float(i)) for i, (t, a) in enumerate(seq)]
    _, obs = observe_all(LoopEngine(DEFAULT), calls)
    assert kinds(obs) == ["working"] * 4 + ["stuck"]
    v = obs[4].verdict
    assert (v.rule, v.repetitions, v.cycle_start, v.tool) == ("frequency", 3, 0, "read")
    _, first_four = observe_all(LoopEngine(DEFAULT), calls[:4])
    assert "stuck" not in kinds(first_four)


def test_frequency_example_with_changing_reads_is_working() -> None:
    """The same sequence whose read results change is working by the progress rule."""
    seq = ["read", "edit", "read", "run", "read"]
    calls = [call(t, {"path": "a.py"}, result=f"r{i}", at=float(i)) for i, t in enumerate(seq)]
    _, obs = observe_all(LoopEngine(DEFAULT), calls)
    assert (obs[4].verdict.kind, obs[4].verdict.rule) == ("working", "progress")


def test_repeats_spread_beyond_the_window_are_not_counted() -> None:
    """A call seen three times but never three times within ten calls stays working."""
    seq = "A" + "abcd" + "A" + "efghi" + "A"  # A at 0, 5 and 10: the window at index 10 holds 1..10
    _, obs = observe_all(LoopEngine(DEFAULT), letters(seq))
    assert "stuck" not in kinds(obs)


def test_healthy_varied_calls_stay_working() -> None:
    """Thirty distinct calls never leave working."""
    _, obs = observe_all(LoopEngine(DEFAULT), letters("abcdefghijklmnopqrstuvwxyz0123"))
    assert set(kinds(obs)) == {"working"}
    assert all(o.transition is None and o.intervention is None for o in obs)


def test_hysteresis_delays_stuck_by_one_evaluation() -> None:
    """With hysteresis 2, A A A A is stuck at index 3 instead of 2."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig(hysteresis=2)), letters("AAAA"))
    assert kinds(obs) == ["working", "working", "working", "stuck"]
    assert obs[3].transition is not None and obs[3].verdict.cycle_start == 0


def test_hysteresis_three_delays_by_two() -> None:
    """With hysteresis 3, A x5 is stuck at index 4."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig(hysteresis=3)), letters("AAAAA"))
    assert first_index(obs, "stuck") == 4


def test_hysteresis_does_not_delay_the_step_budget() -> None:
    """A step budget stops at the first call over it, whatever the hysteresis."""
    engine = LoopEngine(LoopGuardConfig(max_steps=3, hysteresis=5))
    _, obs = observe_all(engine, letters("abcdef"))
    stops = [(o.index, o.intervention.rule) for o in obs if o.intervention]
    assert stops == [(3, "step_limit")]


def test_hysteresis_does_not_delay_the_cost_budget() -> None:
    """A cost budget stops on the usage record that exceeds it, whatever the hysteresis."""
    from otel_loopguard.core.config import Prices
    from otel_loopguard.core.cost import Usage

    engine = LoopEngine(LoopGuardConfig(max_cost_usd=0.01, hysteresis=5, prices={"m": Prices(input=3.0, output=15.0)}))
    state = engine.new_state()
    engine.observe(state, call("search", {"q": 1}))
    assert engine.add_usage(state, "m", Usage(input_tokens=2000, output_tokens=0)) is None  # $0.006
    obs = engine.add_usage(state, "m", Usage(input_tokens=2000, output_tokens=0))  # $0.012
    assert obs is not None and obs.intervention is not None
    assert (obs.intervention.action, obs.intervention.rule) == ("stop", "cost_limit")


def test_exempt_tool_is_never_judged() -> None:
    """An exempt tool repeated many times stays working."""
    engine = LoopEngine(LoopGuardConfig(tools={"search": ToolSettings(exempt=True)}))
    _, obs = observe_all(engine, letters("AAAAAA"))
    assert set(kinds(obs)) == {"working"}


def test_per_tool_thresholds() -> None:
    """A tool's own min_repetitions and frequency_limit move the index where it is judged stuck."""
    engine = LoopEngine(LoopGuardConfig(tools={"search": ToolSettings(min_repetitions=5, frequency_limit=5)}))
    _, obs = observe_all(engine, letters("AAAAAA"))
    assert first_index(obs, "stuck") == 4
    _, obs = observe_all(engine, letters("BBBB"))
    assert first_index(obs, "stuck") == 2


def test_states_are_independent() -> None:
    """Two traces observed interleaved by one engine do not see each other's calls."""
    engine = LoopEngine(DEFAULT)
    s1, s2 = engine.new_state(), engine.new_state()
    a, b = letters("AAA"), letters("BBB")
    out1 = [engine.observe(s1, a[0]), engine.observe(s2, b[0]), engine.observe(s1, a[1]), engine.observe(s2, b[1])]
    assert {o.verdict.kind for o in out1} == {"working"}
    assert engine.observe(s1, a[2]).verdict.kind == "stuck"
    assert engine.observe(s2, b[2]).verdict.tool == "read"
    assert (s1.steps, s2.steps) == (3, 3)


def test_long_loop_memory_stays_bounded() -> None:
    """After 5,000 identical calls the state holds only the window."""
    engine = LoopEngine(LoopGuardConfig(max_steps=10_000))
    state, obs = observe_all(engine, letters("A") * 5000)
    assert state.window_size == 10 and sum(state.counts.values()) == 10
    assert state.steps == 5000 and obs[-1].verdict.kind == "stuck"
    assert state.transition_count == 1
