"""The values the engine consumes and produces: tool calls, verdicts, transitions, interventions.

Every value type is a frozen ``msgspec.Struct``, always built through its constructor (keyword or positional
arguments): building one costs less than a named tuple made with ``tuple.__new__`` or a frozen dataclass, and a
reordered field cannot silently corrupt a value. Types whose fields are scalars or other value types opt out of
the garbage collector (``gc=False``): no reference cycle can run through them.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

from ..errors import LoopStopped, ReviewPending

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
# A stuck trace back to working: its latest step brought evidence not seen in its window.
RULE_RECOVERED = "recovered"
RULE_STEP_LIMIT = "step_limit"
RULE_COST_LIMIT = "cost_limit"
#: One model output whose tail is a single chunk repeated (a degenerate, usually streamed, answer).
RULE_OUTPUT_REPETITION = "output_repetition"

# The kinds of step a trace is judged in: tool calls, hand-offs between agents, sub-agent invocations, model turns.
StepKind = Literal["tool", "handoff", "agent", "model"]
STEP_TOOL: StepKind = "tool"
STEP_HANDOFF: StepKind = "handoff"
STEP_AGENT: StepKind = "agent"
STEP_MODEL: StepKind = "model"
STEP_KINDS: tuple[StepKind, ...] = (STEP_TOOL, STEP_HANDOFF, STEP_AGENT, STEP_MODEL)

Action = Literal["none", "nudge", "review", "stop"]
#: The interventions in the ladder's order: a trace climbs them as its loop goes on.
INTERVENTIONS: tuple[str, ...] = ("nudge", "review", "stop")


class Lease(Struct, frozen=True, gc=False):
    """A declared wait on a dependency (an approval, a job): valid while it names an owner and its deadline is ahead."""

    owner: str
    deadline: float


class ToolCall(Struct, frozen=True):
    """One tool call as the engine sees it, whatever convention it was read from.

    Garbage-collected, unlike the other value types: ``arguments`` and ``result`` may be any object the
    application hands over, so a call can be part of a reference cycle.

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


class Verdict(Struct, frozen=True, gc=False):
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
        step_kind: the kind of the judged steps (``tool``, ``handoff``, ``agent`` or ``model``); ``step`` and
            ``cycle_start`` count steps of this kind only.
        agents: the agent names of the repeated cycle, in order of first appearance (agent and model steps).
        chunk_length: for ``output_repetition``, the repeated chunk's length in characters (``repetitions`` is
            its count); the chunk's text is never kept.
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
    step_kind: StepKind = "tool"
    agents: tuple[str, ...] = ()
    chunk_length: int | None = None


class Transition(Struct, frozen=True, gc=False):
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


class Intervention(Struct, frozen=True, gc=False):
    """What the harness should do now: nothing, nudge the model, or stop the run.

    Attributes:
        action: ``none``, ``nudge``, ``review`` or ``stop``.
        message: for a nudge, text to put in the tool result; for a review, what to show the reviewer; for a stop,
            the status to report.
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

    def raise_if_blocked(self) -> None:
        """Raise when the run may not go on: :class:`LoopStopped` for a stop, :class:`ReviewPending` for a review.

        Raises:
            LoopStopped: the action is ``stop``.
            ReviewPending: the action is ``review`` (a reviewer has not answered yet).
        """
        if self.action == "review":
            raise ReviewPending(self, self.message)
        self.raise_if_stop()


NO_INTERVENTION = Intervention()


class Observation(Struct, frozen=True, gc=False):
    """What one call (or one usage record) changed in a trace.

    Attributes:
        index: 0-based index of the call (-1 for a usage record).
        verdict: the verdict after it (``verdict.step`` may be earlier: the call at which it was reached).
        transition: the change of verdict kind it caused, if any.
        intervention: the nudge or stop it triggered, if any.
        signature_digest: keyed digest of the call's signature, when it caused a transition or intervention.
    """

    index: int
    verdict: Verdict
    transition: Transition | None = None
    intervention: Intervention | None = None
    signature_digest: str | None = None


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def trace_id_of(value: int | str) -> int:
    """A trace id as the int the SDK uses, from an int or from hex text as trace UIs show it (32 digits, or fewer
    when a UI dropped leading zeros; a ``0x`` prefix is allowed).

    Raises:
        ValueError: not an int in 0..2**128-1, nor 1 to 32 hex digits.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 1 << 128:
            return value
    elif isinstance(value, str):
        text = value.strip()
        text = text[2:] if text[:2].lower() == "0x" else text
        if 0 < len(text) <= 32 and _HEX_DIGITS.issuperset(text):
            return int(text, 16)
    raise ValueError(f"a trace id is an int or 32 hex digits, got {str(value)[:64]!r}")


class ReviewRequest(Struct, frozen=True, gc=False):
    """What a reviewer is handed when loopguard asks for a review: why, in machine-readable form, and no raw data.

    Attributes:
        trace_id: the trace, as 32 lower-case hex digits (what trace UIs show).
        rule: the rule that found the loop (``period`` or ``frequency``).
        period: the cycle length, when periodic.
        signature_digest: the keyed digest of the repeated call's signature.
        tool: the repeated tool (or the cycle's first).
        agent: the agent name, when known.
        calls: tool calls of the trace so far.
        cost_usd: the trace's model cost so far, None when some model call was not priced.
        message: the review's text.
    """

    trace_id: str
    rule: str
    period: int | None
    signature_digest: str | None
    tool: str | None
    agent: str | None
    calls: int
    cost_usd: float | None
    message: str

