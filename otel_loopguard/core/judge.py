"""Replay a finished trace through the engine and summarise it (shared by ``audit`` and the tests)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .cost import CostTotal, Usage
from .engine import LoopEngine, TraceState
from .model import STUCK, Intervention, ToolCall, Transition, Verdict


@dataclass(frozen=True)
class TraceReport:
    """The outcome of one trace.

    Attributes:
        source: where the trace came from (a file name).
        trace_id: hex trace id, or None for steps files.
        verdict: the verdict after the last call (and after re-judging at the observation time).
        stuck_period: the period of the last stuck cycle, or None.
        steps_used: tool calls in the trace.
        transitions: every change of verdict kind.
        interventions: every nudge and stop.
        ok: seed-000 result (no step-limit or run violation).
        violations: seed-000 violations, sorted.
        cost: model usage cost, when usage was seen.
        attributes: grouping attributes (for ``report``).
    """

    source: str
    trace_id: str | None
    verdict: Verdict
    stuck_period: int | None
    steps_used: int
    transitions: tuple[Transition, ...]
    interventions: tuple[Intervention, ...]
    ok: bool
    violations: tuple[str, ...]
    cost: CostTotal | None = None
    attributes: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON object ``otel-loopguard audit --json`` prints for this trace."""
        out: dict[str, Any] = {
            "source": self.source,
            "trace_id": self.trace_id,
            "verdict": self.verdict.kind,
            "rule": self.verdict.rule,
            "period": self.stuck_period,
            "steps_used": self.steps_used,
            "ok": self.ok,
            "violations": list(self.violations),
            "transitions": [t.as_dict() for t in self.transitions],
            "interventions": [i.as_dict() for i in self.interventions],
        }
        if self.cost is not None:
            out["cost_usd"] = round(self.cost.usd, 6)
            if self.cost.unpriced_tokens:
                out["unpriced_tokens"] = self.cost.unpriced_tokens
                out["unpriced_models"] = sorted(self.cost.unpriced_models)
        return out


class Replay:
    """Feeds one trace's calls and usage to the engine in order and collects what happened."""

    def __init__(self, engine: LoopEngine) -> None:
        self.engine = engine
        self.state: TraceState = engine.new_state()
        self.transitions: list[Transition] = []
        self.interventions: list[Intervention] = []
        self.stuck_period: int | None = None

    def call(self, call: ToolCall, now: float | None = None) -> None:
        """Observe one tool call."""
        self.record(self.engine.observe(self.state, call, now))

    def usage(self, model: str | None, usage: Usage) -> None:
        """Observe one model call's usage."""
        self.record(self.engine.add_usage(self.state, model, usage))

    def finish(self, observed_at: float | None) -> None:
        """Judge the trace once more at the observation time (expired leases)."""
        if observed_at is not None:
            self.record(self.engine.reevaluate(self.state, observed_at))

    def record(self, observation: Any) -> Any:
        """Keep what an engine observation changed (transition, intervention, stuck period); returns it."""
        if observation is None:
            return None
        if observation.transition is not None:
            self.transitions.append(observation.transition)
        if observation.intervention is not None:
            self.interventions.append(observation.intervention)
        if observation.verdict.kind == STUCK:
            self.stuck_period = observation.verdict.period
        return observation

    def report(self, source: str, trace_id: str | None, audit: dict[str, Any], *, with_cost: bool,
               attributes: dict[str, Any] | None = None) -> TraceReport:
        """Summarise the replay, with the seed-000 ``audit`` result."""
        return TraceReport(
            source=source,
            trace_id=trace_id,
            verdict=self.state.verdict,
            stuck_period=self.stuck_period,
            steps_used=self.state.steps,
            transitions=tuple(self.transitions),
            interventions=tuple(self.interventions),
            ok=audit["ok"],
            violations=tuple(audit["violations"]),
            cost=self.state.cost if with_cost else None,
            attributes=attributes or {},
        )


def replay_calls(engine: LoopEngine, calls: Iterable[ToolCall], observed_at: float | None) -> Replay:
    """Replay ``calls`` in order, then judge again at ``observed_at``."""
    replay = Replay(engine)
    for call in calls:
        # A call without times is judged at the trace's observation time.
        untimed = call.end is None and call.start is None
        replay.call(call, observed_at if untimed else None)
    replay.finish(observed_at)
    return replay
