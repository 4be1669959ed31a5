"""The live assembler: a trace's spans, read as they start and end in this process, judged into verdict events.

The processor (sdk/processor.py) is its adapter: it hands over what it read from a span (:class:`EndedSpan`), and
answers the few questions only it can (:class:`Host`, implemented by sdk/host.py: a span's events, where a span event
goes, what agent an open SDK span carries now); the assembler does the rest for every trace: its record in the state
store, versions, agent attribution (:meth:`~.assembly.TraceRecord.agent_span_at`, the rule ``serve`` uses), the
nesting rule, calls from tool spans or model spans, hand-offs and sub-agents, unread notes, the judge (per trace or
per conversation), the counts, the verdict events (:func:`~.verdicts.verdict_event`) and the task outcome.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Protocol

import msgspec

from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.judge import Judged, Step, TraceJudge
from ..core.model import STEP_TOOL
from ..core.outcome import TaskOutcome
from ..core.store import StateStore
from .agent_steps import lane_step_of_span, subagent_step
from .assembly import OPEN_NS, AgentSpan, TraceRecord, UnreadLog, tool_span_step
from .extract import ROLE_AGENT, ROLE_LLM, ROLE_TOOL, Extractor, conversation_id
from .nesting import CONVENTION_NESTING, tool_origin
from .span import ended_in_error
from .unread import Unread, message, structure_span
from .verdicts import LIVE, VerdictEvent, verdict_event
from .versions import VersionReader, Versions, version_keys

_EMPTY: Mapping[str, Any] = {}
#: Agent spans kept per trace, at most (open ones, then ended ones, for attributing calls that end later).
MAX_AGENTS = 64


class EndedSpan(msgspec.Struct, frozen=True, gc=False):
    """What the adapter read from a span that ended, for the assembler (one value per span, read by field name).

    Not tracked by the garbage collector: it lives for one span's processing and nothing it holds refers back to it.

    Attributes:
        span: the host's span, opaque here: only :meth:`Host.events` reads it (a span's events are read lazily).
        context: its span context (where a verdict event points).
        trace_id, span_id, parent_id: its ids (``parent_id`` None for a local root).
        name: its name.
        start_ns, end_ns: its times (0 when unknown).
        attrs: its attributes (a plain mapping, only read).
        resource: its resource's attributes.
        local_root: it has no parent in this process (none, or a remote one).
        error: its status is an error; ``description`` the status's description then.
    """

    span: Any
    context: Any
    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attrs: Mapping[str, Any]
    resource: Mapping[str, Any]
    local_root: bool = False
    error: bool = False
    description: str | None = None

    def now(self) -> float:
        """The span's end in seconds (the time the trace is seen at), else the wall clock."""
        return self.end_ns * 1e-9 if self.end_ns else time.time()


class Host(Protocol):
    """What only the adapter knows: its spans' events, its open spans, and where events go."""

    @property
    def late(self) -> Mapping[int, Any]:
        """The spans that started bare and may be agent spans, by trace id (while empty, :meth:`learn` is not
        asked)."""

    def events(self, span: Any) -> Iterable[tuple[str, Mapping[str, Any]]]:
        """A span's events as (name, attributes)."""

    def learn(self, trace_id: int, record: LiveTrace) -> None:
        """Add the trace's agent spans recognised only now (attributes set after their start) to ``record``."""

    def target(self, trace_id: int, record: LiveTrace) -> Any:
        """Where a span event of the trace goes: its innermost open agent span, else its root (or None)."""

    def agent_of(self, span: Any) -> str | None:
        """The agent name one of its open spans (an agent span's, a span-event target) carries now, else None."""

    def bare_agent(self, trace_id: int, span_id: int) -> str | None:
        """The agent name an open span that started without attributes carries now (None: no agent span)."""

    def publish(self, event: VerdictEvent, target: Any) -> None:
        """Emit a verdict event (and its span event on ``target``) and call the listeners."""


class Tally(Protocol):
    """The metrics the assembler records (the processor's emitter)."""

    def trace_started(self) -> None: ...
    def trace_finished(self, verdict: str, steps: int, cost: float | None, evicted: str | None = None) -> None: ...
    def task_finished(self, task: TaskOutcome) -> None: ...
    def agent_finished(self, agent: str | None, tool_calls: int) -> None: ...
    def unread(self, reason: str, spans: int) -> None: ...


class LiveTrace(TraceRecord):
    """One trace's record in the processor's state store: the shared record (its agent spans with their times,
    open ones ending at :data:`~.assembly.OPEN_NS`), its root span (a weak reference, the adapter's) and its judge.

    ``judge`` is made at the trace's first judged step. With ``per_conversation``, the judge lives in the
    conversation's record (keyed ``("conversation", id)``) and ``key`` points there.
    """

    __slots__ = ("agent_name", "judge", "key", "root")

    def __init__(self) -> None:
        super().__init__()
        self.root: Any = None
        self.judge: TraceJudge | None = None
        self.key: Hashable | None = None
        # The name of the agent span that ended last (the outermost one ends last), for the task outcome.
        self.agent_name: str | None = None

    def add_agent(self, agent: AgentSpan) -> None:
        """Keep an agent span; when full, the oldest ended one gives way (an open one never does)."""
        agents = self.agents
        if len(agents) >= MAX_AGENTS:
            oldest = next((i for i, a in enumerate(agents) if a.end_ns != OPEN_NS), None)
            if oldest is None:
                return
            del agents[oldest]
        agents.append(agent)

    def agent_opened(self, span_id: int, name: str | None, start_ns: int, span: Any) -> None:
        """An agent span known from its start, or recognised after it: open from ``start_ns`` (its span held
        weakly)."""
        self.add_agent(AgentSpan(span_id, name, span, start_ns, OPEN_NS))

    def open_agent(self) -> AgentSpan | None:
        """The innermost (latest-starting) open agent span whose span is still alive, for span events."""
        best: AgentSpan | None = None
        for agent in self.agents:
            if agent.end_ns == OPEN_NS and (best is None or agent.start_ns >= best.start_ns) and agent.span():
                best = agent
        return best


class LiveAssembler:
    """Judges a process's traces from what the adapter read of their spans (see the module's docstring).

    Args:
        config: the settings (``per_conversation``, the version attributes).
        engine: the engine every trace's judge feeds.
        extractor: reads spans through the convention table.
        store: the per-trace records (the adapter's: it owns eviction).
        host: the adapter (:class:`Host`).
        tally: the metrics (:class:`Tally`).
        log: where each cause of unread input is logged once (the adapter's logger).

    One thread at a time per trace: each record's slot lock is held while it changes. ``tool_counts`` holds the
    tool calls judged per tool name since the adapter last took them (:meth:`take_counts`).
    """

    def __init__(self, config: LoopGuardConfig, engine: LoopEngine, extractor: Extractor,
                 store: StateStore[LiveTrace], host: Host, tally: Tally, log: logging.Logger) -> None:
        self._engine = engine
        self._extractor = extractor
        self._store = store
        self._host = host
        self._tally = tally
        self._log = log
        self._per_conversation = config.per_conversation
        self._read_versions = VersionReader(version_keys(config))
        # Causes of unread input already logged (each reason and set of keys once).
        self._unread_logged = UnreadLog()
        self.tool_counts: dict[str, int] = {}
        # The slot of the trace judged last, with its trace id (see slot()).
        self._last_slot: tuple[Hashable, Any] | None = None
        # Bound once: read for every tool span.
        self._events = host.events
        self._learn = host.learn
        self._late = host.late

    # -- records -----------------------------------------------------------------------------------------------------

    def slot(self, trace_id: int, now: float) -> Any:
        """The store slot of a trace (created when missing), marked as used at ``now``.

        Speed trick (docs/architecture.md): the slot of the trace judged last is reused while the store still holds
        it, after one dict lookup instead of the store's locked LRU update; it is the most recently used slot
        already, so only its time changes (expiry of idle traces waits for the next other trace).
        """
        last = self._last_slot
        if last is not None and last[0] == trace_id:
            slot = last[1]
            if self._store.get(trace_id) is slot.state:
                slot.seen = now
                return slot
        slot = self._store.slot(trace_id, now)
        self._last_slot = (trace_id, slot)
        return slot

    def forget(self, key: Hashable) -> None:
        """A record left the store: the reused slot goes too, so its state is freed at once."""
        last = self._last_slot
        if last is not None and last[0] == key:
            self._last_slot = None

    def take_counts(self) -> dict[str, int]:
        """The tool calls judged per tool name since the last call (then forgotten)."""
        counts = self.tool_counts
        self.tool_counts = {}
        return counts

    def judge_of(self, trace_id: int) -> TraceJudge | None:
        """The judge of a tracked trace (its conversation's with ``per_conversation``), else None."""
        record = self._store.get(trace_id)
        if record is None:
            return None
        if record.key is not None:
            conversation = self._store.get(record.key)
            return conversation.judge if conversation is not None else None
        return record.judge

    def tracked(self) -> int:
        """The traces (and conversations) judged now, not yet released."""
        return sum(1 for _, record in self._store.items() if record.judge is not None)

    def _new_judge(self) -> TraceJudge:
        self._tally.trace_started()
        # Live: judged as spans end (never re-judged), so no steps are kept; no report, so no step audit. Nested
        # tool spans of one call (an OpenInference TOOL span around AutoGen's own) join as in ``audit``.
        return TraceJudge(self._engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)

    def _versions(self, record: LiveTrace, attrs: Mapping[str, Any], resource: Mapping[str, Any], start_ns: int,
                  span_id: int) -> None:
        record.versions.note(self._read_versions(attrs, resource), start_ns, span_id)

    # -- starts ------------------------------------------------------------------------------------------------------

    def started(self, trace_id: int, span_id: int, name: str, attrs: Mapping[str, Any], resource: Mapping[str, Any],
                start_ns: int, span: Any, is_root: bool) -> bool:
        """A GenAI span started (queued from ``on_start``: an agent span, or a local root): its trace's record notes
        its versions, its root and an agent span, open from now (both held weakly: ``span`` is the host's). Returns
        False when no convention reads it (the adapter keeps a plain root then)."""
        role = self._extractor.span_role(attrs, name)
        if role is None:
            return False
        slot = self.slot(trace_id, start_ns * 1e-9 if start_ns else time.time())
        with slot.lock:
            record = slot.state
            self._versions(record, attrs, resource, start_ns, span_id)
            if is_root:
                record.root = weakref.ref(span)
            if role == ROLE_AGENT:
                record.agent_opened(span_id, self._extractor.agent_name(attrs, name=name), start_ns, span)
        return True

    # -- ends --------------------------------------------------------------------------------------------------------

    def ended(self, span: EndedSpan, parent_open: bool) -> None:
        """A GenAI span ended: read in its role's way (a tool call, a model call, an agent span, a hand-off)."""
        # The role and the row that reads the span, in one classification.
        role, row = self._extractor.read_role(span.attrs, span.name)
        if role == ROLE_TOOL:
            self._tool(span, row, parent_open)
        elif role == ROLE_LLM:
            self._model(span)
        elif role == ROLE_AGENT:
            self._agent(span)
        else:
            self._lane(span)

    def _tool(self, span: EndedSpan, row: Any, parent_open: bool) -> None:
        """Judge a tool span's call in its trace: the call is read before the trace's lock is taken, and the trace's
        bookkeeping and its judging share one hold of that lock."""
        attrs, name, end = span.attrs, span.name, span.end_ns
        now = end * 1e-9 if end else time.time()
        # The span's events are read only when the convention keeps content in events or the call failed.
        call = self._extractor.call_of(row, attrs, name, span.start_ns, end, span.error, span.description,
                                       self._events(span.span))
        slot = self.slot(span.trace_id, now)
        judged: list[Step] = []
        told: list[Judged] = []
        with slot.lock:
            record = slot.state
            agent = self._note_tool(record, span, call, row.convention)
            # Only a span inside an open tool span may be the same call seen twice (the judge's fast path stays
            # for the rest). The agent and conversation are read only when an event is told.
            step = Step(span_id=span.span_id, parent_span_id=span.parent_id, start_ns=span.start_ns, end_ns=end,
                        call=call, origin=tool_origin(attrs) if parent_open else "")
            key = record.key
            # A transfer or delegation tool: judged as a hand-off between agents, not as a tool call.
            step = tool_span_step(step, attrs, name, self._extractor)
            if not self._per_conversation:
                judge = record.judge
                if judge is None:
                    judge = record.judge = self._new_judge()
                told = judge.judge(step, parent_open=parent_open, untimed_at=now, judged=judged)
        label = agent.name if agent is not None else None
        if self._per_conversation:
            self._judge_steps(span, slot, key, now, [step], agent, parent_open=parent_open, label=label)
            return
        self._count(judged, agent)
        if told:
            self._tell(span, slot, told, label)

    def _note_tool(self, record: LiveTrace, span: EndedSpan, call: Any, convention: Any) -> AgentSpan | None:
        """The trace's bookkeeping for a tool call that ended (caller holds the record's lock): versions, agents, the
        end times and the unread note. Returns the call's agent span."""
        attrs = span.attrs
        versions = self._read_versions(attrs, span.resource)
        if versions:
            record.versions.note(versions, span.start_ns, span.span_id)
        if self._late:
            self._learn(span.trace_id, record)
        # The trace's calls are read from its tool spans: none is derived from its model spans.
        if not record.has_tools:
            record.tools_seen()
        record.tool_ended(span.end_ns)
        # Content found: only counted; not found: the span's unknown content-like keys are noted.
        unread = record.unread or record.unread_now()
        if call.arguments_captured and call.result_captured:
            unread.tool_read()
        else:
            unread.tool(attrs, call.arguments_captured, call.result_captured, self._events(span.span), convention)
        return record.agent_span_at(span.end_ns) if record.agents else None

    def _model(self, span: EndedSpan) -> None:
        """A model span: its usage once per model call, and the tool calls derived from it while the trace has no
        tool span; with lanes, its model turn as a step."""
        attrs, name = span.attrs, span.name
        now = span.now()
        slot = self.slot(span.trace_id, now)
        with slot.lock:
            record = slot.state
            self._versions(record, attrs, span.resource, span.start_ns, span.span_id)
            if self._late:
                self._learn(span.trace_id, record)
            key = record.key
            agent = record.agent_span_at(span.end_ns) if record.agents else None
            # One model call counts once (the SDK's own span beside an instrumentation's); without tool spans, tool
            # calls are derived from the model spans' messages.
            turn, lane = record.model_span(
                self._extractor, attrs, name, span.span_id, span.parent_id, span.start_ns, span.end_ns,
                context=False, agent=agent.name if agent is not None else None,
                with_news=record.judge is not None and record.judge.has_lanes)
            steps = record.turns_now().judge.add(turn) if turn is not None else []
            if lane is not None:
                steps = [*steps, lane]
            derived = sum(1 for step in steps if step.call is not None and step.kind == STEP_TOOL)
            if derived:
                record.unread_now().derived(derived)
        if steps:
            self._judge_steps(span, slot, key, now, steps, agent, label=self._extractor.agent_name(attrs, name=name))

    def _lane(self, span: EndedSpan) -> None:
        """A span no tool or model convention reads that is a hand-off (Logfire's ``Handoff: A → B``); else, an
        agent framework's structure span, noted for the trace's unread note."""
        attrs = span.attrs
        step = lane_step_of_span(attrs, span.name, span.span_id, span.parent_id, span.start_ns, span.end_ns)
        if step is None:
            if structure_span(attrs):  # an agent framework's CHAIN/task span: for the trace's unread note
                slot = self.slot(span.trace_id, span.now())
                with slot.lock:
                    slot.state.unread_now().other(attrs, span.span_id)
            return
        now = step.end_ns * 1e-9 if step.end_ns else time.time()
        slot = self.slot(span.trace_id, now)
        with slot.lock:
            record = slot.state
            key = record.key
            agent = record.agent_span_at(span.end_ns) if record.agents else None
        self._judge_steps(span, slot, key, now, [step], agent, label=step.agent)

    def _agent(self, span: EndedSpan) -> None:
        """An agent span ended: its attribution interval closes, its calls are counted, and a sub-agent invocation
        (its parent an agent span of the trace) is judged as a step."""
        now = span.now()
        slot = self.slot(span.trace_id, now)
        with slot.lock:
            record = slot.state
            self._versions(record, span.attrs, span.resource, span.start_ns, span.span_id)
            record.agent_read(span.attrs, self._failed(span))
            step = self._subagent_step(record, span)
            agent = self._close_agent(record, span)
            record.agent_name = agent.name or record.agent_name
            key = record.key
        self._tally.agent_finished(agent.name, agent.tool_calls)
        if step is not None:
            self._judge_steps(span, slot, key, now, [step], None, label=step.agent)

    def _close_agent(self, record: LiveTrace, span: EndedSpan) -> AgentSpan:
        """The record's agent span for one that ended, its end noted (caller holds the record's lock)."""
        span_id = span.span_id
        for agent in record.agents:
            if agent.span_id == span_id and agent.end_ns == OPEN_NS:
                agent.close(span.end_ns or agent.start_ns)
                return agent
        # Recognised only now: its attributes were set after it started (strands, ADK, OpenLLMetry). Its tool calls
        # are those of the trace that ended while it was open.
        start, stop = span.start_ns, span.end_ns
        agent = AgentSpan(span_id, self._extractor.agent_name(span.attrs, name=span.name), None, start, stop)
        agent.tool_calls = record.calls_between(start, stop)
        record.add_agent(agent)
        return agent

    def _subagent_step(self, record: LiveTrace, span: EndedSpan) -> Step | None:
        """The sub-agent step of an agent span whose parent span is an agent span of the trace (one known from its
        start, or one that started bare and carries an agent convention's attributes now), else None (caller holds
        the record's lock)."""
        parent_id = span.parent_id
        if span.local_root or parent_id is None:
            return None
        opened = next((a for a in record.agents if a.span_id == parent_id), None)
        if opened is not None:
            source = opened.name or self._host.agent_of(opened.span())
        else:
            source = self._host.bare_agent(span.trace_id, parent_id)
            if source is None:  # the parent is no agent span (or not one known here)
                return None
        return subagent_step(span.attrs, span.span_id, parent_id, span.start_ns, span.end_ns, source,
                             self._extractor.agent_name(span.attrs, name=span.name))

    def _failed(self, span: EndedSpan) -> bool:
        """Whether an agent or root span ended in error (status or an exception event): the task's ``error``."""
        return ended_in_error(span.error, (name for name, _ in self._events(span.span)))

    # -- judging -----------------------------------------------------------------------------------------------------

    def _judge_steps(self, span: EndedSpan, slot: Any, key: Hashable | None, now: float, steps: list[Step],
                     agent: AgentSpan | None, *, parent_open: bool = False, label: str | None = None) -> None:
        """Judge the steps one span gave (a tool call; a model call's usage and the calls derived from it)."""
        judge_slot = self._judge_slot(slot, key, span.attrs, now) if self._per_conversation else slot
        judged: list[Step] = []
        told: list[Judged] = []
        with judge_slot.lock:
            judge_record = judge_slot.state
            judge = judge_record.judge
            if judge is None:
                judge = judge_record.judge = self._new_judge()
            for step in steps:
                told += judge.judge(step, parent_open=parent_open, untimed_at=now, judged=judged)
        self._count(judged, agent)
        if told:
            self._tell(span, slot, told, label)

    def _judge_slot(self, slot: Any, record_key: Hashable | None, attrs: Mapping[str, Any], now: float) -> Any:
        """The store slot holding the judge for a span whose trace's slot is ``slot``: with ``per_conversation`` its
        conversation's (then the trace's record points to it), else the trace's own."""
        conversation = conversation_id(attrs)
        key = ("conversation", conversation) if conversation is not None else record_key
        if key is None:
            return slot
        judge_slot = self._store.slot(key, now)
        assert judge_slot is not None
        if record_key != key:
            with slot.lock:
                slot.state.key = key
        return judge_slot

    def _count(self, judged: list[Step], agent: AgentSpan | None) -> None:
        """Count the tool calls judged: per tool name (:attr:`tool_counts`) and for their agent span."""
        counts = self.tool_counts
        for done in judged:
            done_call = done.call
            if done_call is not None and done.kind == STEP_TOOL:
                tool = done_call.tool
                counts[tool] = counts.get(tool, 0) + 1
                if agent is not None:
                    agent.tool_calls += 1

    def _tell(self, span: EndedSpan, slot: Any, told: list[Judged], label: str | None) -> None:
        """Publish what judging told: the span event goes where the host says (looked up only now: most calls tell
        nothing); the event names ``label``, else the span's agent, else the agent the target span carries now."""
        with slot.lock:
            target = self._host.target(span.trace_id, slot.state)
            versions = slot.state.versions.values()
        label = (label or (self._extractor.agent_name(span.attrs, name=span.name) if span.name else None)
                 or self._host.agent_of(target))
        conversation = conversation_id(span.attrs)
        for item in told:
            self._publish(span.trace_id, item, target, span.context, label, conversation, versions)

    def _publish(self, trace_id: int, judged: Judged, target: Any, context: Any, agent: str | None,
                 conversation: str | None, versions: Versions = ()) -> None:
        self._host.publish(verdict_event(judged, trace_id, LIVE, ended=context, agent=agent,
                                         conversation=conversation, versions=versions), target)

    # -- the trace's end ---------------------------------------------------------------------------------------------

    def finished(self, trace_id: int, root: EndedSpan | None) -> TraceJudge | None:
        """The trace's local root ended (``root``: None when not read): calls still pending are judged, unread input
        reported, inner spans held for a parent that never ended judged, the task outcome recorded. Returns the
        trace's own judge (None without one, or when its conversation's judge goes on)."""
        record = self._store.pop(trace_id)
        self.forget(trace_id)
        if record is None:
            return None
        if root is not None:
            self._versions(record, root.attrs, root.resource, root.start_ns, root.span_id)
        # Calls derived from model spans that never got a result are judged now, without one.
        pending = record.pending_calls()
        if pending:
            record.unread_now().derived(len(pending))
            self._judge_pending(trace_id, record, pending)
        if record.unread is not None:
            self._report_unread(record.unread.causes(record.judge is not None and record.judge.lanes_read))
        if record.key is not None:
            # Conversation state outlives one trace (its TTL releases it): the task's stop and figures are the
            # conversation's so far.
            conversation = self._store.get(record.key)
            self._task_ended(record, conversation.judge if conversation is not None else None, root)
            return None
        judge = record.judge
        if judge is not None:
            told = judge.finish(None)
            if told:
                target = self._host.target(trace_id, record)
                for item in told:
                    self._publish(trace_id, item, target, None, None, None, record.versions.values())
            self.trace_finished(judge, None)
        self._task_ended(record, judge, root)
        return judge

    def _task_ended(self, record: LiveTrace, judge: TraceJudge | None, root: EndedSpan | None) -> None:
        """Record the trace's task outcome and figures (its root span ended)."""
        if root is not None and self._failed(root):
            record.failed = True
        times = (root.start_ns, root.end_ns) if root is not None and root.start_ns and root.end_ns else None
        self._tally.task_finished(record.outcome(judge, record.agent_name, times))

    def _judge_pending(self, trace_id: int, record: LiveTrace, steps: list[Step]) -> None:
        """Judge derived calls at the trace's end (the record is out of the store: no other hook holds it); each is
        counted for the agent span holding its end."""
        now = time.time()
        target = self._host.target(trace_id, record)
        if record.key is not None:
            slot = self._store.slot(record.key, now)
            if slot is None:
                return
            lock: Any = slot.lock
            holder = slot.state
        else:
            lock, holder = threading.Lock(), record
        judged: list[Step] = []
        told: list[Judged] = []
        with lock:
            judge = holder.judge
            if judge is None:
                judge = holder.judge = self._new_judge()
            for step in steps:
                told += judge.judge(step, untimed_at=now, judged=judged)
        for done in judged:
            self._count([done], record.agent_span_at(done.end_ns))
        for item in told:
            cause = item.step
            agent = (cause.agent or record.agent_at(cause.end_ns)) if cause is not None else None
            label = agent or self._host.agent_of(target)
            self._publish(trace_id, item, target, None, label, None, record.versions.values())

    def _report_unread(self, causes: list[Unread]) -> None:
        """Count unread spans; log each cause (reason and keys) once."""
        for cause in causes:
            self._tally.unread(cause.reason, cause.spans)
            if self._unread_logged.first(cause):
                self._log.warning("otel_loopguard: %s", message(cause))

    def evicted(self, key: Hashable, record: LiveTrace, reason: str) -> None:
        """A record left the store early (``reason``: full, or idle): a judged trace's figures are recorded."""
        self.forget(key)
        if record.judge is not None:
            self.trace_finished(record.judge, reason)

    def trace_finished(self, judge: TraceJudge, evicted: str | None) -> None:
        """Record a judged trace's final figures (``evicted``: why it left the store early, else None)."""
        self._tally.trace_finished(judge.verdict.kind, judge.steps, judge.known_cost, evicted)

    def release_all(self) -> None:
        """Release every trace (at shutdown), recording the final figures of those judged."""
        store = self._store
        self._last_slot = None
        for key in store.tracked_keys():
            record = store.pop(key)
            if record is not None and record.judge is not None:
                self.trace_finished(record.judge, None)

    def resolve(self, trace_id: int, approved: bool) -> list[Judged]:
        """Answer the review asked for a trace (see the processor's ``resolve``); returns what that told, published."""
        slot = self._store.slot(trace_id, time.time(), create=False)
        if slot is None:
            return []
        with slot.lock:
            judge = self.judge_of(trace_id)
            told = judge.resolve(approved) if judge is not None else []
            target = self._host.target(trace_id, slot.state) if told else None
            versions = slot.state.versions.values()
        for item in told:
            self._publish(trace_id, item, target, None, self._host.agent_of(target), None, versions)
        return told
