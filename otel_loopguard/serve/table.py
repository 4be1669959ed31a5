"""The traces of a serve instance as its server counts and shows them: a thin adapter over the assembler.

Grouping received spans by trace, judging each batch, and the traces' lifecycle (open, being finished, finished and
remembered, reopened by late spans, evicted beyond ``max_traces``, finished when idle) and kept-bytes budget are the
assembler's (:class:`~otel_loopguard.conventions.received_traces.ReceivedTraces`). The table adds what only a server
has: its counters, the finished traces for the metrics and the status page's open traces (the values of
:mod:`.figures`). The rules in full: docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..conventions.received import TraceFinish
from ..conventions.received_traces import HeldReceived, ReceivedTraces
from ..conventions.span import SpanRecord
from ..conventions.unread import Unread
from ..conventions.verdicts import VerdictEvent
from ..core.engine import LoopEngine
from ..core.store import EVICT_CAPACITY
from .figures import FinishedTrace, HeldTrace, ServeStats

SERVE_SOURCE = "serve"

#: Compact steps one trace keeps for re-judging, at most (estimated bytes).
DEFAULT_MAX_TRACE_BYTES = 8 << 20
#: Compact steps all traces keep together, at most (estimated bytes).
DEFAULT_MAX_KEPT_BYTES = 256 << 20

_COUNTERS = ("spans", "tool_calls", "finished_traces", "evicted_traces", "late_spans", "rejudged_traces",
             "rejudged_events_retracted", "inexact_traces", "rejected_requests", "duplicate_spans",
             "reordered_traces")


class TraceTable:
    """Open and recently finished traces of a serve instance, judged incrementally, and the server's counters.

    Args:
        engine: the engine (and configuration) to judge with; ``max_traces`` bounds the open and the remembered
            finished traces.
        idle: seconds without a new span after which a trace is finished.
        max_trace_bytes: compact steps one trace keeps for re-judging, at most (estimated bytes).
        max_kept_bytes: compact steps all traces keep together, at most (estimated bytes).

    Thread-safe: the traces lock as :class:`ReceivedTraces` says; the counters' lock is the innermost (nothing is
    taken while it is held), so counting under a trace's lock cannot deadlock.
    """

    def __init__(self, engine: LoopEngine, idle: float, *,
                 max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES, max_kept_bytes: int = DEFAULT_MAX_KEPT_BYTES) -> None:
        self.engine = engine
        self.idle = idle
        self._traces = ReceivedTraces(engine, max_trace_bytes, max_kept_bytes)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNTERS, 0)

    @property
    def step_audit(self) -> bool:
        """Whether finished traces' reports carry the exact run audit (``ok``, ``violations``): only a report
        listener reads them (the metrics do not), so :class:`Server` turns it on with the first one. It applies to
        traces opened from then on."""
        return self._traces.step_audit

    @step_audit.setter
    def step_audit(self, value: bool) -> None:
        self._traces.step_audit = value

    def add(
        self, spans: Iterable[SpanRecord], now: float, unread: list[Unread] | None = None, peer: str = "",
        tenant: str = "",
    ) -> tuple[list[VerdictEvent], list[str], list[FinishedTrace], list[str]]:
        """Take one request's spans.

        Args:
            spans: the request's spans.
            now: the arrival time.
            unread: when given, the causes of unread input among the request's spans are appended to it (one per
                reason, over all its traces): tool spans with content in attributes no convention reads. (That a
                trace has no readable tool call is known only when it finishes: see :attr:`FinishedTrace.unread`.)
            peer: the sender (its host), remembered per trace (:attr:`FinishedTrace.peers`).
            tenant: the tenant the request authenticated as ("": no tenants); traces of different tenants with
                the same trace id are different traces.

        Returns:
            (events to emit, tool names of newly judged calls, traces finished early to bound memory,
            current verdict kinds of traces that became tracked: new ones, or finished ones reopened by late spans).
        """
        counts = dict.fromkeys(_COUNTERS, 0)
        told, evicted = self._traces.take(spans, now, counts, peer, tenant)
        counts["duplicate_spans"] += told.duplicates
        counts["tool_calls"] += told.tool_calls
        counts["reordered_traces"] += told.reordered
        events = told.events
        finished = self._finish(evicted, EVICT_CAPACITY, events)
        self._count(counts)
        if unread is not None and told.unread:
            unread.extend(told.merged_unread())
        return events, told.tools, finished, told.started

    def finish_idle(self, now: float) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every trace with no span for ``idle`` seconds."""
        events: list[VerdictEvent] = []
        return events, self._finish(self._traces.pop_idle(now - self.idle), None, events)

    def finish_all(self) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every open trace now (drain on shutdown)."""
        events: list[VerdictEvent] = []
        return events, self._finish(self._traces.pop_all(), None, events)

    def reject(self) -> None:
        """Count one refused request."""
        self._count({"rejected_requests": 1})

    def stats(self) -> ServeStats:
        """A snapshot of the counters."""
        open_traces, kept = len(self._traces), self._traces.kept_bytes
        with self._lock:
            return ServeStats(open_traces=open_traces, kept_bytes=kept, **self._counts)

    def held(self, limit: int) -> list[HeldTrace]:
        """The ``limit`` most recently active open traces, oldest first (for the status page)."""
        return self._traces.recent(limit, _held)

    def _finish(self, due: list[HeldReceived], evicted: str | None,
                events: list[VerdictEvent]) -> list[FinishedTrace]:
        """Finish traces being finished (``evicted``: why early), count them, then trim the kept steps."""

        def made(trace: HeldReceived, done: TraceFinish) -> FinishedTrace:
            events.extend(done.events)
            self._count({"finished_traces": 1, "rejudged_traces": done.rejudged,
                         "rejudged_events_retracted": done.retracted})
            return FinishedTrace(done.report, evicted, done.known_cost, trace.tracked, done.unread,
                                 tuple(trace.peers or ()), done.agents, trace.tenant, done.task)

        finished = [done for trace in due if (done := self._traces.finish(trace, SERVE_SOURCE, made)) is not None]
        self._count({"inexact_traces": self._traces.trim_kept()})
        return finished

    def _count(self, counts: dict[str, int]) -> None:
        with self._lock:
            mine = self._counts
            for name, value in counts.items():
                if value:
                    mine[name] += value


def _held(trace: HeldReceived) -> HeldTrace:
    """An open trace as the status page shows it (caller holds its lock)."""
    judge = trace.judge
    verdict = judge.verdict
    return HeldTrace(trace.trace_id, verdict.kind, judge.steps, judge.known_cost, trace.context[0], trace.tenant,
                     verdict.step_kind)
