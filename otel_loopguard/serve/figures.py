"""What a serve instance tells about its traces: a finished trace's figures for the metrics
(:class:`FinishedTrace`), its counters (:class:`ServeStats`) and an open trace as the status page shows it
(:class:`HeldTrace`). Frozen values: they leave the table's locks and cross to the event loop and the status page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..conventions.unread import Unread
from ..core.judge import TraceReport
from ..core.outcome import TaskOutcome

__all__ = ["FinishedTrace", "HeldTrace", "ServeStats"]


@dataclass(frozen=True, slots=True)
class FinishedTrace:
    """A trace that was finished: its report and the figures for the final metrics.

    Attributes:
        report: what ``audit`` would print for the spans received so far.
        evicted: ``capacity`` when it was finished early to bound memory, else None.
        seen_usage: whether its cost is known: model usage was seen and every model had a price (the cost is
            recorded only then; unpriced usage is never recorded as $0).
        tracked: whether it had a tool or model span (only those count in the processor's metrics).
        unread: why some of its spans could not be read as tool calls (also on the report).
        peers: the senders (hosts) its spans came from, at most the assembler's ``MAX_PEERS`` (where a warning
            about it goes).
        agents: (agent name or None, tool calls) of each agent span first seen since the last finish (the
            ``gen_ai.invoke_agent.tool_calls`` histogram): the calls are those it was the innermost agent of.
    """

    report: TraceReport
    evicted: str | None
    seen_usage: bool
    tracked: bool
    unread: tuple[Unread, ...] = ()
    peers: tuple[str, ...] = ()
    agents: tuple[tuple[str | None, int], ...] = ()
    #: The tenant that sent it ("" without tenants).
    tenant: str = ""
    #: How the task ended and its figures (the ``loopguard.task.*`` metrics).
    task: TaskOutcome | None = None

    @property
    def cost_usd(self) -> float | None:
        """The cost to record for the trace, or None when unknown (no usage, or some of it unpriced)."""
        cost = self.report.cost
        return cost.usd if self.seen_usage and cost is not None else None


@dataclass(frozen=True, slots=True)
class ServeStats:
    """Counters of a serve instance (a snapshot).

    Attributes:
        spans: spans received.
        tool_calls: tool calls judged (each call once).
        open_traces: traces open now.
        finished_traces: traces finished so far (including evicted ones).
        evicted_traces: traces finished early because ``max_traces`` were open.
        late_spans: spans that arrived for an already finished trace.
        rejudged_traces: times a reordered trace was judged again, exactly, when it finished.
        rejudged_events_retracted: events sent earlier that a later exact judgement no longer produced.
        inexact_traces: traces whose kept steps were given up to stay within the memory budgets.
        rejected_requests: requests refused as malformed, oversized or of the wrong type.
        duplicate_spans: tool and model spans received again for a trace that already had them (counted once).
        reordered_traces: times a trace received a step out of start order (its events became provisional).
        kept_bytes: estimated bytes of the steps kept for re-judging now.
    """

    spans: int
    tool_calls: int
    open_traces: int
    finished_traces: int
    evicted_traces: int
    late_spans: int
    rejudged_traces: int
    rejudged_events_retracted: int
    inexact_traces: int
    rejected_requests: int
    duplicate_spans: int = 0
    reordered_traces: int = 0
    kept_bytes: int = 0


@dataclass(frozen=True, slots=True)
class HeldTrace:
    """An open trace as the status page shows it: verdict now, tool calls judged, cost when known, agent, the
    tenant that sent it ("" without tenants), and the kind of step its verdict is about."""

    trace_id: int
    verdict: str
    tool_calls: int
    cost_usd: float | None
    agent: str | None
    tenant: str = ""
    step_kind: str = "tool"
