"""A finished task's outcome: how a trace ended, and its figures, for the operations metrics.

One value per trace, made when the trace ends (the processor: its local root span ends; ``serve``: the trace is
finished). The outcome is one of four words, decided in this order so that each trace counts once:
``stopped`` (this guard stopped it: a loop, step or cost limit), ``error`` (error status or an exception event on
the agent or root span), ``refused`` (a model refused: finish reason ``content_filter`` or ``refusal``, or a
refusal in its output, see :func:`~otel_loopguard.conventions.model_calls.refused`), else ``success``.
A stop comes first because a stopped run usually ends with the error the harness raised for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct, field

__all__ = ["OUTCOMES", "TaskOutcome", "outcome_of"]

SUCCESS = "success"
ERROR = "error"
STOPPED = "stopped"
REFUSED = "refused"
#: Every outcome word, in the order they are decided.
OUTCOMES = (STOPPED, ERROR, REFUSED, SUCCESS)


def outcome_of(*, stopped: bool, error: bool, refused: bool) -> str:
    """The outcome word of a finished trace (see the module's docstring for the order)."""
    if stopped:
        return STOPPED
    if error:
        return ERROR
    return REFUSED if refused else SUCCESS


class TaskOutcome(Struct, frozen=True):
    """How one trace ended.

    Attributes:
        outcome: one of :data:`OUTCOMES`.
        agent: the agent's name (None when the trace named none); bounded by the emitter.
        turns: model calls of the trace (each counted once).
        tool_calls: tool calls judged in the trace.
        tool_errors: of those, the calls that failed (the tool error rate is their ratio).
        cost_usd: model cost when every model call was priced, else None (never recorded as $0).
        duration_s: seconds from the trace's first span start to its root's end (None when unknown).
        versions: version attributes (attribute name -> bounded value) the trace carries.
    """

    outcome: str
    agent: str | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    cost_usd: float | None = None
    duration_s: float | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
