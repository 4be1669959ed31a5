"""The review rung: nudge, then a review that pauses the ladder until a reviewer answers, then the stop."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.errors import ConfigError

from ._helpers import letters


def _actions(engine: LoopEngine, sequence: str) -> tuple[object, list[tuple[int, str]]]:
    state = engine.new_state()
    out = []
    for c in letters(sequence):
        o = engine.observe(state, c)
        if o.intervention:
            out.append((o.index, o.intervention.action))
    return state, out


REVIEW = LoopGuardConfig(interventions=("nudge", "review", "stop"))


def test_after_the_nudge_a_continuing_loop_asks_for_review_instead_of_stopping() -> None:
    """AAAA..: nudge at call 2, review at call 3 (stop_after 1), then nothing more while the review is pending."""
    state, out = _actions(LoopEngine(REVIEW), "AAAAAAA")
    assert out == [(2, "nudge"), (3, "review")]
    review = state.review  # type: ignore[attr-defined]
    assert review is not None and (review.rule, review.step, review.verdict.tool) == ("period", 3, "search")
    assert review.message == ("loopguard asks for a review: the agent made the same search call 4 times with the same "
                              "result, and it went on after a nudge")
    assert state.stop is None  # type: ignore[attr-defined]


def test_a_declined_review_stops_the_run_at_once() -> None:
    """resolve(approved=False) gives the stop, at the trace's latest call, with the review's rule."""
    engine = LoopEngine(REVIEW)
    state, _ = _actions(engine, "AAAAA")
    o = engine.resolve(state, approved=False)  # type: ignore[arg-type]
    assert o is not None and (o.index, o.intervention.action, o.intervention.rule) == (4, "stop", "period")
    assert o.intervention.message.startswith("loopguard stopped the run: a reviewer declined to let it go on (")
    assert state.stop is o.intervention and state.review is None  # type: ignore[attr-defined]


def test_an_approved_review_lets_the_run_go_on_until_the_loop_continues_again() -> None:
    """Approved after call 3: call 4 still loops -> the stop (stop_after 1), naming the review; one review only."""
    engine = LoopEngine(REVIEW)
    state = engine.new_state()
    calls = letters("AAAAA")
    actions = [engine.observe(state, c).intervention for c in calls[:4]]
    assert [a.action if a else None for a in actions] == [None, None, "nudge", "review"]
    assert engine.resolve(state, approved=True) is None
    last = engine.observe(state, calls[4]).intervention
    assert last is not None and (last.action, last.step) == ("stop", 4)
    assert last.message.endswith("and it went on after a review")
    assert engine.resolve(state, approved=True) is None  # nothing pending: nothing happens


def test_without_the_review_rung_the_ladder_is_unchanged() -> None:
    """The default ladder (no review handler) still nudges then stops."""
    _, out = _actions(LoopEngine(LoopGuardConfig()), "AAAAA")
    assert out == [(2, "nudge"), (3, "stop")]


def test_review_then_stop_without_nudges() -> None:
    """interventions = review, stop: the first stuck call asks for review directly."""
    _, out = _actions(LoopEngine(LoopGuardConfig(interventions=("review", "stop"))), "AAAA")
    assert out == [(2, "review")]


def test_only_stop_stops_at_the_first_stuck_call() -> None:
    """interventions = stop: no nudge, the run stops when it first gets stuck."""
    state, out = _actions(LoopEngine(LoopGuardConfig(interventions=("stop",))), "AAAA")
    assert out == [(2, "stop")]
    assert state.stop.message == "loopguard stopped the run: made the same search call 3 times with the same result"  # type: ignore[attr-defined]


@pytest.mark.parametrize("rungs", [(), ("nudge",), ("stop", "nudge"), ("review", "nudge", "stop"), ("nudge", "pause", "stop"),
                                   ("nudge", "nudge", "stop")])
def test_a_ladder_out_of_order_or_without_a_stop_is_refused(rungs: tuple[str, ...]) -> None:
    """The rungs must keep the order nudge, review, stop, each once, and end with stop."""
    with pytest.raises(ConfigError, match=r"^interventions must be a subsequence of \['nudge', 'review', 'stop'\]"):
        LoopGuardConfig(interventions=rungs)


def test_the_environment_sets_the_rungs() -> None:
    """LOOPGUARD_INTERVENTIONS=nudge,review,stop is read as the three rungs."""
    config = LoopGuardConfig.load(environ={"LOOPGUARD_INTERVENTIONS": "nudge,review,stop"})
    assert config.interventions == ("nudge", "review", "stop")
