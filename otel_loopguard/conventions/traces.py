"""Whole traces of a stored input judged once each (``audit``, ``report``; ``calibrate`` takes them unjudged).

:class:`TraceCollector` is ``audit``'s adapter over the shared intake (:mod:`.intake`): it groups the spans of an
input (any number of files, spans in any order, any number of deliveries) into traces and judges each trace once
with a :class:`~otel_loopguard.core.judge.TraceJudge`.

The release rule of :class:`TraceCollector`: every trace is held until the input ends, and then judged in start
order, so a trace gets exactly one report whatever the order of its spans (root first, sorted by start time,
reversed, shuffled, spread over JSON Lines records or split across files). Only compact steps are held (tool
calls and model usage, argument and result text capped at ``max_argument_bytes``), not spans. When what is held
outgrows ``max_buffer_bytes``, the least recently active trace (the one whose latest span was read longest ago) is
judged at once and its report says ``"partial": true``; spans of it read later make another report, also partial.
A trace is never split silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from ..core.agent_steps import NEWS_ONLY
from ..core.engine import LoopEngine
from ..core.judge import Step, TraceJudge, TraceReport
from ..core.model import STEP_AGENT, STEP_HANDOFF
from ..core.store import TraceMap
from .extract import ROLE_AGENT, ROLE_LLM, ROLE_TOOL
from .intake import SpanTrace, StepReader
from .nesting import CONVENTION_NESTING
from .span import SpanRecord
from .versions import VersionReader, version_keys

__all__ = ["DEFAULT_BUFFER_BYTES", "AssembledTrace", "StepCollector", "TraceCollector"]

#: What :class:`TraceCollector` holds at most by default (estimated bytes of held traces and their steps).
DEFAULT_BUFFER_BYTES = 1 << 30
#: Estimated bytes of one held trace besides its steps (its record, its judge and the engine's state).
TRACE_OVERHEAD_BYTES = 4096
# Ids of traces released early that are remembered, so their later spans are reported as partial too.
_MAX_RELEASED_IDS = 1 << 17
# Kinds of step between agents: once a trace has one, model calls that asked for tools are news for the next.
_AGENT_KINDS = (STEP_HANDOFF, STEP_AGENT)
# Sources (file names) named on one report at most.
_MAX_SOURCES = 4


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (restored after, if it was enabled).

    What the collector holds until the input ends (a record, a judge and compact steps per trace) is acyclic and
    grows the whole time, so every full pass of the cyclic collector walks all of it for nothing: with 10 000
    traces held these passes took a quarter of the audit. Reference counting still frees everything.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


class _Held(SpanTrace):
    """One trace held until the input ends: the shared record (its turns held whole, judged at the end in end
    order), its judge holding its steps, and what its report names."""

    __slots__ = ("best", "handoffs", "judge", "max_end_ns", "news", "order", "partial", "sources")

    # Every model and agent span id is remembered: what is held is bounded by the collector's byte budget.
    max_ids = sys.maxsize

    def __init__(self, order: int, partial: bool) -> None:
        super().__init__()
        self.order = order
        self.partial = partial
        # Hand-off steps were held; the news of model calls that asked for tools, given to the judge only then.
        self.handoffs = False
        self.news: list[Step] = []
        self.judge: TraceJudge | None = None
        self.max_end_ns = 0
        self.sources: list[str] = []
        # Per grouping attribute: ((start_ns, end_ns, span_id), value) of the earliest span that has it.
        self.best: dict[str, tuple[tuple[int, int, int], Any]] = {}


class TraceCollector:
    """Groups spans into traces and judges each trace once, in start order (see the module docstring).

    Args:
        engine: the engine (and configuration) to judge with.
        group_by: attribute names whose values are kept on the reports (span attributes first, then resource;
            the earliest span that has one gives its value).
        observed_at: the observation time of every trace; by default each trace's last span end.
        max_buffer_bytes: what is held at most (estimated bytes); beyond it the least recently active trace is
            released early, its report marked partial.
        versions: read each trace's versions onto its report (:attr:`TraceReport.versions`), as ``serve`` does.
    """

    def __init__(self, engine: LoopEngine, *, group_by: Iterable[str] = (), observed_at: float | None = None,
                 max_buffer_bytes: int = DEFAULT_BUFFER_BYTES, versions: bool = False) -> None:
        self.engine = engine
        self._read_versions = VersionReader(version_keys(engine.config)) if versions else None
        self._reader = StepReader(context=False, config=engine.config)
        self._extractor = self._reader.extractor
        self._read_role = self._extractor.read_role
        self._group_by = tuple(group_by)
        self._observed_at = observed_at
        self._max_bytes = max_buffer_bytes
        # Held traces, least recently active first; ids of those released early remembered (later spans: partial).
        self._held: TraceMap[int, _Held, bool] = TraceMap(remember=_MAX_RELEASED_IDS)
        self._get = self._held.get  # bound once: one lookup per span
        self._order = 0
        self._bytes = 0
        self._last: int | None = None
        #: Traces released early because the buffer was full.
        self.early_releases = 0
        #: Span deliveries of a tool or model span already read (counted once).
        self.duplicates = 0

    @property
    def held_traces(self) -> int:
        """Traces held now."""
        return len(self._held)

    @property
    def held_bytes(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def add(self, span: SpanRecord, source: str) -> list[TraceReport]:
        """Hold one span.

        Returns:
            Reports of traces released early to stay within the buffer (usually none).
        """
        trace_id = span.trace_id
        held = self._get(trace_id)
        if held is None:
            self._order += 1
            held = _Held(self._order, self._held.recall(trace_id) is not None)
            self._held.add(trace_id, held)
            self._bytes += TRACE_OVERHEAD_BYTES
            self._last = trace_id
        elif trace_id != self._last:
            # Least recently active first; a trace's spans mostly come together, so this is rarely needed.
            self._held.touch(trace_id)
            self._last = trace_id
        if span.end_ns > held.max_end_ns:
            held.max_end_ns = span.end_ns
        sources = held.sources
        if (not sources or (sources[-1] is not source and source not in sources)) and len(sources) <= _MAX_SOURCES:
            sources.append(source)
        if self._group_by:
            self._note_attributes(held, span)
        if self._read_versions is not None and (found := self._read_versions(span.attributes, span.resource)):
            held.versions.note(found, span.start_ns, span.span_id)
        # The shared intake (:class:`~.intake.SpanTrace`): the role once, then the span read by its kind.
        role, row = self._read_role(span.attributes, span.name)
        if span.parent_span_id is None:
            held.root_read(span)
        if role == ROLE_TOOL:
            self._add_tool(held, span, self._reader.span_step(span, role, row))
        elif role == ROLE_LLM:
            self._add_model(held, span)
        elif role == ROLE_AGENT:
            for step in held.agent_span(span, self._extractor) or ():  # None: delivered again
                self._add_lane_step(held, step)
        else:  # a hand-off or model call no tool or model convention reads (Logfire's); CHAIN/task spans
            lane = self._reader.span_step(span, role, row)
            held.other_read(span, lane)
            self._add_lane_step(held, lane)
        if self._bytes > self._max_bytes:
            return self._release_oldest()
        return []

    def _add_tool(self, held: _Held, span: SpanRecord, step: Step | None) -> None:
        """Hold a tool span's step (a hand-off when it transfers to another agent), noting unread content."""
        if step is None:
            return
        added = self._add_lane_step(held, step) if step.kind == STEP_HANDOFF else self._hold(held, step)
        if added:
            held.tool_read(step, span, self._extractor, held.unread or held.unread_now())
        if not held.has_tools:
            # Its calls are read from tool spans: the model turns keep only their usage.
            held.has_tools = True
            if held.turns is not None:
                self._bytes -= held.turns.drop_messages()

    def _add_model(self, held: _Held, span: SpanRecord) -> None:
        """Hold a model span's turn (judged at the end, in end order) and its model-turn step."""
        extractor = self._extractor
        # Its agent as ``serve`` reads it (the span's convention, its name included: the role's lookup answers).
        agent = extractor.agent_name(span.attributes, name=span.name)
        read = held.model_read_once(span, extractor, context=False, agent=agent, with_news=True)
        if read is None:
            self.duplicates += 1
            return
        turn, lane = read
        turns = held.turns  # made by model_read_once
        if turn is not None and turns is not None:
            self._bytes += turns.hold(turn)
        self._add_lane_step(held, lane)

    def add_all(self, spans: Iterable[SpanRecord], source: str) -> Iterator[TraceReport]:
        """Hold every span of ``spans``; yields reports of traces released early.

        The cyclic garbage collector is paused meanwhile (see :func:`_collector_paused`).
        """
        add = self.add
        with _collector_paused():
            for span in spans:
                released = add(span, source)
                if released:
                    yield from released

    def finish(self) -> list[TraceReport]:
        """Judge every held trace (the input ended); returns their reports in order of first appearance."""
        with _collector_paused():
            held = sorted(self._held.pop_all(), key=lambda item: item[1].order)
            self._bytes = 0
            self._last = None
            return [self._report(trace_id, h) for trace_id, h in held]

    def _add_lane_step(self, held: _Held, step: Step | None) -> bool:
        """Hold a hand-off or model-turn step (judged with the trace's tool calls, in a sequence of its kind);
        False when there is none, it was held back as news, or it is a duplicate.

        The news of model calls that asked for tools (what a hand-off without state of its own takes as evidence)
        waits until the trace has a step between agents, the only step that reads it. The live paths decide when a
        model span arrives instead (news once the trace's judge has a lane step, whose absence makes the judge drop
        it): they differ only for a trace with model turns but no step between agents, where news changes nothing."""
        if step is None:
            return False
        if step.call is not None and step.call.tool == NEWS_ONLY and not held.handoffs:
            held.news.append(step)
            return False
        if step.kind in _AGENT_KINDS and not held.handoffs:
            held.handoffs = True
            for news in held.news:
                self._add_lane_step(held, news)
            held.news = []
        return self._hold(held, step)

    def _hold(self, held: _Held, step: Step) -> bool:
        """Give a step to the trace's judge (made on first use), counting its bytes; False for a duplicate."""
        judge = held.judge
        if judge is None:
            judge = held.judge = TraceJudge(self.engine, nesting=CONVENTION_NESTING)
        before = judge.kept_bytes
        if judge.add(step):
            self._bytes += judge.kept_bytes - before
            return True
        self.duplicates += 1
        return False

    def _release_oldest(self) -> list[TraceReport]:
        out = []
        while self._bytes > self._max_bytes and self._held:
            trace_id, held = self._held.pop_oldest()
            if trace_id == self._last:
                self._last = None
            self._bytes -= TRACE_OVERHEAD_BYTES + (held.judge.kept_bytes if held.judge is not None else 0)
            self._bytes -= held.turns.held_bytes() if held.turns is not None else 0
            self.early_releases += 1
            self._held.remember(trace_id, True)
            held.partial = True
            out.append(self._report(trace_id, held))
        return out

    def _note_attributes(self, held: _Held, span: SpanRecord) -> None:
        attrs: Mapping[str, Any] = span.attributes
        resource: Mapping[str, Any] = span.resource
        best = held.best
        key = (span.start_ns, span.end_ns, span.span_id)
        for name in self._group_by:
            value = attrs.get(name)
            if value is None:
                value = resource.get(name)
            if value is not None:
                known = best.get(name)
                if known is None or key < known[0]:
                    best[name] = (key, value)

    def _assembled(self, held: _Held) -> TraceJudge:
        """The trace's judge holding every step of it (tool calls, model usage, calls derived from model spans)."""
        judge = held.judge
        if judge is None:
            judge = held.judge = TraceJudge(self.engine, nesting=CONVENTION_NESTING)
        turns = held.turns
        if turns is not None and turns.log:
            # Its turn judge was given no turn yet (deriving calls only while the trace has no tool span): it is
            # given them now, in end order, so its model calls are counted once for the task's turns too.
            turn_judge = turns.judge
            for turn in turns.in_end_order():
                for step in turn_judge.add(turn):
                    judge.add(step)
            for step in turn_judge.finish():
                judge.add(step)
            held.unread_now().derived(turn_judge.derived)
        return judge

    def _source(self, held: _Held) -> str:
        sources = held.sources
        source = ", ".join(sources[:_MAX_SOURCES])
        return source + " and more" if len(sources) > _MAX_SOURCES else source

    def _attributes(self, held: _Held) -> dict[str, Any] | None:
        best = held.best
        return {name: best[name][1] for name in self._group_by if name in best} if best else None

    def _report(self, trace_id: int, held: _Held) -> Any:
        """The released trace's output: its report, judged at its observation time."""
        judge = self._assembled(held)
        observed_at = self._observed_at
        if observed_at is None and held.max_end_ns:
            observed_at = held.max_end_ns * 1e-9
        judge.finish(observed_at)
        if held.partial:
            judge.partial = True
        report = judge.report(self._source(held), f"{trace_id:032x}", attributes=self._attributes(held))
        causes = held.unread_now().causes(judge.lanes_read)
        if causes:
            report = dataclasses.replace(report, unread=tuple(c.as_dict() for c in causes))
        if self._read_versions is not None:
            report = dataclasses.replace(report, versions=held.versions.values())
        report = dataclasses.replace(report, task=held.task(judge))
        # Reported: its judge and turns go now, not when the input's last trace is (``audit``'s peak memory).
        held.judge = None
        held.turns = None
        return report


class AssembledTrace(msgspec.Struct, frozen=True):
    """One trace's steps as every path judges them, not judged yet (calibration replays them per setting).

    Attributes:
        trace_id: the trace id.
        steps: the steps in judge order (:data:`~otel_loopguard.core.judge.STEP_ORDER`: start time, end time,
            span id; derived calls left without a result last), nested spans of one call joined, calls derived from
            model spans included, duplicate deliveries dropped.
        max_end_ns: the end of the trace's last span (0 when unknown).
        source: the files it was read from (the first few).
        attributes: the values of the ``group_by`` attributes (the earliest span that has one gives it).
        partial: it was released early (the buffer was full), so its steps may be only part of it.
        versions: the trace's versions when the collector reads them (see :class:`TraceCollector`).
    """

    trace_id: int
    steps: tuple[Step, ...]
    max_end_ns: int
    source: str
    attributes: dict[str, Any] | None = None
    partial: bool = False
    versions: tuple[tuple[str, str], ...] = ()


class StepCollector(TraceCollector):
    """A :class:`TraceCollector` whose released traces are :class:`AssembledTrace` values instead of reports."""

    def _report(self, trace_id: int, held: _Held) -> Any:
        return AssembledTrace(trace_id, tuple(self._assembled(held).assembled()), held.max_end_ns,
                              self._source(held), self._attributes(held), held.partial,
                              held.versions.values())
