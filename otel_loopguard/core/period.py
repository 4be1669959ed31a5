"""The periodicity detector: the shortest cycle of calls that the end of a trace repeats (rule ``period``).

For every period p up to ``max_period`` a trace keeps two counters: how many calls in a row equalled the call p
places before them (``match[p]``), and how many of those also repeated its evidence (``ev_match[p]``). A periodic
suffix of ``m`` cycles of length p is then ``match[p] >= (m - 1) * p``: each call costs O(max_period), and nothing
rescans the window.

Two calls alternating with unchanged results: three cycles of period 2 make the sixth call stuck (the frequency
rule, which would see the third equal call first, is set out of the way here):

>>> from otel_loopguard.core.config import LoopGuardConfig
>>> from otel_loopguard.core.engine import LoopEngine
>>> from otel_loopguard.core.model import ToolCall
>>> engine = LoopEngine(LoopGuardConfig(frequency_limit=10))
>>> state = engine.new_state()
>>> calls = [ToolCall("search", {"q": q}, result="none", result_captured=True) for q in "abababa"]
>>> [(o.verdict.kind, o.verdict.rule, o.verdict.period) for o in (engine.observe(state, c) for c in calls)][4:]
[('working', 'none', None), ('stuck', 'period', 2), ('stuck', 'period', 2)]
"""

from __future__ import annotations

from collections import deque

from .model import RULE_PERIOD
from .signature import FAILED
from .window import PENDING, Call, Repetition, Signatures

__all__ = ["PeriodDetector", "PeriodState"]


class PeriodState:
    """One trace's counters (index = period; index 0 unused)."""

    __slots__ = ("ev_match", "match")

    def __init__(self, max_period: int) -> None:
        self.match = [0] * (max_period + 1)
        self.ev_match = [0] * (max_period + 1)

    def repeats_previous(self) -> bool:
        """Whether the last call had the signature of the call before it."""
        return self.match[1] > 0


class PeriodDetector:
    """Finds the shortest periodic suffix of at least ``min_repetitions`` cycles (per tool settings apply).

    Args:
        max_period: the longest cycle looked for.
        signatures: compares calls.
    """

    def __init__(self, max_period: int, signatures: Signatures) -> None:
        self._periods = range(1, max_period + 1)
        self._max_period = max_period
        self._signatures = signatures

    def new_state(self) -> PeriodState:
        """Counters of a new trace."""
        return PeriodState(self._max_period)

    def update(self, state: PeriodState, calls: deque[Call], call: Call) -> bool:
        """Count ``call`` against the calls before it (not yet in ``calls``); returns whether any period matched."""
        match = state.match
        tool = call.tool
        matched = False
        # (What only a call of the same tool needs is read there: most calls of a trace are of other tools.)
        # The p-th latest call for each period p (fewer while the trace is short; a period longer than the trace
        # has never matched, so its counters are zero).
        for p, prev in zip(self._periods, reversed(calls)):
            # Different tools never match, whatever the arguments: most calls stop here, uncanonicalised.
            if prev.tool == tool:
                same = self._signatures.same_signature(prev, call)
                if same:
                    matched = True
                    match[p] += 1
                    ev_match = state.ev_match
                    evidence = call.evidence
                    # A failure is never progress, so it continues an unchanged-evidence run.
                    if evidence is None:
                        ev_match[p] = 0
                    elif evidence == FAILED or (
                        (evidence is PENDING and prev.evidence is PENDING and prev.res == call.res)
                        or self._signatures.same_evidence(prev, call)
                    ):
                        ev_match[p] += 1
                    else:
                        ev_match[p] = 0
                    continue
            if match[p]:
                match[p] = state.ev_match[p] = 0
        return matched

    def find(self, state: PeriodState, calls: deque[Call], last_incomplete: int,
             last_not_permanent: int) -> Repetition | None:
        """The shortest periodic suffix of the window (``calls``, the newest last), or None.

        Args:
            last_incomplete: index of the trace's last call without complete evidence.
            last_not_permanent: index of the trace's last call that was not a permanent failure.
        """
        match = state.match
        current = calls[-1]
        index = current.index
        for p in self._periods:
            m = match[p]
            if m < p:  # not even two cycles: cheap reject before looking at tools
                continue
            if p == 1:
                min_reps, exempt = current.rules.min_reps, current.rules.exempt
            else:
                min_reps, exempt = 0, True
                for k in range(1, p + 1):
                    rules = calls[-k].rules
                    if rules.min_reps > min_reps:
                        min_reps = rules.min_reps
                    exempt = exempt and rules.exempt
            if m < (min_reps - 1) * p or exempt:
                continue
            run = m + p
            # The cycles the verdict rests on: the last min_reps of them.
            since = index - min_reps * p
            return Repetition(
                RULE_PERIOD, p, run // p, index - run + 1, calls[-p],
                incomplete=last_incomplete > since,
                retry_applies=p == 1,
                permanent=last_not_permanent <= since,
                _unchanged=state.ev_match[p] >= (min_reps - 1) * p,
            )
        return None
