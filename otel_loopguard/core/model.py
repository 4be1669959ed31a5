"""The values the engine consumes and produces: tool calls, verdicts, transitions, interventions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..errors import LoopStopped

VerdictKind = Literal["working", "retrying", "waiting", "stuck", "uncertain"]
WORKING: VerdictKind = "working"
RETRYING: VerdictKind = "retrying"
WAITING: VerdictKind = "waiting"
STUCK: VerdictKind = "stuck"
UNCERTAIN: VerdictKind = "uncertain"
VERDICT_KINDS: tuple[VerdictKind, ...] = (WORKING, RETRYING, WAITING, STUCK, UNCERTAIN)

# Rules that decide a verdict or an intervention.
RULE_NONE = "none"
RULE_PERIOD = "period"
RULE_FREQUENCY = "frequency"
RULE_RETRY = "retry"
RULE_LEASE = "lease"
RULE_EVIDENCE = "evidence"
RULE_PROGRESS = "progress"
RULE_STEP_LIMIT = "step_limit"
RULE_COST_LIMIT = "cost_limit"

Action = Literal["none", "nudge", "stop"]


@dataclass(frozen=True, slots=True)
class Lease:
    """A declared wait on a dependency (an approval, a job): valid while it names an owner and its deadline is ahead."""

    owner: str
    deadline: float


class ToolCall(NamedTuple):
    """One tool call as the engine sees it, whatever convention it was read from.

    An immutable named tuple rather than a frozen dataclass: ``audit`` and the processor build one per tool
    span, and a frozen dataclass's ``__init__`` (ten ``object.__setattr__`` calls) cost 60% of extracting a
    call; the extractor builds it with ``tuple.__new__``. Keyword construction and attribute access are as
    before.

    Attributes:
        tool: the tool name.
        arguments: raw arguments: a dict, a list, a JSON string, another string or None (no arguments).
        arguments_captured: False when the arguments were not recorded (not the same as empty).
        result: the raw result, when ``result_captured``.
        result_captured: True when a result was recorded.
        error: the error class when the call failed, else None.
        progress: an explicit progress fingerprint supplied by the application.
        start: start time, epoch seconds.
        end: end time, epoch seconds.
        lease: a dependency wait this call declares.
    """

    tool: str
    arguments: Any = None
    arguments_captured: bool = True
    result: Any = None
    result_captured: bool = False
    error: str | None = None
    progress: str | None = None
    start: float | None = None
    end: float | None = None
    lease: Lease | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The engine's judgement of a trace after one of its calls.

    Attributes:
        kind: working, retrying, waiting, stuck or uncertain.
        rule: what decided it (period, frequency, retry, lease, evidence, progress, or none).
        step: 0-based index of the call after which this verdict was reached. The engine hands out the same
            object for later calls while the judgement is unchanged (a working trace keeps the verdict of its
            first call), so ``step`` may be earlier than the call being judged; a transition's verdict is
            always new, so its ``step`` is the call that caused it.
        period: the cycle length of the repetition, when there is one.
        repetitions: how many times the cycle (or the call, for frequency) repeated.
        cycle_start: 0-based index of the first call of the repeated cycle.
        tool: the tool of the repeated call (the cycle's first call).
        signature_digest: keyed digest of that call's signature (safe to emit).
        normalizer_version: version of the normalizer that built the signatures.
    """

    kind: VerdictKind
    rule: str
    step: int
    period: int | None = None
    repetitions: int | None = None
    cycle_start: int | None = None
    tool: str | None = None
    signature_digest: str | None = None
    normalizer_version: str = ""


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of verdict kind after call ``step``."""

    step: int
    previous: VerdictKind
    verdict: Verdict

    def as_dict(self) -> dict[str, Any]:
        """The JSON form used by ``otel-loopguard audit --json``."""
        return {
            "step": self.step,
            "from": self.previous,
            "to": self.verdict.kind,
            "rule": self.verdict.rule,
            "period": self.verdict.period,
        }


@dataclass(frozen=True, slots=True)
class Intervention:
    """What the harness should do now: nothing, nudge the model, or stop the run.

    Attributes:
        action: ``none``, ``nudge`` or ``stop``.
        message: for a nudge, text to put in the tool result; for a stop, the status to report.
        rule: what caused it (a verdict rule, ``step_limit`` or ``cost_limit``).
        step: 0-based index of the call after which it was decided (-1 for none).
        verdict: the verdict at that time, if any.
    """

    action: Action = "none"
    message: str = ""
    rule: str = RULE_NONE
    step: int = -1
    verdict: Verdict | None = None

    def __bool__(self) -> bool:
        return self.action != "none"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form used by ``otel-loopguard audit --json``."""
        return {"step": self.step, "action": self.action, "message": self.message, "rule": self.rule}

    def raise_if_stop(self) -> None:
        """Raise :class:`LoopStopped` when this intervention says stop.

        Raises:
            LoopStopped: the action is ``stop``.
        """
        if self.action == "stop":
            raise LoopStopped(self, self.message)


NO_INTERVENTION = Intervention()


class Observation(NamedTuple):
    """What one call (or one usage record) changed in a trace.

    An immutable named tuple rather than a frozen dataclass: one is built for every tool call on the
    application's thread, and a tuple costs less than half as much to build.

    Attributes:
        index: 0-based index of the call (-1 for a usage record).
        verdict: the verdict after it (``verdict.step`` may be earlier: the call at which it was reached).
        transition: the change of verdict kind it caused, if any.
        intervention: the nudge or stop it triggered, if any.
        signature_digest: keyed digest of the call's signature, when it caused a transition or intervention.
    """

    index: int  # type: ignore[assignment]  # a field named like tuple.index, which it hides
    verdict: Verdict
    transition: Transition | None = None
    intervention: Intervention | None = None
    signature_digest: str | None = None
