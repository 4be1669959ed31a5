"""The traces of a serve instance: spans arrive in batches, in any order, any number of times, from many connections.

Each trace has one :class:`~otel_loopguard.core.judge.TraceJudge` and its own lock; the table's lock covers only the
maps and counters. A batch is judged at once; a trace that received a step out of start order is *reordered* (its
events provisional) and is judged again, exactly, when it finishes (no span for ``idle`` seconds). Memory is bounded
by ``max_traces``, ``max_trace_bytes`` and ``max_kept_bytes``. The rules in full: docs/architecture.md.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..conventions.agent_steps import ORIGIN_LANE_SPAN
from ..conventions.assembly import TURN_ORDER, TurnLog
from ..conventions.extract import ROLE_AGENT, ROLE_LLM, conversation_id
from ..conventions.intake import SpanTrace, StepReader
from ..conventions.model_calls import ORIGIN_DERIVED, Turn
from ..conventions.nesting import CONVENTION_NESTING
from ..conventions.span import SpanRecord
from ..conventions.unread import MAX_KEYS, UNKNOWN_ATTRIBUTES, Unread, UnreadTrace, structure_span
from ..conventions.verdicts import RECEIVED, VerdictEvent, verdict_event
from ..conventions.versions import VersionReader, Versions, version_keys
from ..core.engine import LoopEngine
from ..core.judge import Judged, Step, TraceJudge, TraceReport
from ..core.model import STEP_HANDOFF, STEP_TOOL, WORKING
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


class _Batch:
    """One request's spans of one trace, read without a lock."""

    __slots__ = ("agents", "by_id", "max_end_ns", "models", "others", "roots", "spans", "steps", "versions")

    def __init__(self) -> None:
        self.spans = 0
        self.max_end_ns = 0
        # (tool or usage step, its span); model spans (read under the trace's lock: whether their messages are
        # needed depends on the trace); agent spans (for the unread note).
        self.steps: list[tuple[Step, SpanRecord]] = []
        self.models: list[SpanRecord] = []
        self.agents: list[SpanRecord] = []
        # Spans of an agent framework's structure that are no tool, model or agent span (for the unread note).
        self.others: list[SpanRecord] = []
        # Root spans (for the task outcome: error status, duration, version attributes).
        self.roots: list[SpanRecord] = []
        # (versions, start, span id) of the spans that carry any (conventions/versions.py).
        self.versions: list[tuple[Versions, int, int]] = []
        self.by_id: dict[int, SpanRecord] | None = None

    def note_versions(self, span: SpanRecord, read: VersionReader) -> None:
        """Keep the versions the span carries, if any (noted on the trace under its lock)."""
        found = read(span.attributes, span.resource)
        if found:
            self.versions.append((found, span.start_ns, span.span_id))

    def span(self, span_id: int) -> SpanRecord | None:
        """The batch's tool span of this id (looked up only when an event is made)."""
        by_id = self.by_id
        if by_id is None:
            by_id = self.by_id = {step.span_id: span for step, span in self.steps}
        return by_id.get(span_id)


class _Trace(SpanTrace):
    """Everything the table keeps about one trace: the shared record, plus its judge, its lock, its place in the
    table's lifecycle and its senders."""

    __slots__ = (
        "changed",
        "context",
        "judge",
        "kept",
        "key",
        "last_seen",
        "last_step",
        "lock",
        "max_end_ns",
        "peers",
        "status",
        "tenant",
        "trace_id",
        "tracked",
    )

    def __init__(self, trace_id: int, judge: TraceJudge, tenant: str = "") -> None:
        super().__init__()
        self.trace_id = trace_id
        #: Who sent it, when tokens name tenants ("" otherwise); the table's key is (tenant, trace id) then.
        self.tenant = tenant
        self.key: Any = (tenant, trace_id) if tenant else trace_id
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
        self.peers: list[str] | None = None
        # (agent, conversation) the last tool span an event was made for names (read from the span then).
        self.context: tuple[str | None, str | None] = (None, None)


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
        # The configuration's redaction placeholders and user-defined conventions apply.
        # The agent and conversation of a step are read only when an event is made (_event), not for every span.
        self._reader = StepReader(config=engine.config, context=False)
        # Shared by the receiving threads: it swaps its cached (resource, versions) pair whole, so a race only
        # reads a resource again.
        self._read_versions = VersionReader(version_keys(engine.config))
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
        by_trace: dict[int, _Batch] = {}
        count = 0
        for span in spans:
            count += 1
            batch = by_trace.get(span.trace_id)
            if batch is None:
                batch = by_trace[span.trace_id] = _Batch()
            self._sort(batch, span)
        events: list[VerdictEvent] = []
        tools: list[str] = []
        evicted: list[_Trace] = []
        started: list[str] = []
        notes: list[Unread] = []
        counts = dict.fromkeys(_COUNTERS, 0)
        counts["spans"] = count
        for trace_id, batch in by_trace.items():
            self._take(trace_id, batch, now, events, tools, started, evicted, counts, notes, peer, tenant)
        finished = [done for trace in evicted if (done := self._finish(trace, EVICT_CAPACITY, events)) is not None]
        self._count(counts)
        self._trim_kept()
        if unread is not None and notes:
            unread.extend(_merged(notes))
        return events, tools, finished, started

    def _sort(self, batch: _Batch, span: SpanRecord) -> None:
        """Put one span of a request into its trace's batch, classified once: the role, and for a tool span the
        convention row that reads it."""
        batch.spans += 1
        if span.end_ns > batch.max_end_ns:
            batch.max_end_ns = span.end_ns
        role, row = self._reader.extractor.read_role(span.attributes, span.name)
        if span.parent_span_id is None:
            batch.roots.append(span)
        batch.note_versions(span, self._read_versions)
        if role == ROLE_LLM:
            batch.models.append(span)
        elif role == ROLE_AGENT:
            batch.agents.append(span)
        else:
            step = self._reader.span_step(span, role, row)
            if step is not None:
                batch.steps.append((step, span))
            elif role is None and structure_span(span.attributes):  # for the unread note
                batch.others.append(span)

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

    def _take(self, trace_id: int, batch: _Batch, now: float, events: list[VerdictEvent], tools: list[str],
              started: list[str], evicted: list[_Trace], counts: dict[str, int], notes: list[Unread],
              peer: str, tenant: str = "") -> None:
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
                delta = self._judge(trace, batch, reopened, events, tools, started, counts, notes)
                if delta:
                    with self._lock:
                        self._account(trace, delta)
            return

    def _judge(self, trace: _Trace, batch: _Batch, reopened: bool, events: list[VerdictEvent], tools: list[str],
               started: list[str], counts: dict[str, int], notes: list[Unread]) -> int:
        """Judge a batch of one trace (caller holds its lock); returns the change of its kept bytes."""
        judge = trace.judge
        news = False
        if batch.max_end_ns > trace.max_end_ns:
            trace.max_end_ns = batch.max_end_ns
            news = True
        if batch.steps and not trace.has_tools and any(step.call is not None and step.origin != ORIGIN_LANE_SPAN
                                                       for step, _ in batch.steps):
            news |= self._tools_seen(trace)
        if batch.agents:
            news |= self._note_agents(trace, batch)
        for span in batch.others:  # an agent framework's CHAIN/task spans: for the unread note
            trace.other_read(span, None)
        for root in batch.roots:  # for the task outcome: error status, duration
            trace.root_read(root)
        for found, start_ns, span_id in batch.versions:
            trace.versions.note(found, start_ns, span_id)
        added = self._add_steps(trace, batch, counts, notes)
        if batch.models:
            added += self._turns(trace, trace.turns_now(), batch.models, reopened, trace.unread_now(), counts,
                                 any(step.kind == STEP_HANDOFF for step, _ in batch.steps))
        if added or news:
            trace.changed = True
            if reopened and trace.tracked:
                started.append(judge.verdict.kind)
        if not added:
            return 0
        self._advance(trace, batch, events, tools, started, counts)
        if judge.kept_bytes > self._max_trace_bytes and judge.keeps_steps:
            judge.drop_steps()
            counts["inexact_traces"] += 1
        delta = judge.kept_bytes - trace.kept
        trace.kept = judge.kept_bytes
        return delta

    def _tools_seen(self, trace: _Trace) -> bool:
        """The trace's calls are read from its tool spans from now on: none is derived from its model spans (those
        derived before are dropped; the trace is judged again without them at the finish). Returns whether any was."""
        if trace.tools_seen() is None:
            return False
        if trace.judge.discard(ORIGIN_DERIVED):
            trace.unread_now().set_derived(0)
            return True
        return False

    def _note_agents(self, trace: _Trace, batch: _Batch) -> bool:
        """Read the batch's agent spans not seen before (each once, :meth:`SpanTrace.agent_span`), adding the
        sub-agent steps they complete to the batch's steps; returns whether there was one."""
        extractor = self._reader.extractor
        news = False
        for span in batch.agents:
            steps = trace.agent_span(span, extractor)
            if steps is not None:
                batch.steps.extend((step, span) for step in steps)
                news = True
        return news

    def _add_steps(self, trace: _Trace, batch: _Batch, counts: dict[str, int], notes: list[Unread]) -> int:
        """Add the batch's tool steps to the judge, noting unread content; returns how many were new."""
        # What this batch could not read (its unknown-attribute causes go in the answer); the rest is noted on the
        # trace directly.
        seen: UnreadTrace | None = None
        extractor = self._reader.extractor
        add = trace.judge.add
        added = 0
        for step, span in batch.steps:
            if add(step):
                added += 1
                seen = trace.tool_read(step, span, extractor, seen)
        # Counted per batch: a step not added was a duplicate.
        counts["duplicate_spans"] += len(batch.steps) - added
        if seen is not None:
            trace.unread_now().merge(seen)
            # Known from the span alone. (No readable tool call is known only at the finish: spans of a trace
            # arrive in any order, its root first as well as last.)
            notes += [cause for cause in seen.causes() if cause.reason == UNKNOWN_ATTRIBUTES]
        return added

    def _advance(self, trace: _Trace, batch: _Batch, events: list[VerdictEvent], tools: list[str],
                 started: list[str], counts: dict[str, int]) -> None:
        """Judge what was added, in start order, and make the events it told."""
        judge = trace.judge
        was_reordered = judge.reordered
        judged: list[Step] = []
        told = judge.advance(judged=judged)
        if judge.reordered and not was_reordered:
            counts["reordered_traces"] += 1
        calls = 0
        for step in judged:
            if step.call is not None and step.kind == STEP_TOOL:
                calls += 1
                tools.append(step.call.tool)
                trace.last_step = step
                trace.tool_ended(step.end_ns)
        counts["tool_calls"] += calls
        for item in told:
            events.append(self._event(trace, item, batch))
        if not trace.tracked and judged:
            # Counted as started in ``working`` (as the processor counts it): the transitions told above move it.
            trace.tracked = True
            started.append(WORKING)

    def _turns(self, trace: _Trace, turns: TurnLog, models: list[SpanRecord], reopened: bool, seen: UnreadTrace,
               counts: dict[str, int], handoffs: bool = False) -> int:
        """Judge a batch's model spans (caller holds the trace's lock); returns how many steps were added.

        With ``handoffs`` (the batch holds a hand-off), model calls that asked for tools are read as news for the
        hand-offs too (:func:`~..conventions.agent_steps.model_step`)."""
        extractor = self._reader.extractor
        lanes = 0
        derive = turns.judge.derive
        fresh: list[Turn] = []
        for span in models:
            read = trace.model_read_once(span, extractor, context=True, agent=None,
                                         with_news=trace.judge.has_lanes or handoffs)
            if read is None:
                counts["duplicate_spans"] += 1
                continue
            turn, lane = read
            if turn is not None:
                fresh.append(turn)
                if lane is not None and trace.judge.add(lane):
                    lanes += 1
        if not fresh:
            return lanes
        # In end order: a derived call takes its result from the next model call's input.
        fresh.sort(key=TURN_ORDER)
        if reopened and derive:
            turns.unordered = True  # its pending calls were judged without a result at the last finish
        judge = trace.judge
        added = lanes
        for turn in fresh:
            if derive:
                turns.keep(turn)
            for step in turns.judge.add(turn):
                if judge.add(step):
                    added += 1
                    if step.call is not None:
                        seen.derived(1)
        return added

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
            judge = trace.judge
            if not trace.changed:
                return None  # nothing new since the last finish (a late batch of duplicates)
            trace.changed = False
            rejudged, retracted = judge.rejudged, judge.retracted
            turns = trace.turns
            if turns is not None and turns.judge.derive:
                if turns.unordered and not turns.full:
                    # The model turns arrived out of end order: their calls are derived again, exactly.
                    judge.discard(ORIGIN_DERIVED)
                    derived = turns.derive_again()
                    for step in derived:
                        judge.add(step)
                    trace.unread_now().set_derived(len(derived))
                else:
                    if turns.unordered:
                        judge.partial = True
                    # Calls derived from model spans that never got a result are judged now, without one.
                    for step in trace.pending_calls():
                        if judge.add(step):
                            trace.unread_now().derived(1)
            told = judge.finish(trace.max_end_ns * 1e-9 if trace.max_end_ns else None)
            for judged in told:
                events.append(self._event(trace, judged))
            report = dataclasses.replace(judge.report(SERVE_SOURCE, f"{trace.trace_id:032x}"),
                                         versions=trace.versions.values())
            known_cost = judge.known_cost is not None
            counts = dict.fromkeys(_COUNTERS, 0)
            counts["finished_traces"] = 1
            counts["rejudged_traces"] = judge.rejudged - rejudged
            counts["rejudged_events_retracted"] = judge.retracted - retracted
            self._count(counts)
            causes = tuple(trace.unread_now().causes(judge.lanes_read))
            if causes:
                report = dataclasses.replace(report, unread=tuple(c.as_dict() for c in causes))
            return FinishedTrace(report, evicted, known_cost, trace.tracked, causes, tuple(trace.peers or ()),
                                 trace.agent_calls(), trace.tenant, trace.task(judge))

    def _event(self, trace: _Trace, judged: Judged, batch: _Batch | None = None) -> VerdictEvent:
        """The event for what the trace's judge told (a re-evaluation at the finish points at its last call)."""
        step = judged.step if judged.step is not None else trace.last_step
        agent, conversation = self._attribution(trace, step, batch) if step is not None else (None, None)
        return verdict_event(judged, trace.trace_id, RECEIVED, agent=agent, conversation=conversation,
                             last=trace.last_step, last_end_ns=trace.max_end_ns or None, tenant=trace.tenant or None,
                             versions=trace.versions.values())

    def _attribution(self, trace: _Trace, step: Step, batch: _Batch | None) -> tuple[str | None, str | None]:
        """The agent and conversation an event for ``step`` names."""
        agent, conversation = step.agent, step.conversation
        if step.origin != ORIGIN_DERIVED:
            # A tool span's agent and conversation are read now, from the span when it is in this request (a
            # step read from an earlier one has the trace's last ones).
            span = batch.span(step.span_id) if batch is not None else None
            if span is not None:
                attrs = span.attributes
                trace.context = (self._reader.extractor.agent_name(attrs, name=span.name), conversation_id(attrs))
            agent, conversation = trace.context
        # As the processor names it: a tool call after its innermost agent span (an agent span's attributes
        # are final here, set at its start or after), else its own; a call derived from a model span after
        # that span, else its agent span.
        if trace.agents:
            if step.origin == ORIGIN_DERIVED:
                agent = agent or trace.agent_at(step.end_ns)
            else:
                agent = trace.agent_at(step.end_ns) or agent
        return agent, conversation

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
