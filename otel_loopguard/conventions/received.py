"""The per-trace assembly of spans received in requests (``serve``): :meth:`RequestReader.sort` puts each of a
request's spans into its trace's :class:`SpanBatch` (no lock held), :meth:`ReceivedTrace.take` judges a batch under
the trace's lock and adds what it told to the request's :class:`RequestTold`, and :meth:`ReceivedTrace.finish` judges
the trace exactly when it finishes (:class:`TraceFinish`). Which traces are open, finished, reopened or evicted,
and their kept bytes, are :mod:`.received_traces`'; ``serve``'s table keeps its counters.
"""

from __future__ import annotations

import dataclasses

import msgspec

from ..core.config import LoopGuardConfig
from ..core.judge import Judged, Step, TraceJudge, TraceReport
from ..core.model import STEP_HANDOFF, STEP_TOOL, WORKING
from ..core.outcome import TaskOutcome
from .agent_steps import ORIGIN_LANE_SPAN
from .assembly import TURN_ORDER, TurnLog
from .extract import ROLE_AGENT, ROLE_LLM, Extractor, conversation_id
from .intake import SpanTrace, StepReader
from .model_calls import ORIGIN_DERIVED, Turn
from .span import SpanRecord
from .unread import MAX_KEYS, UNKNOWN_ATTRIBUTES, Unread, UnreadTrace, structure_span
from .verdicts import RECEIVED, VerdictEvent, verdict_event
from .versions import VersionReader, Versions, version_keys

__all__ = ["ReceivedTrace", "RequestReader", "RequestTold", "SpanBatch", "TraceFinish"]


class SpanBatch:
    """One request's spans of one trace, sorted by role without a lock."""

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


class RequestReader:
    """Sorts received spans into their trace's :class:`SpanBatch`, each classified once.

    Args:
        config: the configuration whose redaction placeholders, user-defined conventions and version keys apply.

    Shared by the receiving threads: the version reader swaps its cached (resource, versions) pair whole, so a race
    only reads a resource again. The agent and conversation of a step are read only when an event is made.
    """

    __slots__ = ("_read_versions", "_reader", "extractor")

    def __init__(self, config: LoopGuardConfig) -> None:
        self._reader = StepReader(config=config, context=False)
        #: The extractor the spans are read with (the trace's methods take it).
        self.extractor: Extractor = self._reader.extractor
        self._read_versions = VersionReader(version_keys(config))

    def sort(self, batch: SpanBatch, span: SpanRecord) -> None:
        """Put one span of a request into its trace's batch, classified once: the role, and for a tool span the
        convention row that reads it."""
        batch.spans += 1
        if span.end_ns > batch.max_end_ns:
            batch.max_end_ns = span.end_ns
        role, row = self.extractor.read_role(span.attributes, span.name)
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


class TraceFinish(msgspec.Struct, frozen=True):
    """What judging a trace exactly at its finish told.

    Attributes:
        events: the verdict events to emit.
        report: what ``audit`` would print for the spans received so far (versions and unread causes on it).
        known_cost: whether the judge knows the cost (usage seen, every model priced).
        rejudged: times the trace was judged again, exactly (this finish: 0 or 1).
        retracted: events sent earlier that the exact judgement no longer produced.
        unread: why some of its spans could not be read as tool calls.
        agents: (agent name or None, tool calls) of each agent span first seen since the last finish.
        task: how the task ended and its figures.
    """

    events: tuple[VerdictEvent, ...]
    report: TraceReport
    known_cost: bool
    rejudged: int
    retracted: int
    unread: tuple[Unread, ...]
    agents: tuple[tuple[str | None, int], ...]
    task: TaskOutcome


class RequestTold:
    """What judging one request's batches told, collected over its traces (one per request, filled under each
    trace's lock in turn; the adapter reads it when the request is done).

    Attributes:
        events: the verdict events to emit.
        tools: the tool names of the newly judged calls.
        started: the current verdict kinds of traces that became tracked (new, or finished and reopened).
        unread: causes of unread content known from the spans alone (unknown attributes).
        duplicates: tool and model spans received before (counted once).
        tool_calls: tool calls judged.
        reordered: traces that received a step out of start order for the first time.
    """

    __slots__ = ("duplicates", "events", "reordered", "started", "tool_calls", "tools", "unread")

    def __init__(self) -> None:
        self.events: list[VerdictEvent] = []
        self.tools: list[str] = []
        self.started: list[str] = []
        self.unread: list[Unread] = []
        self.duplicates = 0
        self.tool_calls = 0
        self.reordered = 0

    def merged_unread(self) -> list[Unread]:
        """The unread causes, one per reason over the request's traces: the keys seen (bounded), the spans summed."""
        by_reason: dict[str, tuple[set[str], int]] = {}
        for note in self.unread:
            keys, spans = by_reason.get(note.reason, (set(), 0))
            keys.update(note.keys)
            by_reason[note.reason] = (keys, spans + note.spans)
        return [Unread(reason, tuple(sorted(keys))[:MAX_KEYS], spans) for reason, (keys, spans) in by_reason.items()]


class ReceivedTrace(SpanTrace):
    """The per-trace record of spans received in requests: the shared record, plus its judge, its times, the last
    tool call judged and the context its events name. The caller holds the trace's lock."""

    __slots__ = ("changed", "context", "judge", "last_step", "max_end_ns", "tenant", "trace_id", "tracked")

    def __init__(self, trace_id: int, judge: TraceJudge, tenant: str = "") -> None:
        super().__init__()
        self.trace_id = trace_id
        #: Who sent it, when tokens name tenants ("" otherwise).
        self.tenant = tenant
        self.judge = judge
        self.max_end_ns = 0
        self.last_step: Step | None = None
        self.tracked = False
        # Whether anything new arrived since the last finish (a batch of duplicates only is not news).
        self.changed = True
        # (agent, conversation) the last tool span an event was made for names (read from the span then).
        self.context: tuple[str | None, str | None] = (None, None)

    def take(self, batch: SpanBatch, reopened: bool, extractor: Extractor, told: RequestTold) -> int:
        """Judge a batch of the trace (``reopened``: it had finished), adding what it told to ``told``; returns how
        many steps were new."""
        news = self._notes(batch, extractor)
        added = self._add_steps(batch, extractor, told)
        if batch.models:
            added += self._turns(self.turns_now(), batch.models, reopened, self.unread_now(), extractor, told,
                                 any(step.kind == STEP_HANDOFF for step, _ in batch.steps))
        if added or news:
            self.changed = True
            if reopened and self.tracked:
                told.started.append(self.judge.verdict.kind)
        if added:
            self._advance(batch, extractor, told)
        return added

    def _notes(self, batch: SpanBatch, extractor: Extractor) -> bool:
        """Note the batch's times, agent, structure and root spans and versions; returns whether any was news."""
        news = False
        if batch.max_end_ns > self.max_end_ns:
            self.max_end_ns = batch.max_end_ns
            news = True
        if batch.steps and not self.has_tools and any(step.call is not None and step.origin != ORIGIN_LANE_SPAN
                                                      for step, _ in batch.steps):
            news |= self._tools_seen()
        if batch.agents:
            news |= self._note_agents(batch, extractor)
        for span in batch.others:  # an agent framework's CHAIN/task spans: for the unread note
            self.other_read(span, None)
        for root in batch.roots:  # for the task outcome: error status, duration
            self.root_read(root)
        for found, start_ns, span_id in batch.versions:
            self.versions.note(found, start_ns, span_id)
        return news

    def _tools_seen(self) -> bool:
        """The trace's calls are read from its tool spans from now on: none is derived from its model spans (those
        derived before are dropped; the trace is judged again without them at the finish). Returns whether any was."""
        if self.tools_seen() is None:
            return False
        if self.judge.discard(ORIGIN_DERIVED):
            self.unread_now().set_derived(0)
            return True
        return False

    def _note_agents(self, batch: SpanBatch, extractor: Extractor) -> bool:
        """Read the batch's agent spans not seen before (each once, :meth:`SpanTrace.agent_span`), adding the
        sub-agent steps they complete to the batch's steps; returns whether there was one."""
        news = False
        for span in batch.agents:
            steps = self.agent_span(span, extractor)
            if steps is not None:
                batch.steps.extend((step, span) for step in steps)
                news = True
        return news

    def _add_steps(self, batch: SpanBatch, extractor: Extractor, told: RequestTold) -> int:
        """Add the batch's tool steps to the judge, noting unread content; returns how many were new."""
        # What this batch could not read (its unknown-attribute causes are told); the rest is noted on the trace.
        seen: UnreadTrace | None = None
        add = self.judge.add
        added = 0
        for step, span in batch.steps:
            if add(step):
                added += 1
                seen = self.tool_read(step, span, extractor, seen)
        # Counted per batch: a step not added was a duplicate.
        told.duplicates += len(batch.steps) - added
        if seen is not None:
            self.unread_now().merge(seen)
            # Known from the span alone. (No readable tool call is known only at the finish: spans of a trace
            # arrive in any order, its root first as well as last.)
            told.unread += [cause for cause in seen.causes() if cause.reason == UNKNOWN_ATTRIBUTES]
        return added

    def _advance(self, batch: SpanBatch, extractor: Extractor, told: RequestTold) -> None:
        """Judge what was added, in start order, and make the events it told."""
        judge = self.judge
        was_reordered = judge.reordered
        judged: list[Step] = []
        said = judge.advance(judged=judged)
        if judge.reordered and not was_reordered:
            told.reordered += 1
        calls = 0
        tools = told.tools
        for step in judged:
            if step.call is not None and step.kind == STEP_TOOL:
                calls += 1
                tools.append(step.call.tool)
                self.last_step = step
                self.tool_ended(step.end_ns)
        told.tool_calls += calls
        for item in said:
            told.events.append(self.event(item, extractor, batch))
        if not self.tracked and judged:
            # Counted as started in ``working`` (as the processor counts it): the transitions told above move it.
            self.tracked = True
            told.started.append(WORKING)

    def _turns(self, turns: TurnLog, models: list[SpanRecord], reopened: bool, seen: UnreadTrace,
               extractor: Extractor, told: RequestTold, handoffs: bool = False) -> int:
        """Judge a batch's model spans; returns how many steps were added.

        With ``handoffs`` (the batch holds a hand-off), model calls that asked for tools are read as news for the
        hand-offs too (:func:`~.agent_steps.model_step`)."""
        lanes = 0
        derive = turns.judge.derive
        judge = self.judge
        fresh: list[Turn] = []
        for span in models:
            read = self.model_read_once(span, extractor, context=True, agent=None,
                                        with_news=judge.has_lanes or handoffs)
            if read is None:
                told.duplicates += 1
                continue
            turn, lane = read
            if turn is not None:
                fresh.append(turn)
                if lane is not None and judge.add(lane):
                    lanes += 1
        if not fresh:
            return lanes
        # In end order: a derived call takes its result from the next model call's input.
        fresh.sort(key=TURN_ORDER)
        if reopened and derive:
            turns.unordered = True  # its pending calls were judged without a result at the last finish
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

    def finish(self, source: str, extractor: Extractor) -> TraceFinish | None:
        """Judge the trace exactly, as far as received (None when nothing new arrived since the last finish)."""
        if not self.changed:
            return None  # nothing new since the last finish (a late batch of duplicates)
        self.changed = False
        judge = self.judge
        rejudged, retracted = judge.rejudged, judge.retracted
        self._derive_at_finish()
        told = judge.finish(self.max_end_ns * 1e-9 if self.max_end_ns else None)
        events = tuple(self.event(judged, extractor) for judged in told)
        report = dataclasses.replace(judge.report(source, f"{self.trace_id:032x}"), versions=self.versions.values())
        known_cost = judge.known_cost is not None
        causes = tuple(self.unread_now().causes(judge.lanes_read))
        if causes:
            report = dataclasses.replace(report, unread=tuple(c.as_dict() for c in causes))
        return TraceFinish(events, report, known_cost, judge.rejudged - rejudged, judge.retracted - retracted,
                           causes, self.agent_calls(), self.task(judge))

    def _derive_at_finish(self) -> None:
        """Calls derived from model spans, judged exactly: derived again when the turns arrived out of end order,
        else the pending ones (that never got a result) added without one."""
        judge = self.judge
        turns = self.turns
        if turns is None or not turns.judge.derive:
            return
        if turns.unordered and not turns.full:
            # The model turns arrived out of end order: their calls are derived again, exactly.
            judge.discard(ORIGIN_DERIVED)
            derived = turns.derive_again()
            for step in derived:
                judge.add(step)
            self.unread_now().set_derived(len(derived))
            return
        if turns.unordered:
            judge.partial = True
        # Calls derived from model spans that never got a result are judged now, without one.
        for step in self.pending_calls():
            if judge.add(step):
                self.unread_now().derived(1)

    def event(self, judged: Judged, extractor: Extractor, batch: SpanBatch | None = None) -> VerdictEvent:
        """The event for what the trace's judge told (a re-evaluation at the finish points at its last call)."""
        step = judged.step if judged.step is not None else self.last_step
        agent, conversation = self._attribution(step, extractor, batch) if step is not None else (None, None)
        return verdict_event(judged, self.trace_id, RECEIVED, agent=agent, conversation=conversation,
                             last=self.last_step, last_end_ns=self.max_end_ns or None, tenant=self.tenant or None,
                             versions=self.versions.values())

    def _attribution(self, step: Step, extractor: Extractor,
                     batch: SpanBatch | None) -> tuple[str | None, str | None]:
        """The agent and conversation an event for ``step`` names."""
        agent, conversation = step.agent, step.conversation
        if step.origin != ORIGIN_DERIVED:
            # A tool span's agent and conversation are read now, from the span when it is in this request (a
            # step read from an earlier one has the trace's last ones).
            span = batch.span(step.span_id) if batch is not None else None
            if span is not None:
                attrs = span.attributes
                self.context = (extractor.agent_name(attrs, name=span.name), conversation_id(attrs))
            agent, conversation = self.context
        # As the processor names it: a tool call after its innermost agent span (an agent span's attributes
        # are final here, set at its start or after), else its own; a call derived from a model span after
        # that span, else its agent span.
        if self.agents:
            if step.origin == ORIGIN_DERIVED:
                agent = agent or self.agent_at(step.end_ns)
            else:
                agent = self.agent_at(step.end_ns) or agent
        return agent, conversation
