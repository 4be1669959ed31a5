"""Per-trace incremental evaluation for ``serve``: spans arrive in batches, in any order, from many connections.

Each trace keeps one engine state. A batch's tool and model spans are sorted by (start, end) and fed to the
engine right away, so a verdict leaves as soon as the span that causes it arrives (no waiting for the trace to
end). When a batch holds a span that starts *before* a span already fed (a late batch, a parallel tool call
exported out of order) or the parent ``execute_tool`` span of an MCP client span that was already counted, the
trace is re-judged from scratch over every span kept for it, in start order: so the final state, transitions
and interventions are always those ``audit`` computes for the same spans (``TraceEvaluator`` replays in
start-time order and observes at the last span's end). Events already sent cannot be recalled, so a re-judge
emits only observations not sent before; an event a re-judge no longer produces is counted in
``ServeStats.rejudged_events_retracted`` (seen only when spans arrive out of order across batches).

A trace is *finished* when no span of it arrived for ``idle`` seconds (like the Collector's tail-sampling
``decision_wait``): it is judged once more at its last span's end (expired leases), its final metrics are
recorded and a :class:`~otel_loopguard._replay.TraceReport` is published. A finished trace is kept (bounded,
least recently finished dropped) so spans arriving after the finish *continue* it: they are counted in
``ServeStats.late_spans`` and judged with the trace's earlier spans, exactly as if they had arrived in time
(the trace's final metrics are then recorded again when it finishes again).

Open traces are bounded by ``max_traces``: beyond it the least recently active trace is finished early and
counted as evicted (``loopguard.traces.evicted`` with reason ``capacity``). The spans kept per trace for
re-judging are bounded by ``max_spans_per_trace``; past it the trace is judged in arrival order (counted).

Everything here is plain data work under one lock; the caller emits the returned events outside it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

from ..conventions.extract import (
    ROLE_AGENT,
    ROLE_LLM,
    ROLE_TOOL,
    Extractor,
    conversation_id,
    is_mcp_client,
)
from ..conventions.model_calls import Turn, TurnJudge
from ..conventions.span import SpanRecord
from ..conventions.unread import MAX_KEYS, NO_TOOL_CALLS, UNKNOWN_ATTRIBUTES, Unread, UnreadTrace, unknown_content_keys
from ..core.cost import Usage
from ..core.engine import LoopEngine
from ..core.judge import TraceReport
from ..core.model import STUCK, Intervention, Observation, ToolCall, Transition
from ..core.step_audit import audit_trace, step_args
from ..core.store import EVICT_CAPACITY
from ..sdk.emit import VerdictEvent

SERVE_SOURCE = "serve"


@dataclass(frozen=True, slots=True)
class _Step:
    """One tool or model span of a trace, extracted once and kept for re-judging."""

    key: tuple[int, int]
    span_id: int
    parent_span_id: int | None
    call: ToolCall | None
    mcp_client: bool
    usage: tuple[str | None, Usage] | None
    agent: str | None
    conversation: str | None
    end_ns: int
    # A tool call derived from model spans (dropped again if the trace turns out to have tool spans).
    derived: bool = False


@dataclass(frozen=True, slots=True)
class FinishedTrace:
    """A trace that was finished: its report and the figures for the final metrics.

    Attributes:
        report: what ``audit`` would print for the spans received so far.
        evicted: ``capacity`` when it was finished early to bound memory, else None.
        seen_usage: whether model usage was seen (the cost is recorded only then).
        tracked: whether it had a tool or model span (only those count in the processor's metrics).
        unread: why some of its spans could not be read as tool calls (also on the report).
    """

    report: TraceReport
    evicted: str | None
    seen_usage: bool
    tracked: bool
    unread: tuple[Unread, ...] = ()


class _Replay:
    """Feeds one trace's calls and usage to the engine in order and collects what happened."""

    def __init__(self, engine: LoopEngine) -> None:
        self.engine = engine
        self.state = engine.new_state()
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
            # As audit's judge reports it: the period of the cycle the trace is stuck in at the end, if it is.
            stuck_period=self.stuck_period if self.state.verdict.kind == STUCK else None,
            steps_used=self.state.steps,
            transitions=tuple(self.transitions),
            interventions=tuple(self.interventions),
            ok=audit["ok"],
            violations=tuple(audit["violations"]),
            cost=self.state.cost if with_cost else None,
            attributes=attributes or {},
        )


class _Judge(_Replay):
    """The engine state of one trace and what it produced, plus what ``serve`` needs to re-judge it."""

    def __init__(self, engine: LoopEngine) -> None:
        super().__init__(engine)
        self.seed_steps: list[dict[str, Any]] = []
        self.seen_usage = False
        # Parents of MCP client spans counted as calls: if such a parent arrives later, the count was wrong.
        self.counted_mcp: set[int] = set()


class _Trace:
    __slots__ = (
        "emitted",
        "exact",
        "judge",
        "last_key",
        "last_seen",
        "max_end_ns",
        "reopened",
        "steps",
        "tool_ids",
        "trace_id",
        "tracked",
        "turn_log",
        "turns",
        "turns_unordered",
        "unread",
    )

    def __init__(self, trace_id: int, engine: LoopEngine) -> None:
        self.trace_id = trace_id
        self.steps: list[_Step] = []
        self.tool_ids: set[int] = set()
        self.judge = _Judge(engine)
        self.max_end_ns = 0
        self.last_seen = 0.0
        self.emitted: set[tuple[Any, ...]] = set()
        self.exact = True
        self.last_key: tuple[int, int] | None = None
        # Set when late spans reopen a finished trace: its final re-evaluation must not stay in the history.
        self.reopened = False
        self.tracked = False
        # One model call counts once (two spans of one call: the SDK's own beside an instrumentation's, ADK's
        # call_llm around generate_content); without tool spans, tool calls are derived from the model spans.
        self.turns = TurnJudge()
        self.unread = UnreadTrace()
        # The model turns, while calls may be derived from them, and whether they arrived out of end order (the
        # derivation is then done again, exactly, when the trace finishes).
        self.turn_log: list[Turn] = []
        self.turns_unordered = False


def _event_key(obs: Observation) -> tuple[Any, ...]:
    t, i = obs.transition, obs.intervention
    return (
        obs.index,
        (t.step, t.previous, t.verdict.kind, t.verdict.rule) if t is not None else None,
        (i.step, i.action, i.rule) if i is not None else None,
    )


@dataclass(frozen=True, slots=True)
class ServeStats:
    """Counters of a serve instance (a snapshot).

    Attributes:
        spans: spans received.
        tool_calls: tool calls judged (first time each).
        open_traces: traces open now.
        finished_traces: traces finished so far (including evicted ones).
        evicted_traces: traces finished early because ``max_traces`` were open.
        late_spans: spans that arrived for an already finished trace.
        rejudged_traces: times a trace was re-judged from scratch because a span arrived out of order.
        rejudged_events_retracted: events sent earlier that a later re-judge no longer produced.
        inexact_traces: traces that outgrew ``max_spans_per_trace`` and are judged in arrival order from then on.
        rejected_requests: requests refused as malformed, oversized or of the wrong type.
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


def _recounted(unread: UnreadTrace, derived: int) -> UnreadTrace:
    """``unread`` with its derived-call count set to ``derived`` (the derivation was done again)."""
    unread.set_derived(derived)
    return unread


class TraceTable:
    """Open and recently finished traces of a serve instance, judged incrementally.

    Args:
        engine: the engine (and configuration) to judge with.
        idle: seconds without a new span after which a trace is finished.
        max_spans_per_trace: tool and model spans kept per trace for re-judging out-of-order arrivals.

    Thread-safe: every method takes the table's lock.
    """

    def __init__(self, engine: LoopEngine, idle: float, max_spans_per_trace: int = 4096) -> None:
        self.engine = engine
        self.idle = idle
        self._max_open = engine.config.max_traces
        self._max_spans = max_spans_per_trace
        self._extractor = Extractor.from_config(engine.config)
        self._open: OrderedDict[int, _Trace] = OrderedDict()
        self._done: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("spans", "tool_calls", "finished_traces", "evicted_traces", "late_spans", "rejudged_traces",
             "rejudged_events_retracted", "inexact_traces", "rejected_requests"), 0)

    # -- public ---------------------------------------------------------------

    def add(
        self, spans: Iterable[SpanRecord], now: float, unread: list[Unread] | None = None
    ) -> tuple[list[VerdictEvent], list[str], list[FinishedTrace], list[str]]:
        """Take one request's spans.

        Args:
            spans: the request's spans.
            now: the arrival time.
            unread: when given, the causes of unread input among the request's spans are appended to it.

        Returns:
            (events to emit, tool names of newly judged calls, traces finished early to bound memory,
            current verdict kinds of traces that became tracked: new ones, or finished ones reopened by late spans).
        """
        by_trace: dict[int, list[SpanRecord]] = {}
        count = 0
        for span in spans:
            count += 1
            by_trace.setdefault(span.trace_id, []).append(span)
        events: list[VerdictEvent] = []
        tools: list[str] = []
        finished: list[FinishedTrace] = []
        started: list[str] = []
        with self._lock:
            self._counts["spans"] += count
            for trace_id, batch in by_trace.items():
                trace = self._open.get(trace_id)
                reopened = False
                if trace is None:
                    trace = self._done.pop(trace_id, None)
                    if trace is not None:
                        self._counts["late_spans"] += len(batch)
                        trace.reopened = reopened = True
                    else:
                        trace = _Trace(trace_id, self.engine)
                    self._open[trace_id] = trace
                    if len(self._open) > self._max_open:
                        _, oldest = self._open.popitem(last=False)
                        self._counts["evicted_traces"] += 1
                        finished.append(self._finish(oldest, EVICT_CAPACITY, events))
                else:
                    self._open.move_to_end(trace_id)
                trace.last_seen = now
                if reopened and trace.tracked:
                    started.append(trace.judge.state.verdict.kind)
                self._take(trace, batch, events, tools, unread)
                if not trace.tracked and trace.last_key is not None:
                    trace.tracked = True
                    started.append(trace.judge.state.verdict.kind)
        return events, tools, finished, started

    def finish_idle(self, now: float) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every trace with no span for ``idle`` seconds."""
        events: list[VerdictEvent] = []
        finished: list[FinishedTrace] = []
        horizon = now - self.idle
        with self._lock:
            # Ordered by last activity, so the idle ones are at the front.
            while self._open:
                trace = next(iter(self._open.values()))
                if trace.last_seen > horizon:
                    break
                del self._open[trace.trace_id]
                finished.append(self._finish(trace, None, events))
        return events, finished

    def finish_all(self) -> tuple[list[VerdictEvent], list[FinishedTrace]]:
        """Finish every open trace now (drain on shutdown)."""
        events: list[VerdictEvent] = []
        finished: list[FinishedTrace] = []
        with self._lock:
            while self._open:
                _, trace = self._open.popitem(last=False)
                finished.append(self._finish(trace, None, events))
        return events, finished

    def reject(self) -> None:
        """Count one refused request."""
        with self._lock:
            self._counts["rejected_requests"] += 1

    def stats(self) -> ServeStats:
        """A snapshot of the counters."""
        with self._lock:
            return ServeStats(open_traces=len(self._open), **self._counts)

    # -- internals (caller holds the lock) -------------------------------------

    def _take(self, trace: _Trace, batch: list[SpanRecord], events: list[VerdictEvent], tools: list[str],
              unread: list[Unread] | None = None) -> None:
        new_steps: list[_Step] = []
        extractor = self._extractor
        read: list[tuple[SpanRecord, str | None]] = []
        underived = False
        root_here = False
        for span in batch:
            if span.end_ns > trace.max_end_ns:
                trace.max_end_ns = span.end_ns
            if span.parent_span_id is None:
                root_here = True
            attrs = span.attributes
            if extractor.may_matter(attrs, span.name):
                role = extractor.span_role(attrs, span.name)
                if role == ROLE_TOOL and trace.turns.derive:
                    # The trace's calls are read from its tool spans: calls derived before are dropped.
                    underived = trace.turns.derived > 0
                    trace.turns.tool_span_seen()
                    trace.turn_log = []
                read.append((span, role))
        # Model spans in end order: a derived call takes its result from the next model call's input.
        read.sort(key=lambda item: (item[0].end_ns, item[0].start_ns, item[0].span_id))
        unknown: set[str] = set()
        unknown_spans = model_spans = 0
        model_keys: set[str] = set()
        for span, role in read:
            attrs = span.attributes
            if role == ROLE_TOOL:
                trace.tool_ids.add(span.span_id)
                call = self._extractor.tool_call(
                    attrs, span_name=span.name, start_ns=span.start_ns, end_ns=span.end_ns,
                    status_error=span.status_error, status_message=span.status_message,
                    events=((name, ev_attrs) for name, _, ev_attrs in span.events),
                )
                captured = call.arguments_captured and call.result_captured
                events_read = [(name, ev_attrs) for name, _, ev_attrs in span.events] if not captured else []
                convention = extractor.convention(attrs, span.name) if not captured else None
                trace.unread.tool(attrs, call.arguments_captured, call.result_captured, events_read, convention)
                if not captured:
                    keys = unknown_content_keys(attrs, events_read)
                    if keys:
                        unknown.update(keys)
                        unknown_spans += 1
                new_steps.append(_Step((span.start_ns, span.end_ns), span.span_id, span.parent_span_id, call,
                                       is_mcp_client(attrs), None, extractor.agent_name(attrs, name=span.name),
                                       conversation_id(attrs),
                                       span.end_ns))
            elif role == ROLE_LLM:
                turn = extractor.model_turn(attrs, span.name, span.span_id, span.parent_span_id, span.start_ns,
                                            span.end_ns, messages=trace.turns.derive)
                trace.unread.model(attrs)
                if turn is not None and trace.turns.derive:
                    log = trace.turn_log
                    if log and (turn.end_ns, turn.start_ns) < (log[-1].end_ns, log[-1].start_ns):
                        trace.turns_unordered = True
                    if len(log) < self._max_spans:
                        log.append(turn)
                    if not turn.calls and turn.results is None:
                        model_spans += 1
                        model_keys.update(k for k in attrs if k.startswith(("gen_ai.", "llm.", "ai.")))
                agent = extractor.agent_name(attrs, name=span.name)
                for produced in trace.turns.add(turn) if turn is not None else ():
                    if produced.call is not None:
                        trace.unread.derived(1)
                        new_steps.append(_Step((produced.start_ns, produced.end_ns), produced.span_id,
                                               produced.parent_span_id, produced.call, False, None, agent,
                                               conversation_id(attrs), produced.end_ns, derived=True))
                    elif produced.usage is not None:
                        new_steps.append(_Step((span.start_ns, span.end_ns), span.span_id, span.parent_span_id,
                                               None, False, (produced.model, produced.usage), agent,
                                               conversation_id(attrs), span.end_ns))
            elif role == ROLE_AGENT:
                trace.unread.model(attrs)
        if unread is not None:
            if unknown_spans:
                unread.append(Unread(UNKNOWN_ATTRIBUTES, tuple(sorted(unknown))[:MAX_KEYS], unknown_spans))
            # Said when the trace's root arrives (it ends last): only then is "no tool call" known.
            if root_here and model_spans and not trace.tool_ids and not trace.turns.derived:
                unread.append(Unread(NO_TOOL_CALLS, tuple(sorted(model_keys))[:MAX_KEYS], model_spans))
        if underived:
            trace.steps = [s for s in trace.steps if not s.derived]
            trace.reopened = True  # judged again from the start, without the derived calls
        if not new_steps and not underived:
            return
        reopened, trace.reopened = trace.reopened, False
        new_steps.sort(key=lambda s: s.key)
        judge = trace.judge
        in_order = not reopened and (trace.last_key is None or new_steps[0].key >= trace.last_key)
        if in_order:
            in_order = not any(s.span_id in judge.counted_mcp for s in new_steps)
        for step in new_steps:
            if step.call is not None:
                tools.append(step.call.tool)
        self._counts["tool_calls"] += sum(1 for s in new_steps if s.call is not None)
        if in_order or not trace.exact:
            trace.last_key = max(trace.last_key or new_steps[-1].key, new_steps[-1].key)
            self._keep(trace, new_steps)
            for step in new_steps:
                self._feed(trace, judge, step, events)
            return
        # Out of order: re-judge the whole trace in start order, sending only what was not sent before.
        self._counts["rejudged_traces"] += 1
        trace.steps.extend(new_steps)
        trace.steps.sort(key=lambda s: s.key)
        trace.last_key = trace.steps[-1].key if trace.steps else None
        fresh = _Judge(self.engine)
        trace.judge = fresh
        before = trace.emitted
        trace.emitted = set()
        for step in trace.steps:
            self._feed(trace, fresh, step, events, already=before)
        self._counts["rejudged_events_retracted"] += len(before - trace.emitted)

    def _keep(self, trace: _Trace, steps: list[_Step]) -> None:
        if not trace.exact:
            return
        trace.steps.extend(steps)
        if len(trace.steps) > self._max_spans:
            trace.exact = False
            trace.steps = []
            self._counts["inexact_traces"] += 1

    def _feed(self, trace: _Trace, judge: _Judge, step: _Step, events: list[VerdictEvent],
              already: set[tuple[Any, ...]] | None = None) -> None:
        if step.call is not None:
            call = step.call
            if step.mcp_client and step.parent_span_id in trace.tool_ids:
                return  # the enclosing execute_tool span is the same call
            if step.mcp_client and step.parent_span_id is not None:
                judge.counted_mcp.add(step.parent_span_id)
            observation = judge.record(self.engine.observe(judge.state, call, None))
            judge.seed_steps.append({"tool": call.tool, "args": step_args(call)})
            tool: str | None = call.tool
        else:
            assert step.usage is not None
            judge.seen_usage = True
            observation = judge.record(self.engine.add_usage(judge.state, *step.usage))
            tool = None
        if observation is None or (observation.transition is None and observation.intervention is None):
            return
        key = _event_key(observation)
        trace.emitted.add(key)
        if already is not None and key in already:
            return
        events.append(self._event(trace, judge, observation, step, tool))

    def _event(self, trace: _Trace, judge: _Judge, observation: Observation, step: _Step | None,
               tool: str | None) -> VerdictEvent:
        context = None
        if step is not None:
            context = SpanContext(trace.trace_id, step.span_id, is_remote=True,
                                  trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return VerdictEvent(
            trace_id=trace.trace_id,
            span_context=context,
            verdict=observation.verdict,
            transition=observation.transition,
            intervention=observation.intervention,
            tool=tool,
            agent=step.agent if step is not None else None,
            conversation=step.conversation if step is not None else None,
            signature_digest=observation.signature_digest,
            steps=judge.state.steps,
            timestamp_ns=step.end_ns if step is not None else (trace.max_end_ns or None),
        )

    def _rederive(self, trace: _Trace, events: list[VerdictEvent]) -> None:
        derive = TurnJudge()
        derived = []
        for turn in sorted(trace.turn_log, key=lambda t: (t.end_ns, t.start_ns, t.span_id)):
            derived += [s for s in derive.add(turn) if s.call is not None]
        derived += derive.finish()
        agents = {t.span_id: t.agent for t in trace.turn_log}
        steps = [s for s in trace.steps if not s.derived]
        steps += [_Step((d.start_ns, d.end_ns), d.span_id, d.parent_span_id, d.call, False, None,
                        agents.get(d.span_id), d.conversation, d.end_ns, derived=True) for d in derived]
        steps.sort(key=lambda s: s.key)
        trace.steps = steps
        trace.unread = _recounted(trace.unread, derive.derived)
        self._counts["rejudged_traces"] += 1
        fresh = _Judge(self.engine)
        trace.judge = fresh
        before = trace.emitted
        trace.emitted = set()
        for step in steps:
            self._feed(trace, fresh, step, events, already=before)
        self._counts["rejudged_events_retracted"] += len(before - trace.emitted)

    def _finish(self, trace: _Trace, evicted: str | None, events: list[VerdictEvent] | None = None) -> FinishedTrace:
        if trace.turns.derive and trace.turns_unordered and trace.exact:
            # The model turns arrived out of end order: the calls derived from them are derived again, exactly.
            self._rederive(trace, events if events is not None else [])
        else:
            # Calls derived from model spans that never got a result are judged now, without one.
            pending = trace.turns.finish()
            if pending:
                trace.unread.derived(len(pending))
                late = [_Step((p.start_ns, p.end_ns), p.span_id, p.parent_span_id, p.call, False, None, p.agent,
                              p.conversation, p.end_ns, derived=True) for p in pending]
                if trace.exact:
                    trace.steps.extend(late)
                for step in late:
                    self._feed(trace, trace.judge, step, events if events is not None else [])
        judge = trace.judge
        if trace.max_end_ns:
            observation = judge.record(self.engine.reevaluate(judge.state, trace.max_end_ns * 1e-9))
            if observation is not None and (observation.transition is not None or observation.intervention is not None):
                trace.emitted.add(_event_key(observation))
                if events is not None:
                    last = trace.steps[-1] if trace.steps else None
                    events.append(self._event(trace, judge, observation, last, None))
        self._counts["finished_traces"] += 1
        self._done[trace.trace_id] = trace
        if len(self._done) > self._max_open:
            self._done.popitem(last=False)
        cfg = self.engine.config
        seed = audit_trace(judge.seed_steps, cfg.max_steps, cfg.repeat_limit)
        with_cost = bool(cfg.prices) or judge.seen_usage
        report = judge.report(SERVE_SOURCE, f"{trace.trace_id:032x}", seed, with_cost=with_cost)
        causes = tuple(trace.unread.causes())
        if causes:
            report = dataclasses.replace(report, unread=tuple(c.as_dict() for c in causes))
        return FinishedTrace(report, evicted, judge.seen_usage, trace.tracked, causes)
