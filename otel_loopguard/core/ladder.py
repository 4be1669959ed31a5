"""The intervention ladder: what a trace's verdicts become — hysteresis, transitions, nudge, stop, budgets.

The ladder, and the only place that decides it: the first ``stuck`` nudges the model (a message the harness
puts in the tool result); ``stuck`` that goes on after the nudge (``stop_after`` more calls) stops the run; a trace
that gets stuck again after ``max_nudges`` nudges is stopped at once; a budget (steps, cost) exceeded stops the run.

Hysteresis (``hysteresis`` > 1) makes a trace enter ``stuck`` only after the same cycle was judged stuck that many
times in a row, so a loop that the agent is about to leave is not interrupted. It never delays what waiting cannot
change: a budget, or a cycle of permanent failures (every repeated call failed with an error class that retrying cannot
fix, such as a permission or a not-found error), which go stuck at once.

>>> from otel_loopguard.core.model import Verdict
>>> ladder = Ladder(hysteresis=2, stop_after=1, max_nudges=1, max_steps=200)
>>> state = ladder.new_state(Verdict("working", "none", -1))
>>> stuck = Verdict("stuck", "period", 5, period=1, repetitions=3, cycle_start=3, tool="search")
>>> ladder.conclude(state, stuck, 5, True, False).kind  # once: held back
'working'
>>> stuck_again = Verdict("stuck", "period", 6, period=1, repetitions=4, cycle_start=3, tool="search")
>>> ladder.conclude(state, stuck_again, 6, True, False).kind, state.transition.previous, state.last.action
('stuck', 'working', 'nudge')
>>> ladder.conclude(state, stuck_again, 7, True, False).kind, state.transition, state.last.action
('stuck', None, 'stop')
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .model import RULE_COST_LIMIT, RULE_NONE, RULE_STEP_LIMIT, STUCK, WORKING, Intervention, Transition, Verdict

__all__ = ["MAX_TRANSITIONS", "Ladder", "LadderState"]

# Kept per trace so a flapping trace cannot grow without bound.
MAX_TRANSITIONS = 1000


class LadderState:
    """One trace's place on the ladder: its verdict, transitions, hysteresis streak, nudges and stop."""

    __slots__ = ("after_nudge", "cost_limit_hit", "episode_nudged", "last", "last_rung", "nudges", "quiet", "review",
                 "reviewed", "step_limit_hit", "stop", "stuck_cycle", "stuck_streak", "transition", "transition_count",
                 "transitions", "verdict")

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.transitions: deque[Transition] = deque(maxlen=MAX_TRANSITIONS)
        self.transition_count = 0
        # The transition and the intervention (nudge or stop) the latest verdict caused, if any.
        self.transition: Transition | None = None
        # Hysteresis: how many times in a row the cycle ``stuck_cycle`` was judged stuck.
        self.stuck_streak = 0
        self.stuck_cycle: tuple[Any, ...] | None = None
        # The current stuck episode was nudged; calls since that nudge; nudges so far.
        self.episode_nudged = False
        self.after_nudge = 0
        self.nudges = 0
        self.stop: Intervention | None = None
        self.last: Intervention | None = None
        # The review asked and not resolved yet (the ladder is paused), whether one was asked, and the last rung
        # the current episode got (``nudge`` or ``review``), for the stop's message.
        self.review: Intervention | None = None
        self.reviewed = False
        self.last_rung = "nudge"
        self.step_limit_hit = False
        self.cost_limit_hit = False
        # Working with nothing pending: a ``working`` verdict of rule ``none`` reached at a call, no stop, no nudged
        # episode, no hysteresis streak, and no transition or intervention from the latest verdict. Concluding that
        # same verdict again then changes nothing, so the engine may skip it (False is always safe).
        self.quiet = False


class Ladder:
    """Turns verdicts into shown verdicts, transitions and interventions; holds no per-trace state.

    Args:
        hysteresis: evaluations of one stuck cycle needed to enter ``stuck``.
        stop_after: calls that stay stuck after a nudge before the stop.
        max_nudges: nudges per trace.
        max_steps: the step budget.
        rungs: the interventions in order, a subsequence of ``nudge``, ``review``, ``stop`` ending with ``stop``.
    """

    def __init__(self, hysteresis: int, stop_after: int, max_nudges: int, max_steps: int,
                 rungs: tuple[str, ...] = ("nudge", "stop")) -> None:
        self._hysteresis = hysteresis
        self._stop_after = stop_after
        self._max_nudges = max_nudges if "nudge" in rungs else 0
        self._max_steps = max_steps
        self._review = "review" in rungs

    @staticmethod
    def new_state(verdict: Verdict) -> LadderState:
        """The ladder state of a new trace, whose verdict is ``verdict``."""
        return LadderState(verdict)

    def conclude(self, state: LadderState, verdict: Verdict, index: int, new_call: bool, permanent: bool) -> Verdict:
        """Apply a verdict reached after call ``index``.

        Args:
            state: the trace's ladder state; its ``transition`` and ``last`` are set to the transition and the
                intervention the verdict caused (None when it caused none).
            verdict: the decision order's verdict.
            index: the trace's latest call.
            new_call: the verdict follows a new call (False when a trace is judged again at a later time).
            permanent: the verdict is a stuck cycle of permanent failures, which hysteresis never delays.

        Returns:
            The verdict the trace now has (hysteresis may keep the previous one).
        """
        previous = state.verdict
        kind = verdict.kind
        if kind == STUCK:
            if previous.kind != STUCK and self._hysteresis > 1 and not permanent:
                cycle = (verdict.rule, verdict.period, verdict.cycle_start)
                state.stuck_streak = state.stuck_streak + 1 if state.stuck_cycle == cycle else 1
                state.stuck_cycle = cycle
                if state.stuck_streak < self._hysteresis:
                    # Not yet: keep the previous verdict until the same cycle has held long enough.
                    verdict, kind = previous, previous.kind
        elif state.stuck_cycle is not None or state.stuck_streak:
            state.stuck_streak, state.stuck_cycle = 0, None

        if kind != previous.kind:
            transition = state.transition = Transition(index, previous.kind, verdict)
            state.transitions.append(transition)
            state.transition_count += 1
        else:
            state.transition = None
        state.verdict = verdict

        if state.stop is None and (kind == STUCK or state.episode_nudged or index >= self._max_steps):
            self._intervene(state, verdict, index, new_call)
        else:
            # Nothing to nudge or stop: a verdict that is not stuck ends the episode.
            state.last = None
            if state.stop is None:
                state.after_nudge = 0
                state.quiet = (state.transition is None and verdict.rule is RULE_NONE and kind is WORKING
                               and verdict.step >= 0 and state.stuck_cycle is None and not state.stuck_streak)
            return verdict
        state.quiet = False
        return verdict

    def _intervene(self, state: LadderState, verdict: Verdict, index: int, new_call: bool) -> Intervention | None:
        state.last = None
        steps = index + 1
        if new_call and steps > self._max_steps and not state.step_limit_hit:
            state.step_limit_hit = True
            return self._stop(state, Intervention(
                "stop",
                f"loopguard stopped the run: {steps} tool calls, over the step budget of {self._max_steps}",
                RULE_STEP_LIMIT, index, verdict,
            ))
        if state.review is not None:
            return None  # paused: a reviewer decides (resolve)
        if verdict.kind != STUCK:
            state.episode_nudged, state.after_nudge = False, 0
            return None
        what = _describe(verdict)
        if state.episode_nudged:
            state.after_nudge += 1
            if state.after_nudge < self._stop_after:
                return None
            return self._escalate(state, verdict, index, f"{what}, and it went on after a {state.last_rung}")
        if state.nudges >= self._max_nudges:
            again = f", again after {state.nudges} nudge(s)" if state.nudges else ""
            return self._escalate(state, verdict, index, what + again)
        state.nudges += 1
        state.episode_nudged, state.after_nudge, state.last_rung = True, 0, "nudge"
        nudge = Intervention("nudge", f"You have {what}. Try a different approach.", verdict.rule, index, verdict)
        state.last = nudge
        return nudge

    def _escalate(self, state: LadderState, verdict: Verdict, index: int, why: str) -> Intervention:
        """The rung after a nudge: a review when the ladder has one and none was asked yet, else the stop."""
        if self._review and not state.reviewed:
            review = Intervention("review", f"loopguard asks for a review: the agent {why}", verdict.rule, index,
                                  verdict)
            state.reviewed, state.review, state.last = True, review, review
            state.episode_nudged, state.after_nudge, state.last_rung = True, 0, "review"
            return review
        return self._stop(state, Intervention("stop", f"loopguard stopped the run: {why}", verdict.rule, index,
                                              verdict))

    def resolve(self, state: LadderState, approved: bool, index: int) -> Intervention | None:
        """A reviewer's answer to the pending review: go on (None), or stop the run (the stop).

        After an approval the ladder goes on from the review: a loop that continues ``stop_after`` more calls is
        stopped. No review pending: nothing happens (None).
        """
        review = state.review
        if review is None:
            return None
        state.review, state.quiet = None, False
        if approved:
            state.after_nudge, state.last = 0, None
            return None
        return self._stop(state, Intervention(
            "stop", f"loopguard stopped the run: a reviewer declined to let it go on ({review.message})",
            review.rule, index, review.verdict,
        ))

    def cost_stop(self, state: LadderState, usd: float, limit: float | None, index: int) -> Intervention | None:
        """The stop for a cost budget exceeded (once per trace), or None."""
        if limit is None or state.cost_limit_hit or usd <= limit:
            return None
        state.cost_limit_hit = True
        return self._stop(state, Intervention(
            "stop", f"loopguard stopped the run: model usage cost ${usd:.4f}, over the budget of ${limit:.4f}",
            RULE_COST_LIMIT, index, state.verdict,
        ))

    @staticmethod
    def _stop(state: LadderState, stop: Intervention) -> Intervention:
        state.quiet = False
        state.stop = stop
        state.last = stop
        return stop


def _describe(verdict: Verdict) -> str:
    times = verdict.repetitions or 0
    kind = verdict.step_kind
    if kind != "tool":
        return _describe_step(verdict, kind, times)
    if verdict.period and verdict.period > 1:
        return (
            f"repeated the same sequence of {verdict.period} tool calls (starting with {verdict.tool}) "
            f"{times} times with the same results"
        )
    return f"made the same {verdict.tool} call {times} times with the same result"


def _describe_step(verdict: Verdict, kind: str, times: int) -> str:
    # Agent names are the application's own (agent definitions), not model or tool output.
    agents = ", ".join(verdict.agents) or "the agents"
    if verdict.chunk_length is not None:
        return f"produced an answer whose end repeats one {verdict.chunk_length}-character chunk {times} times"
    if kind == "model":
        return f"given the same answer {times} times with nothing new in the conversation ({agents})"
    what = "handed the task" if kind == "handoff" else "invoked the same sub-agent task"
    if verdict.period and verdict.period > 1:
        return f"{what} around the same cycle of {verdict.period} steps between {agents} {times} times"
    return f"{what} between {agents} {times} times with the same results"
