"""The traces of a serve instance: spans arrive in batches, in any order, any number of times, from many connections.

Each trace has one :class:`~otel_loopguard.core.judge.TraceJudge` and its own lock; the table's lock covers only the
maps and counters. Judging a trace's batches and its finish is the received record's
(:class:`~otel_loopguard.conventions.received.ReceivedTrace`); the table keeps the lifecycle, memory and counters.
A batch is judged at once; a trace that received a step out of start order is *reordered* (its events provisional)
and is judged again, exactly, when it finishes (no span for ``idle`` seconds). Memory is bounded by ``max_traces``,
``max_trace_bytes`` and ``max_kept_bytes``. The rules in full: docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..conventions.nesting import CONVENTION_NESTING
from ..conventions.received import ReceivedTrace, RequestReader, RequestTold, SpanBatch
from ..conventions.span import SpanRecord
from ..conventions.unread import MAX_KEYS, Unread
from ..conventions.verdicts import VerdictEvent
from ..core.engine import LoopEngine
from ..core.judge import TraceJudge, TraceReport
from ..core.outcome import TaskOutcome
from ..core.store import EVICT_CAPACITY

SERVE_SOURCE = "serve"

#: Compact steps one trace keeps for re-judging, at most (estimated bytes).
DEFAULT_MAX_TRACE_BYTES = 8 << 20
#: Compact steps all traces keep together, at most (estimated bytes).
DEFAULT_MAX_KEPT_BYTES = 256 << 20

# Trace lifecycle (the table's lock guards it): open; being finished; finished and remembered; forgotten.
_OPEN, _FINISHING, _DONE, _GONE = "open", "finishing", "done", "gone"

#: Senders remembered per trace, at most.
MAX_PEERS = 8


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
        peers: the senders (hosts) its spans came from, at most :data:`MAX_PEERS` (where a warning about it goes).
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


_COUNTERS = ("spans", "tool_calls", "finished_traces", "evicted_traces", "late_spans", "rejudged_traces",
             "rejudged_events_retracted", "inexact_traces", "rejected_requests", "duplicate_spans",
             "reordered_traces")


def _merged(notes: list[Unread]) -> list[Unread]:
    """One cause per reason over a request's traces: the keys seen (bounded), the spans summed."""
    by_reason: dict[str, tuple[set[str], int]] = {}
    for note in notes:
        keys, spans = by_reason.get(note.reason, (set(), 0))
        keys.update(note.keys)
        by_reason[note.reason] = (keys, spans + note.spans)
    return [Unread(reason, tuple(sorted(keys))[:MAX_KEYS], spans) for reason, (keys, spans) in by_reason.items()]


class _Trace(ReceivedTrace):
    """Everything the table keeps about one trace: the received record (:class:`~..conventions.received.ReceivedTrace`),
    plus its lock, its place in the table's lifecycle, its kept bytes and its senders."""

    __slots__ = ("kept", "key", "last_seen", "lock", "peers", "status")

    def __init__(self, trace_id: int, judge: TraceJudge, tenant: str = "") -> None:
        super().__init__(trace_id, judge, tenant)
        # The table's key is (tenant, trace id) when tokens name tenants.
        self.key: Any = (tenant, trace_id) if tenant else trace_id
        self.lock = threading.Lock()
        self.status = _OPEN
        self.last_seen = 0.0
        # Bytes of kept steps as last accounted in the table's total.
        self.kept = 0
        self.peers: list[str] | None = None


class TraceTable:
    """Open and recently finished traces of a serve instance, judged incrementally.

    Args:
        engine: the engine (and configuration) to judge with; ``max_traces`` bounds the open and the remembered
            finished traces.
        idle: seconds without a new span after which a trace is finished.
        max_trace_bytes: compact steps one trace keeps for re-judging, at most (estimated bytes).
        max_kept_bytes: compact steps all traces keep together, at most (estimated bytes).

    Thread-safe: each trace has its own lock; the table's lock is held only for map and counter updates.
    """

    def __init__(self, engine: LoopEngine, idle: float, *,
                 max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES, max_kept_bytes: int = DEFAULT_MAX_KEPT_BYTES) -> None:
        self.engine = engine
        self.idle = idle
        self._max_open = engine.config.max_traces
        self._max_trace_bytes = max_trace_bytes
        self._max_kept = max_kept_bytes
        # The configuration's redaction placeholders, user-defined conventions and version keys apply.
        self._reader = RequestReader(engine.config)
        self._extractor = self._reader.extractor
        #: Whether finished traces' reports carry the exact run audit (``ok``, ``violations``): only a report
        #: listener reads them (the metrics do not), so :class:`Server` turns it on with the first one. It applies to
        #: traces opened from then on.
        self.step_audit = False
        self._open: OrderedDict[int, _Trace] = OrderedDict()
        self._done: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()
        self._kept = 0
        # Traces that keep steps, the first to give them up first (finished ones, then least recently active).
        self._keeping: OrderedDict[int, _Trace] = OrderedDict()
        self._counts = dict.fromkeys(_COUNTERS, 0)

    # -- public ---------------------------------------------------------------

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
        by_trace: dict[int, SpanBatch] = {}
        count = 0
        sort = self._reader.sort
        for span in spans:
            count += 1
            batch = by_trace.get(span.trace_id)
            if batch is None:
                batch = by_trace[span.trace_id] = SpanBatch()
            sort(batch, span)
        told = RequestTold()
        evicted: list[_Trace] = []
        counts = dict.fromkeys(_COUNTERS, 0)
        counts["spans"] = count
        for trace_id, batch in by_trace.items():
            self._take(trace_id, batch, now, evicted, counts, told, peer, tenant)
        counts["duplicate_spans"] += told.duplicates
        counts["tool_calls"] += told.tool_calls
        counts["reordered_traces"] += told.reordered
        events = told.events
        finished = [done for trace in evicted if (done := self._finish(trace, EVICT_CAPACITY, events)) is not None]
        self._count(counts)
        self._trim_kept()
        if unread is not None and told.unread:
            unread.extend(_merged(told.unread))
        return events, told.tools, finished, told.started

    def finish_idle(self, now: float) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every trace with no span for ``idle`` seconds."""
        horizon = now - self.idle
        due: list[_Trace] = []
        with self._lock:
            # Ordered by last activity, so the idle ones are at the front.
            while self._open:
                trace = next(iter(self._open.values()))
                if trace.last_seen > horizon:
                    break
                self._close(trace)
                due.append(trace)
        return self._finish_all(due)

    def finish_all(self) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every open trace now (drain on shutdown)."""
        with self._lock:
            due = list(self._open.values())
            for trace in due:
                self._close(trace)
        return self._finish_all(due)

    def reject(self) -> None:
        """Count one refused request."""
        with self._lock:
            self._counts["rejected_requests"] += 1

    def stats(self) -> ServeStats:
        """A snapshot of the counters."""
        with self._lock:
            return ServeStats(open_traces=len(self._open), kept_bytes=self._kept, **self._counts)

    def held(self, limit: int) -> list[HeldTrace]:
        """The ``limit`` most recently active open traces, oldest first (for the status page)."""
        with self._lock:
            traces = list(self._open.values())[-limit:]
        held = []
        for trace in traces:
            with trace.lock:  # the judge builds its state on first use: never from two threads at once
                judge = trace.judge
                cost = judge.cost if judge.seen_usage else None
                verdict = judge.verdict
                held.append(HeldTrace(trace.trace_id, verdict.kind, judge.steps,
                                      cost.usd if cost is not None and not cost.unpriced_tokens else None,
                                      trace.context[0], trace.tenant, verdict.step_kind))
        return held

    # -- internals -------------------------------------------------------------

    def _take(self, trace_id: int, batch: SpanBatch, now: float, evicted: list[_Trace], counts: dict[str, int],
              told: RequestTold, peer: str, tenant: str = "") -> None:
        """Find or open the batch's trace (reopening a finished one), note its sender and judge the batch."""
        key: Any = (tenant, trace_id) if tenant else trace_id
        while True:
            with self._lock:
                trace = self._open.get(key) or self._done.get(key)
                if trace is None:
                    trace = _Trace(trace_id, TraceJudge(self.engine, nesting=CONVENTION_NESTING, track_events=True,
                                                        step_audit=self.step_audit), tenant)
                    self._open[key] = trace
                    self._evict_beyond_capacity(evicted)
            with trace.lock:
                with self._lock:
                    if trace.status is _GONE:
                        continue  # forgotten meanwhile: look again (a new trace)
                    reopened = trace.status is _DONE
                    if trace.status is not _OPEN:
                        # Finished (or being finished) while this batch was on its way: it goes on.
                        self._done.pop(key, None)
                        trace.status = _OPEN
                        self._open[key] = trace
                        self._evict_beyond_capacity(evicted)
                    else:
                        self._open.move_to_end(key)
                    trace.last_seen = now
                    if key in self._keeping:
                        self._keeping.move_to_end(key)
                if reopened:
                    counts["late_spans"] += batch.spans
                peers = trace.peers
                if peers is None:
                    trace.peers = [peer]
                elif peer not in peers and len(peers) < MAX_PEERS:
                    peers.append(peer)
                self._judge(trace, batch, reopened, counts, told)
                return

    def _judge(self, trace: _Trace, batch: SpanBatch, reopened: bool, counts: dict[str, int],
               told: RequestTold) -> None:
        """Judge a batch of one trace (caller holds its lock), then bound the steps it keeps and account their
        bytes."""
        if trace.take(batch, reopened, self._extractor, told):
            judge = trace.judge
            if judge.kept_bytes > self._max_trace_bytes and judge.keeps_steps:
                judge.drop_steps()
                counts["inexact_traces"] += 1
            delta = judge.kept_bytes - trace.kept
            trace.kept = judge.kept_bytes
            if delta:
                with self._lock:
                    self._account(trace, delta)

    def _account(self, trace: _Trace, delta: int) -> None:
        # Caller holds the table's lock.
        self._kept += delta
        if trace.kept:
            self._keeping[trace.key] = trace
            self._keeping.move_to_end(trace.key)
        else:
            self._keeping.pop(trace.key, None)

    def _evict_beyond_capacity(self, evicted: list[_Trace]) -> None:
        # Caller holds the table's lock.
        while len(self._open) > self._max_open:
            _, oldest = self._open.popitem(last=False)
            oldest.status = _FINISHING
            self._counts["evicted_traces"] += 1
            evicted.append(oldest)

    def _close(self, trace: _Trace) -> None:
        # Caller holds the table's lock: from open to being finished.
        del self._open[trace.key]
        trace.status = _FINISHING

    def _finish_all(self, due: list[_Trace]) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        events: list[VerdictEvent] = []
        finished = [done for trace in due if (done := self._finish(trace, None, events)) is not None]
        self._trim_kept()
        return events, finished

    def _finish(self, trace: _Trace, evicted: str | None, events: list[VerdictEvent]) -> FinishedTrace | None:
        with trace.lock:
            with self._lock:
                if trace.status is not _FINISHING:
                    return None  # a batch reopened it meanwhile: it goes on
                trace.status = _DONE
                self._done[trace.key] = trace
                while len(self._done) > self._max_open:
                    _, forgotten = self._done.popitem(last=False)
                    forgotten.status = _GONE
                    self._kept -= forgotten.kept
                    forgotten.kept = 0
                    self._keeping.pop(forgotten.key, None)
                if trace.key in self._keeping:
                    # A finished trace gives its kept steps up first when memory runs short. (A trace being given
                    # up by _trim_kept is out of this map already, with its bytes still counted until then.)
                    self._keeping.move_to_end(trace.key, last=False)
            done = trace.finish(SERVE_SOURCE, self._extractor)
            if done is None:
                return None  # nothing new since the last finish (a late batch of duplicates)
            events += done.events
            counts = dict.fromkeys(_COUNTERS, 0)
            counts["finished_traces"] = 1
            counts["rejudged_traces"] = done.rejudged
            counts["rejudged_events_retracted"] = done.retracted
            self._count(counts)
            return FinishedTrace(done.report, evicted, done.known_cost, trace.tracked, done.unread,
                                 tuple(trace.peers or ()), done.agents, trace.tenant, done.task)

    def _count(self, counts: dict[str, int]) -> None:
        with self._lock:
            mine = self._counts
            for name, value in counts.items():
                if value:
                    mine[name] += value

    def _trim_kept(self) -> None:
        """Give up kept steps beyond ``max_kept_bytes``: finished traces first, then the least recently active."""
        while True:
            with self._lock:
                if self._kept <= self._max_kept or not self._keeping:
                    return
                _, trace = self._keeping.popitem(last=False)
            with trace.lock:
                freed = trace.judge.drop_steps() if trace.judge.keeps_steps else 0
                with self._lock:
                    self._kept -= trace.kept
                    trace.kept = 0
                    if freed:
                        self._counts["inexact_traces"] += 1
