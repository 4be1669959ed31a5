"""The traces of a serve instance: spans arrive in batches, in any order, any number of times, from many connections.

Each trace has one :class:`~otel_loopguard.core.judge.TraceJudge` (the judge of the processor, ``audit`` and
``report``) and its own lock; the table's lock covers only the maps and counters, so connections sending
different traces do not wait for each other's judging.

**Live judging.** A batch's tool and model steps are judged at once, in start order, so a verdict leaves as soon as
the span that causes it arrives. While every step arrives after the steps already judged (in start order), the live
judgement is exact: it is the one ``audit`` gives for the same spans.

**Re-judging rule.** A step that starts before one already judged (a late batch, a parallel call exported after a
later one), or an MCP client span whose enclosing tool span arrives after it, is judged at once all the same, in
arrival order, and the trace becomes *reordered*: its events carry ``loopguard.provisional = true`` from then on.
When the trace finishes (no span for ``idle`` seconds), a reordered trace is judged once more, exactly, in start
order, from its kept steps; the events of that judgement not sent before are sent then (not provisional), and
events sent before that it no longer produces are counted (``rejudged_events_retracted``). An out-of-order span
therefore costs what an in-order one costs (no re-judge on arrival), plus one re-judge of its trace at the finish.

**Idempotency.** A span id already received for a trace counts once (exporter and Collector retries are at least
once), also after the trace finished, while it is remembered (below): counted in ``duplicate_spans``.

**Finishing.** A trace with no span for ``idle`` seconds is judged once more at its last span's end (expired leases)
and its :class:`~otel_loopguard.core.judge.TraceReport` is published. Finished traces are remembered (at most
``max_traces``, least recently finished forgotten), so spans arriving later continue them (``late_spans``) and
their duplicates are recognised; a late batch of duplicates only does not publish the trace again.

**Memory.** At most ``max_traces`` open traces (beyond it the least recently active is finished early, counted as
evicted). Each trace keeps compact steps (argument and result text over ``max_argument_bytes`` replaced by a
digest) up to ``max_trace_bytes``, and all traces together up to ``max_kept_bytes`` (finished traces give theirs up
first, least recently active first); a trace whose steps are given up can no longer be re-judged: if it is or
becomes reordered, its report says ``partial`` (``inexact_traces`` counts them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.trace import SpanContext, TraceFlags

from ..conventions.span import SpanRecord
from ..conventions.traces import StepReader
from ..core.engine import LoopEngine
from ..core.judge import Judged, Step, TraceJudge, TraceReport
from ..core.store import EVICT_CAPACITY
from ..sdk.emit import VerdictEvent

SERVE_SOURCE = "serve"

#: Compact steps one trace keeps for re-judging, at most (estimated bytes).
DEFAULT_MAX_TRACE_BYTES = 8 << 20
#: Compact steps all traces keep together, at most (estimated bytes).
DEFAULT_MAX_KEPT_BYTES = 256 << 20

# Trace lifecycle (the table's lock guards it): open; being finished; finished and remembered; forgotten.
_OPEN, _FINISHING, _DONE, _GONE = "open", "finishing", "done", "gone"


@dataclass(frozen=True, slots=True)
class FinishedTrace:
    """A trace that was finished: its report and the figures for the final metrics.

    Attributes:
        report: what ``audit`` would print for the spans received so far.
        evicted: ``capacity`` when it was finished early to bound memory, else None.
        seen_usage: whether its cost is known: model usage was seen and every model had a price (the cost is
            recorded only then; unpriced usage is never recorded as $0).
        tracked: whether it had a tool or model span (only those count in the processor's metrics).
    """

    report: TraceReport
    evicted: str | None
    seen_usage: bool
    tracked: bool

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


_COUNTERS = ("spans", "tool_calls", "finished_traces", "evicted_traces", "late_spans", "rejudged_traces",
             "rejudged_events_retracted", "inexact_traces", "rejected_requests", "duplicate_spans",
             "reordered_traces")


class _Trace:
    __slots__ = ("changed", "judge", "kept", "last_seen", "last_step", "lock", "max_end_ns", "status", "trace_id",
                 "tracked")

    def __init__(self, trace_id: int, judge: TraceJudge) -> None:
        self.trace_id = trace_id
        self.judge = judge
        self.lock = threading.Lock()
        self.status = _OPEN
        self.max_end_ns = 0
        self.last_seen = 0.0
        self.last_step: Step | None = None
        # Bytes of kept steps as last accounted in the table's total.
        self.kept = 0
        self.tracked = False
        # Whether anything new arrived since the last finish (a batch of duplicates only is not news).
        self.changed = True


class TraceTable:
    """Open and recently finished traces of a serve instance, judged incrementally.

    Args:
        engine: the engine (and configuration) to judge with; ``max_traces`` bounds the open and the remembered
            finished traces.
        idle: seconds without a new span after which a trace is finished.
        max_spans_per_trace: kept for compatibility; the kept steps are bounded by bytes (``max_trace_bytes``).
        max_trace_bytes: compact steps one trace keeps for re-judging, at most (estimated bytes).
        max_kept_bytes: compact steps all traces keep together, at most (estimated bytes).

    Thread-safe: each trace has its own lock; the table's lock is held only for map and counter updates.
    """

    def __init__(self, engine: LoopEngine, idle: float, max_spans_per_trace: int | None = None, *,
                 max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES, max_kept_bytes: int = DEFAULT_MAX_KEPT_BYTES) -> None:
        self.engine = engine
        self.idle = idle
        self._max_open = engine.config.max_traces
        self._max_trace_bytes = max_trace_bytes
        self._max_kept = max_kept_bytes
        self._reader = StepReader(engine.config.max_argument_bytes)
        self._open: OrderedDict[int, _Trace] = OrderedDict()
        self._done: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()
        self._kept = 0
        # Traces that keep steps, the first to give them up first (finished ones, then least recently active).
        self._keeping: OrderedDict[int, _Trace] = OrderedDict()
        self._counts = dict.fromkeys(_COUNTERS, 0)

    # -- public ---------------------------------------------------------------

    def add(
        self, spans: Iterable[SpanRecord], now: float
    ) -> tuple[list[VerdictEvent], list[str], list[FinishedTrace], list[str]]:
        """Take one request's spans.

        Returns:
            (events to emit, tool names of newly judged calls, traces finished early to bound memory,
            current verdict kinds of traces that became tracked: new ones, or finished ones reopened by late spans).
        """
        # Reading the spans needs no lock.
        read = self._reader.step
        by_trace: dict[int, tuple[list[Step], list[int]]] = {}
        count = 0
        for span in spans:
            count += 1
            entry = by_trace.get(span.trace_id)
            if entry is None:
                entry = by_trace[span.trace_id] = ([], [0, 0])
            figures = entry[1]
            figures[0] += 1
            if span.end_ns > figures[1]:
                figures[1] = span.end_ns
            step = read(span)
            if step is not None:
                entry[0].append(step)
        events: list[VerdictEvent] = []
        tools: list[str] = []
        evicted: list[_Trace] = []
        started: list[str] = []
        counts = dict.fromkeys(_COUNTERS, 0)
        counts["spans"] = count
        for trace_id, (steps, (span_count, max_end_ns)) in by_trace.items():
            self._take(trace_id, steps, span_count, max_end_ns, now, events, tools, started, evicted, counts)
        finished = [done for trace in evicted if (done := self._finish(trace, EVICT_CAPACITY, events)) is not None]
        self._count(counts)
        self._trim_kept()
        return events, tools, finished, started

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

    # -- internals -------------------------------------------------------------

    def _take(self, trace_id: int, steps: list[Step], span_count: int, max_end_ns: int, now: float,
              events: list[VerdictEvent], tools: list[str], started: list[str], evicted: list[_Trace],
              counts: dict[str, int]) -> None:
        while True:
            with self._lock:
                trace = self._open.get(trace_id) or self._done.get(trace_id)
                if trace is None:
                    trace = _Trace(trace_id, TraceJudge(self.engine, track_events=True))
                    self._open[trace_id] = trace
                    self._evict_beyond_capacity(evicted)
            with trace.lock:
                with self._lock:
                    if trace.status is _GONE:
                        continue  # forgotten meanwhile: look again (a new trace)
                    reopened = trace.status is _DONE
                    if trace.status is not _OPEN:
                        # Finished (or being finished) while this batch was on its way: it goes on.
                        self._done.pop(trace_id, None)
                        trace.status = _OPEN
                        self._open[trace_id] = trace
                        self._evict_beyond_capacity(evicted)
                    else:
                        self._open.move_to_end(trace_id)
                    trace.last_seen = now
                    if trace_id in self._keeping:
                        self._keeping.move_to_end(trace_id)
                if reopened:
                    counts["late_spans"] += span_count
                delta = self._judge(trace, steps, max_end_ns, reopened, events, tools, started, counts)
                if delta:
                    with self._lock:
                        self._account(trace, delta)
            return

    def _judge(self, trace: _Trace, steps: list[Step], max_end_ns: int, reopened: bool, events: list[VerdictEvent],
               tools: list[str], started: list[str], counts: dict[str, int]) -> int:
        """Judge a batch of one trace (caller holds its lock); returns the change of its kept bytes."""
        judge = trace.judge
        news = False
        if max_end_ns > trace.max_end_ns:
            trace.max_end_ns = max_end_ns
            news = True
        added = 0
        for step in steps:
            if judge.add(step):
                added += 1
            else:
                counts["duplicate_spans"] += 1
        if added or news:
            trace.changed = True
            if reopened and trace.tracked:
                started.append(judge.verdict.kind)
        if not added:
            return 0
        was_reordered = judge.reordered
        judged: list[Step] = []
        told = judge.advance(judged=judged)
        if judge.reordered and not was_reordered:
            counts["reordered_traces"] += 1
        for step in judged:
            if step.call is not None:
                counts["tool_calls"] += 1
                tools.append(step.call.tool)
                trace.last_step = step
        for item in told:
            events.append(self._event(trace, item))
        if not trace.tracked and judged:
            trace.tracked = True
            started.append(judge.verdict.kind)
        if judge.kept_bytes > self._max_trace_bytes and judge.keeps_steps:
            judge.drop_steps()
            counts["inexact_traces"] += 1
        delta = judge.kept_bytes - trace.kept
        trace.kept = judge.kept_bytes
        return delta

    def _account(self, trace: _Trace, delta: int) -> None:
        # Caller holds the table's lock.
        self._kept += delta
        if trace.kept:
            self._keeping[trace.trace_id] = trace
            self._keeping.move_to_end(trace.trace_id)
        else:
            self._keeping.pop(trace.trace_id, None)

    def _evict_beyond_capacity(self, evicted: list[_Trace]) -> None:
        # Caller holds the table's lock.
        while len(self._open) > self._max_open:
            _, oldest = self._open.popitem(last=False)
            oldest.status = _FINISHING
            self._counts["evicted_traces"] += 1
            evicted.append(oldest)

    def _close(self, trace: _Trace) -> None:
        # Caller holds the table's lock: from open to being finished.
        del self._open[trace.trace_id]
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
                self._done[trace.trace_id] = trace
                while len(self._done) > self._max_open:
                    _, forgotten = self._done.popitem(last=False)
                    forgotten.status = _GONE
                    self._kept -= forgotten.kept
                    forgotten.kept = 0
                    self._keeping.pop(forgotten.trace_id, None)
                if trace.trace_id in self._keeping:
                    # A finished trace gives its kept steps up first when memory runs short. (A trace being given
                    # up by _trim_kept is out of this map already, with its bytes still counted until then.)
                    self._keeping.move_to_end(trace.trace_id, last=False)
            judge = trace.judge
            if not trace.changed:
                return None  # nothing new since the last finish (a late batch of duplicates)
            trace.changed = False
            rejudged, retracted = judge.rejudged, judge.retracted
            told = judge.finish(trace.max_end_ns * 1e-9 if trace.max_end_ns else None)
            for judged in told:
                events.append(self._event(trace, judged))
            report = judge.report(SERVE_SOURCE, f"{trace.trace_id:032x}")
            cost = report.cost
            known_cost = judge.seen_usage and cost is not None and not cost.unpriced_tokens
            counts = dict.fromkeys(_COUNTERS, 0)
            counts["finished_traces"] = 1
            counts["rejudged_traces"] = judge.rejudged - rejudged
            counts["rejudged_events_retracted"] = judge.retracted - retracted
            self._count(counts)
            return FinishedTrace(report, evicted, known_cost, trace.tracked)

    def _event(self, trace: _Trace, judged: Judged) -> VerdictEvent:
        step = judged.step
        if step is None:
            # A re-evaluation at the finish: attributed to the trace's last call.
            step = trace.last_step
            tool = None
        else:
            tool = step.call.tool if step.call is not None else None
        context = None
        if step is not None:
            context = SpanContext(trace.trace_id, step.span_id, is_remote=True,
                                  trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return VerdictEvent(
            trace_id=trace.trace_id,
            span_context=context,
            verdict=judged.observation.verdict,
            transition=judged.observation.transition,
            intervention=judged.observation.intervention,
            tool=tool,
            agent=step.agent if step is not None else None,
            conversation=step.conversation if step is not None else None,
            signature_digest=judged.observation.signature_digest,
            steps=judged.steps,
            timestamp_ns=step.end_ns if step is not None else (trace.max_end_ns or None),
            provisional=judged.provisional,
        )

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
