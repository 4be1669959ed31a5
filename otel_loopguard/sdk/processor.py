"""``LoopGuardSpanProcessor``: the OpenTelemetry shell around the engine."""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanContext, StatusCode

from ..conventions import names as n
from ..conventions.agent_steps import (
    HANDOFF_MARKERS,
    lane_step_of_span,
    subagent_step,
)
from ..conventions.assembly import AgentSpan, TraceRecord, UnreadLog, tool_span_step
from ..conventions.extract import (
    ROLE_AGENT,
    ROLE_LLM,
    ROLE_TOOL,
    Extractor,
    conversation_id,
)
from ..conventions.nesting import CONVENTION_NESTING, tool_origin
from ..conventions.span import ended_in_error
from ..conventions.unread import Unread, message, structure_span
from ..conventions.verdicts import LIVE, VerdictEvent, verdict_event
from ..conventions.versions import VersionReader, Versions, version_keys
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.judge import Judged, Step, TraceJudge
from ..core.model import NO_INTERVENTION, STEP_TOOL, Intervention, ReviewRequest, ToolCall, Verdict, trace_id_of
from ..core.store import StateStore
from ..errors import ConfigError
from .emit import Emitter
from .open_spans import MAX_OPEN_AGENTS, MAX_OPEN_TOOLS, LateAgents, OpenTools, Roots
from .worker import DeferredWork

_logger = logging.getLogger(__name__)

Listener = Callable[[VerdictEvent], None]



class _HookCall(msgspec.Struct, frozen=True, gc=False):
    """A hook call handed to the worker (one frozen value per span start or end, read by field name).

    Attributes:
        span: the span.
        attrs: its attributes as the hook read them (a copy at start; the SDK's own dict at end), or None for the
            end of a plain local root.
        started: a start (else an end).
        genai: a GenAI span (else the local root of a trace that had GenAI spans).
        is_root: a local root.
        parent_open: at an end, the span's parent is a tool span that has not ended yet (noted by the application
            thread, see :class:`~.open_spans.OpenTools`): the span may be the same call as its parent.
    """

    span: Any
    attrs: Any
    started: bool
    genai: bool
    is_root: bool
    parent_open: bool = False


def _drain_at_exit(ref: weakref.ref[LoopGuardSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._drain()


_EMPTY: dict[str, Any] = {}
# Names of agent spans that get their attributes after start: GenAI `invoke_agent <name>` (strands, ADK) and
# OpenLLMetry's `<name>.agent`.
_LATE_AGENT_PREFIX = n.INVOKE_AGENT_SPAN_PREFIX
_LATE_AGENT_SUFFIX = n.TRACELOOP_AGENT_SPAN_SUFFIX


def _events(span: ReadableSpan) -> Any:
    """A span's events as (name, attributes), read only when the convention needs them (``span.events`` copies)."""
    for e in span.events:
        yield e.name, e.attributes or _EMPTY


def _versions_of(read: VersionReader, span: Any, attrs: Any) -> Versions:
    """The versions a span carries: its attributes', then its resource's (the SDK's resource keeps one attributes
    object, so the reader reads it once)."""
    resource = getattr(span, "resource", None)
    return read(attrs, resource.attributes if resource is not None else _EMPTY)


def _failed(span: ReadableSpan) -> bool:
    """Whether an agent or root span ended in error (status or an exception event): the task's ``error`` outcome."""
    return ended_in_error(span.status.status_code is StatusCode.ERROR, (e.name for e in span.events))


# The hooks run for every span of the application, so they read an SDK span's attributes as the SDK stores them:
# ``span._attributes`` is its ``BoundedAttributes`` and ``._dict`` the plain dict inside (two C-level attribute reads).
# The public ``span.attributes`` costs a Python property, a Python ``__len__`` and a ``MappingProxyType``, and iterating
# it a Python ``__iter__``: together most of what the hooks cost for a span that is not a GenAI span. These are private
# names of the SDK: any span without them (another SDK, a ReadableSpan built by hand, a future SDK) is read through the
# public mapping instead (``AttributeError``), and tests/processor/test_hooks_safety.py checks both paths. The dict is
# only read, never changed or kept past the hook except when the span has ended (the SDK then refuses any change).


def _plain(attrs: Any) -> dict[str, Any]:
    """A span's attributes as a plain dict (never mutated by the caller).

    ``span.attributes`` is a ``MappingProxyType`` over the SDK's ``BoundedAttributes``, whose public
    ``copy()`` is one C-level dict copy; anything else is copied the slow way.
    """
    if attrs is None:
        return _EMPTY
    try:
        plain = attrs.copy()
    except AttributeError:
        return dict(attrs)
    return plain if type(plain) is dict else dict(attrs)




def _agent_of(extractor: Extractor, span: Any) -> str | None:
    """The agent name a still-open span carries now (an agent span whose attributes arrived after its start)."""
    if span is None:
        return None
    try:
        attrs = _plain(span.attributes)
    except Exception:  # noqa: BLE001 - a span of another SDK: no name
        return None
    if extractor.span_role(attrs, span.name) != ROLE_AGENT:
        return None
    return extractor.agent_name(attrs, name=span.name)


class _Trace(TraceRecord):
    """Everything the processor keeps about one trace, in one record of the state store: the shared record (its
    ``agents`` are the open agent spans, innermost last), plus its root and its judge.

    ``judge`` is created at the trace's first tool or model span. With ``per_conversation``, the judge lives in
    the conversation's record (keyed ``("conversation", id)``) and ``key`` points there.
    """

    __slots__ = ("agent_name", "judge", "key", "root")

    def __init__(self) -> None:
        super().__init__()
        self.root: weakref.ref[Span] | None = None
        self.judge: TraceJudge | None = None
        self.key: Hashable | None = None
        # The name of the agent span that ended last (the outermost one ends last), for the task outcome.
        self.agent_name: str | None = None

    def target(self) -> Span | None:
        """Where a span event goes: the innermost open agent span, else the trace's local root."""
        for agent in reversed(self.agents):
            span: Span | None = agent.span()
            if span is not None:
                return span
        return self.root() if self.root is not None else None


class _Finished:
    """What :meth:`LoopGuardSpanProcessor.verdict` and :meth:`~LoopGuardSpanProcessor.check` answer for a
    trace whose root has ended."""

    __slots__ = ("stop", "verdict")

    def __init__(self) -> None:
        self.verdict: Verdict | None = None
        self.stop: Intervention | None = None


class _ErrorLog:
    """Counts hook failures and logs each kind once, so a bad span stream cannot flood the host's logs."""

    def __init__(self, emitter: Emitter) -> None:
        self._emitter = emitter
        self._logged: set[str] = set()
        self.count = 0

    def count_only(self, kind: str) -> None:
        """Count a failure that needs no log line (it is expected under load, e.g. a full queue)."""
        try:
            self.count += 1
            self._emitter.error(kind)
        except Exception:  # noqa: BLE001
            pass

    def __call__(self, where: str, exc: BaseException) -> None:
        try:
            kind = type(exc).__name__
            self.count += 1
            self._emitter.error(kind)
            if kind not in self._logged:
                self._logged.add(kind)
                _logger.warning("otel_loopguard: %s failed (%s: %s); counting further failures silently",
                                where, kind, exc, exc_info=exc)
        except Exception:  # noqa: BLE001 - the error path itself must never raise into the host
            pass


class LoopGuardSpanProcessor(SpanProcessor):
    """Watches GenAI tool spans, judges each trace for loops and emits verdicts through OTLP.

    Add it to a ``TracerProvider`` with ``add_span_processor``. The hooks never
    raise and never do I/O: events and metrics leave through the logger and
    meter providers' own batching processors and exporters.

    By default (``deferred=True``) ``on_start``/``on_end`` only queue the GenAI
    spans they see, and a background thread judges them in order, so the
    application thread pays well under a microsecond or two per span. Anything
    that needs an answer — :meth:`check`, :meth:`verdict`, :meth:`force_flush`,
    :meth:`shutdown` — first drains the queue on the calling thread, so it is
    never stale. ``deferred=False`` judges inside ``on_end`` on the thread that
    ends the span (listeners then run on that thread too).

    Args:
        config: settings; :meth:`LoopGuardConfig.load` (environment, ``LOOPGUARD_CONFIG`` file) when None.
        logger_provider: receives ``loopguard.verdict`` events; the global one when None.
        meter_provider: receives the metrics; the global one when None.
        deferred: judge on a background thread (default) or inline in ``on_end``.
        max_queue: spans held for the background thread at most; more are dropped and counted as
            ``loopguard.processor.errors{error.type="queue_full"}``.
        review_handler: called once with a :class:`ReviewRequest` when loopguard asks for a human review; with
            it the ladder is nudge, review, stop (unless ``interventions`` is configured). :meth:`check` answers
            ``review`` until :meth:`resolve` is called.

    Raises:
        ConfigError: the configuration is invalid.
    """

    def __init__(
        self,
        config: LoopGuardConfig | None = None,
        *,
        logger_provider: LoggerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        deferred: bool = True,
        max_queue: int = 100_000,
        review_handler: Callable[[ReviewRequest], None] | None = None,
    ) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ConfigError(f"max_queue must be a positive integer, got {max_queue!r}")
        self.config = config if config is not None else LoopGuardConfig.load()
        self._engine = LoopEngine(self.config, review=review_handler is not None)
        self._extractor = Extractor.from_config(self.config)
        # The attribute keys that make a span worth a look (the built-in conventions' and the user's).
        self._markers = self._extractor.marker_keys | HANDOFF_MARKERS
        # ... and the span names that make one (a GenAI tool span's, a user convention's span_name_prefix).
        self._marker_names = self._extractor.marker_names
        # Causes of unread input already logged (each reason and set of keys once).
        self._unread_logged = UnreadLog()
        self._logger_provider = logger_provider
        self._emitter = Emitter(logger_provider, meter_provider, self.config.max_tool_names,
                                self._engine.normalizer_version)
        # One record per trace (open agent and tool spans, root, judge), and per conversation when asked for.
        self._store: StateStore[_Trace] = StateStore(
            _Trace, self.config.max_traces, self.config.trace_ttl_seconds, self._evicted
        )
        # Traces whose root ended: what verdict() and check() still answer for them.
        self._finished_traces: StateStore[_Finished] = StateStore(
            _Finished, self.config.max_traces, self.config.trace_ttl_seconds
        )
        self._fail = _ErrorLog(self._emitter)
        self._listeners: list[Listener] = [] if review_handler is None else [self._reviews(review_handler)]
        self._stamps = {n.VERSION_ATTRIBUTES[k]: v for k, v in self.config.versions.items()}
        self._read_versions = VersionReader(version_keys(self.config))
        self._is_shutdown = False
        # Local roots that did not start as GenAI spans, still alive, by trace id: for span events when no agent
        # span is open, and to mark their traces at the first GenAI span (GenAI roots go in their trace's record).
        # Weak values: an entry goes with its span, so this index is as large as the roots the application holds.
        self._roots = Roots()
        self._per_conversation = self.config.per_conversation
        # The slot of the trace judged last, with its trace id: consecutive spans of one trace (the usual order of
        # a queue) reuse it after one dict lookup instead of the store's locked LRU update.
        self._last_slot: tuple[int, Any] | None = None
        # Tool calls counted per tool name since the last drain (deferred only: the worker, or whoever drains,
        # holds the drain lock), handed to the metric tally once per drain instead of once per span.
        self._tool_counts: dict[str, int] = {}
        # Spans named like agent spans that started without attributes; open tool spans (see sdk/open_spans.py).
        self._late_agents, self._open_tools = LateAgents(self.config.max_traces), OpenTools(MAX_OPEN_TOOLS)
        self._deferred = (
            DeferredWork(self._process, max_queue, self._dropped, on_error=self._worker_failed,
                         on_drained=self._flush_counts) if deferred else None
        )
        self._submit = self._deferred.submit if self._deferred is not None else self._process
        if self._deferred is not None:
            # Events and histogram records leave at the end of each drain, a batch at a time (see Emitter.hold).
            self._emitter.hold()
            # Drain at exit before the providers' own atexit shutdowns (registered earlier, so run later).
            atexit.register(_drain_at_exit, weakref.ref(self))

    # -- SpanProcessor hooks -------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Stamp versions; queue the start of agent and tool spans for bookkeeping; remember local roots."""
        try:
            if self._stamps:
                span.set_attributes(self._stamps)
            # Runs for every span, so the usual case (no attributes yet: instrumentations mostly set them after
            # start) costs two attribute reads and a truth test (see _plain); a span with attributes, one pass over
            # its keys. Only a GenAI span's attributes are copied (C-level), for the worker: the span is still open,
            # so they may change after this hook (no other thread has the span before this hook returns).
            try:
                attrs: Any = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attrs = span.attributes
            if attrs and not self._markers.isdisjoint(attrs):
                parent = span.parent
                is_root = parent is None or parent.is_remote
                plain = _plain(attrs)  # classified as a copy: the table keeps the last dict it classified
                if self._extractor.span_role(plain, span.name) == ROLE_TOOL:
                    # Noted here, not queued: its end item says whether it encloses the span that ends.
                    self._open_tools.add(span.get_span_context().span_id)
                    if not is_root:
                        return
                # The worker records the span (an agent span as open; a root as the trace's root).
                self._submit(_HookCall(span, plain, True, True, is_root))
                return
            parent = span.parent
            if parent is None or parent.is_remote:
                # A local root that is not (yet) a GenAI span may have to carry a span event when no agent span is
                # open, and its end must release the trace if GenAI spans follow: remembered until it is freed.
                self._roots.add(span.get_span_context().trace_id, span)
            else:
                name = span.name
                # Both the prefix and the suffix contain "agent": one substring test rejects most names.
                if "agent" in name and (name.startswith(_LATE_AGENT_PREFIX) or name.endswith(_LATE_AGENT_SUFFIX)):
                    # Maybe an agent span whose attributes come after its start: looked at again when its trace's
                    # next call is judged (held weakly, until then).
                    self._late_agents.add(span.get_span_context().trace_id, span)
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_start", exc)

    def on_end(self, span: ReadableSpan) -> None:
        """Queue (or, inline, judge) GenAI spans and the roots of their traces; other spans cost a lookup."""
        if self._is_shutdown:
            return
        try:
            # Most spans are not GenAI spans: one pass over the ended keys rejects them (a GenAI tool span name
            # without attributes is one too: ADK for JS when the tool raised). An SDK span's attributes are read as
            # the SDK's own dict (see _plain), immutable once the span ended, so the worker reads it as is.
            try:
                attrs: Any = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attrs = span.attributes
            if (attrs is not None and not self._markers.isdisjoint(attrs)) or span.name.startswith(self._marker_names):
                parent = span.parent
                is_root = parent is None or parent.is_remote
                if not is_root:
                    trace_id = span.context.trace_id
                    if trace_id in self._roots.refs and self._store.get(trace_id) is None:
                        # Under a root that is not a GenAI span: mark the trace now, on this thread, so the root's
                        # end (below) is queued even if the worker has not judged this span yet. (A GenAI root's
                        # end is always queued.)
                        self._store.slot(trace_id, span.end_time * 1e-9 if span.end_time else time.time())
                # Whether its parent is an open tool span is known here only (read when any tool span is open).
                open_tools = self._open_tools
                parent_open = open_tools.ended(span.context.span_id, parent) if open_tools.ids else False
                # The attributes read here go along, so the worker does not read them from the span again.
                self._submit(_HookCall(span, attrs, False, True, is_root, parent_open))
            else:
                parent = span.parent
                if (parent is None or parent.is_remote) and self._store.get(span.context.trace_id) is not None:
                    # The root of a trace that had GenAI spans: release the trace's record.
                    self._submit(_HookCall(span, None, False, False, True))
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_end", exc)

    def _process(self, item: _HookCall) -> None:
        """Do the work of one queued hook call (on the worker, or inline); never raises."""
        span = item.span
        try:
            if item.started:
                self._started(span, item.attrs, item.is_root)
                return
            b = item.attrs
            if item.genai:
                # Every further read is a plain dict lookup: the ended SDK span's own (immutable) dict as on_end read
                # it, else a copy of the public mapping (whose misses raise and catch KeyError in Mapping.get).
                attrs = b if b.__class__ is dict else _plain(b if b is not None else span.attributes)
                name = span.name
                # The role and the row that reads the span, in one classification (the span passed on_end's
                # markers test, which is the table's own: read_role's condition).
                role, row = self._extractor.read_role(attrs, name)
                if role == ROLE_TOOL:
                    self._tool_ended(span, attrs, name, row, item.parent_open)
                elif role == ROLE_LLM:
                    self._llm_ended(span, attrs)
                elif role == ROLE_AGENT:
                    self._agent_ended(span, attrs)
                else:
                    self._lane_span_ended(span, attrs, name)
            if item.is_root:
                self._root_ended(span.context.trace_id, span)
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_start" if item.started else "on_end", exc)

    def _started(self, span: Span, attrs: Any, is_root: bool) -> None:
        role = self._extractor.span_role(attrs, span.name)
        ctx = span.get_span_context()
        if role is None:
            if is_root:
                self._roots.add(ctx.trace_id, span)  # not a GenAI span after all: a plain local root
            return
        start = span.start_time
        slot = self._trace_slot(ctx.trace_id, start * 1e-9 if start else time.time())
        with slot.lock:
            record = slot.state
            record.versions.note(_versions_of(self._read_versions, span, attrs), start or 0, ctx.span_id)
            if is_root:
                record.root = weakref.ref(span)
            if role == ROLE_AGENT and len(record.agents) < MAX_OPEN_AGENTS:
                record.agents.append(AgentSpan(ctx.span_id, self._extractor.agent_name(attrs, name=span.name), span))

    def _dropped(self) -> None:
        self._fail.count_only("queue_full")

    def _worker_failed(self, exc: BaseException) -> None:
        self._fail("worker", exc)

    def _emit_failed(self, exc: BaseException) -> None:
        self._fail("emit", exc)

    def shutdown(self) -> None:
        """Release every trace (recording its final metrics); later spans are ignored. Safe to call twice."""
        if self._is_shutdown:
            return
        if self._deferred is not None:
            self._deferred.shutdown()
        self._is_shutdown = True
        self._last_slot = None
        for key in self._store.tracked_keys():
            record = self._store.pop(key)
            if record is not None and record.judge is not None:
                self._finished(record.judge, None)
        self._emitter.release(self._emit_failed)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Judge every queued span, then flush the logger provider, so pending verdict events leave now.

        Returns False when that did not finish within ``timeout_millis`` (a slow listener, a hung exporter); the
        background thread then finishes the judging later.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        if self._deferred is not None and not self._deferred.flush(timeout_millis / 1000):
            return False
        provider = self._logger_provider
        flush = getattr(provider, "force_flush", None)
        if flush is None:
            return True
        try:
            return bool(flush(max(0, int((deadline - time.monotonic()) * 1000))))
        except Exception as exc:  # noqa: BLE001
            self._fail("force_flush", exc)
            return False

    # -- harness API ---------------------------------------------------------

    def verdict(self, trace_id: int | str) -> Verdict | None:
        """The current verdict of a trace (an int, or 32 hex digits as trace UIs show it), or None when it is not
        tracked.

        A trace is tracked from its first tool or model span; after its local root ended, its last verdict is
        still answered (the most recent ``max_traces`` finished traces, within ``trace_ttl_seconds``).

        Raises:
            ValueError: ``trace_id`` is neither.
        """
        trace_id = trace_id_of(trace_id)
        self._drain()
        judge = self._judge_of(trace_id)
        if judge is not None:
            return judge.verdict
        finished = self._finished_traces.get(trace_id)
        return finished.verdict if finished is not None else None

    def check(self, trace_id: int | str | None = None) -> Intervention:
        """What the harness should do now for a trace (the current span's trace when None; an int, or 32 hex digits
        as trace UIs show it).

        Returns:
            ``stop`` once the trace was stopped (it stays stopped, also after its root ended), ``nudge`` right
            after the call that triggered one, else an intervention whose action is ``none``.
        """
        trace_id = trace.get_current_span().get_span_context().trace_id if trace_id is None else trace_id_of(trace_id)
        self._drain()
        judge = self._judge_of(trace_id)
        if judge is None:
            finished = self._finished_traces.get(trace_id)
            return finished.stop if finished is not None and finished.stop is not None else NO_INTERVENTION
        if judge.stop is not None:
            return judge.stop
        return judge.review or judge.last_intervention or NO_INTERVENTION

    def resolve(self, trace_id: int | str, approved: bool) -> Intervention:
        """Answer the review loopguard asked for a trace.

        Args:
            trace_id: the trace, as an int or as hex text (what trace UIs show).
            approved: True lets the run go on (a loop that continues is then stopped); False stops it now.

        Returns:
            The stop when declined; an intervention whose action is ``none`` when approved or when no review is
            pending for the trace.
        """
        trace_id = trace_id_of(trace_id)
        self._drain()
        slot = self._store.slot(trace_id, time.time(), create=False)
        if slot is None:
            return NO_INTERVENTION
        with slot.lock:
            judge = self._judge_of(trace_id)
            told = judge.resolve(approved) if judge is not None else []
            target = self._target(trace_id, slot.state) if told else None
            versions = slot.state.versions.values()
        for item in told:
            self._publish(trace_id, item, target, None, _agent_of(self._extractor, target), None, versions)
        self._drain()  # hands the held event to the SDK
        return told[0].observation.intervention if told else NO_INTERVENTION  # type: ignore[return-value]

    def _reviews(self, handler: Callable[[ReviewRequest], None]) -> Listener:
        """A listener that hands each review to ``handler``, once, as a :class:`ReviewRequest`."""

        def listen(event: VerdictEvent) -> None:
            review = event.intervention
            if review is None or review.action != "review":
                return
            judge = self._judge_of(event.trace_id)
            cost = judge.cost if judge is not None else None
            handler(ReviewRequest(
                trace_id=f"{event.trace_id:032x}", rule=review.rule, period=event.verdict.period,
                signature_digest=event.verdict.signature_digest or event.signature_digest, tool=event.tool,
                agent=event.agent, calls=event.steps,
                cost_usd=cost.usd if cost is not None and not cost.unpriced_tokens else None,
                message=review.message,
            ))

        return listen

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every transition and intervention.

        Deferred (the default), listeners run on the background thread, or on the thread that called
        :meth:`check`, :meth:`verdict` or :meth:`force_flush` when that drained the queue; inline, on the
        thread that ended the span.

        A listener that raises (even ``SystemExit``) is counted as a processor error; it never reaches the
        application and never stops the background thread.
        """
        self._listeners.append(listener)

    @property
    def errors(self) -> int:
        """Failures caught inside the hooks so far (after judging every queued span)."""
        self._drain()
        return self._fail.count

    @property
    def tracked_traces(self) -> int:
        """Traces (and conversations) judged now, not yet released (after judging every queued span)."""
        self._drain()
        return sum(1 for _, record in self._store.items() if record.judge is not None)

    # -- internals -----------------------------------------------------------

    def _drain(self) -> None:
        if self._deferred is not None:
            try:
                self._deferred.drain()
            except Exception as exc:  # noqa: BLE001
                self._fail("drain", exc)

    def _judge_of(self, trace_id: int) -> TraceJudge | None:
        record = self._store.get(trace_id)
        if record is None:
            return None
        if record.key is not None:
            conversation = self._store.get(record.key)
            return conversation.judge if conversation is not None else None
        return record.judge

    def _judge_slot(self, slot: Any, record_key: Hashable | None, attrs: Any, now: float) -> Any:
        """The store slot holding the judge for a span whose trace's slot is ``slot``: the trace's own, or with
        ``per_conversation`` its conversation's (then the trace's record points to it)."""
        if not self.config.per_conversation:
            return slot
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

    def _target(self, trace_id: int, record: _Trace) -> Span | None:
        """Where a span event goes (caller holds the record's lock); the record learns its root on first use, and
        its agent spans whose attributes arrived after their start."""
        if self._late_agents.refs:
            self._learn_agents(trace_id, record)
        if record.root is None:
            root = self._roots.get(trace_id)
            if root is not None:
                record.root = weakref.ref(root)
        return record.target()

    def _learn_agents(self, trace_id: int, record: _Trace) -> None:
        """The trace's spans named like agent spans that started without attributes: those that carry an agent
        convention's attributes now become its open agents (caller holds the record's lock)."""
        late = self._late_agents.pop(trace_id)
        if late:
            self._promote(record, late)

    def _promote(self, record: _Trace, late: list[Span]) -> None:
        """Agent spans that carry an agent convention's attributes now become the record's open agents (outer
        first); a tool span's own attributes never name one (only agent spans are looked at)."""
        known = {a.span_id for a in record.agents}
        for span in sorted(late, key=lambda s: s.start_time or 0):
            span_id = span.get_span_context().span_id
            if span_id in known or not span.is_recording():
                continue
            name = _agent_of(self._extractor, span)
            if name is not None and len(record.agents) < MAX_OPEN_AGENTS:
                record.agents.append(AgentSpan(span_id, name, span))

    def _new_judge(self) -> TraceJudge:
        self._emitter.trace_started()
        # Live: judged as spans end (never re-judged), so no steps are kept; no report, so no step audit. Nested
        # tool spans of one call (an OpenInference TOOL span around AutoGen's own) join as in ``audit``.
        return TraceJudge(self._engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)

    def _trace_slot(self, trace_id: int, now: float) -> Any:
        """The store slot of a trace (created when missing), marked as used at ``now``.

        The slot of the trace judged last is reused while the store still holds it: it is the most recently used
        one already, so only its time changes (expiry of idle traces waits for the next other trace).
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

    def _forget_slot(self, trace_id: Any) -> None:
        """Drop the reused slot when its trace leaves the store, so a released trace's state is freed at once."""
        last = self._last_slot
        if last is not None and last[0] == trace_id:
            self._last_slot = None

    def _flush_counts(self) -> None:
        """At the end of a drain: hand the tool calls counted since the last drain to the metric tally (once per tool
        name), and the events and histogram records held meanwhile to the SDK."""
        counts = self._tool_counts
        if counts:
            self._tool_counts = {}
            self._emitter.count_tool_calls(counts)
        self._emitter.release(self._emit_failed)

    def _tool_ended(self, span: ReadableSpan, attrs: Any, name: str, row: Any, parent_open: bool) -> None:
        """Judge a tool span's call in its trace: the call is read before the trace's lock is taken, and the trace's
        bookkeeping and its judging share one hold of that lock."""
        ctx = span.context
        trace_id = ctx.trace_id
        parent = span.parent
        start = span.start_time
        end = span.end_time
        now = end * 1e-9 if end else time.time()
        status = span.status
        error = status.status_code is StatusCode.ERROR
        # The span's events are read only when the convention keeps content in events or the call failed.
        call = self._extractor.call_of(row, attrs, name, start, end, error, status.description if error else None,
                                       _events(span))
        slot = self._trace_slot(trace_id, now)
        judged: list[Step] = []
        told: list[Judged] = []
        with slot.lock:
            record = slot.state
            record.versions.note(_versions_of(self._read_versions, span, attrs), start or 0, ctx.span_id)
            agent = self._note_tool(record, span, trace_id, attrs, call, row.convention)
            # Only a span inside an open tool span may be the same call seen twice (the judge's fast path stays
            # for the rest). The agent and conversation are read only when an event is told.
            step = Step(span_id=ctx.span_id, parent_span_id=parent.span_id if parent is not None else None,
                        start_ns=start or 0, end_ns=end or 0, call=call,
                        origin=tool_origin(attrs) if parent_open else "")
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
            self._judge_steps(trace_id, slot, key, attrs, now, [step], agent, parent_open=parent_open, label=label,
                              span_name=name, ctx=ctx)
            return
        self._count(judged, agent)
        if told:
            self._tell(trace_id, slot, attrs, told, label, name, ctx)

    def _note_tool(self, record: _Trace, span: ReadableSpan, trace_id: int, attrs: Any, call: ToolCall,
                   convention: Any) -> AgentSpan | None:
        """The trace's bookkeeping for a tool call that ended (caller holds the record's lock): the agents, the end
        times and the unread note. Returns the agent."""
        if self._late_agents.refs:
            self._learn_agents(trace_id, record)
        agents = record.agents
        # The trace's calls are read from its tool spans: none is derived from its model spans.
        record.tools_seen()
        record.tool_ended(span.end_time or 0)
        # Content found: only counted; not found: the span's unknown content-like keys are noted.
        captured = call.arguments_captured and call.result_captured
        record.unread_now().tool(attrs, call.arguments_captured, call.result_captured,
                                 () if captured else _events(span), None if captured else convention)
        return agents[-1] if agents else None

    def _llm_ended(self, span: ReadableSpan, attrs: Any) -> None:
        ctx = span.context
        trace_id = ctx.trace_id
        end = span.end_time
        now = end * 1e-9 if end else time.time()
        parent = span.parent
        slot = self._trace_slot(trace_id, now)
        with slot.lock:
            record = slot.state
            record.versions.note(_versions_of(self._read_versions, span, attrs), span.start_time or 0, ctx.span_id)
            if self._late_agents.refs:
                self._learn_agents(trace_id, record)
            key = record.key
            agent = record.agents[-1] if record.agents else None
            # One model call counts once (the SDK's own span beside an instrumentation's); without tool spans, tool
            # calls are derived from the model spans' messages.
            turn, lane = record.model_span(
                self._extractor, attrs, span.name, ctx.span_id, parent.span_id if parent is not None else None,
                span.start_time or 0, end or 0, context=False, agent=agent.name if agent is not None else None,
                with_news=record.judge is not None and record.judge.has_lanes)
            steps = record.turns_now().judge.add(turn) if turn is not None else []
            if lane is not None:
                steps = [*steps, lane]
            unread = record.unread_now()
            derived = sum(1 for step in steps if step.call is not None and step.kind == STEP_TOOL)
            if derived:
                unread.derived(derived)
        if steps:
            self._judge_steps(trace_id, slot, key, attrs, now, steps, agent, ctx=ctx,
                              label=self._extractor.agent_name(attrs, name=span.name), span_name=span.name)

    def _lane_span_ended(self, span: ReadableSpan, attrs: Any, name: str) -> None:
        """A span no tool or model convention reads that is a hand-off (Logfire's ``Handoff: A → B``)."""
        ctx = span.context
        parent = span.parent
        step = lane_step_of_span(attrs, name, ctx.span_id, parent.span_id if parent is not None else None,
                                 span.start_time or 0, span.end_time or 0)
        if step is None:
            if structure_span(attrs):  # an agent framework's CHAIN/task span: for the trace's unread note
                slot = self._trace_slot(ctx.trace_id, span.end_time * 1e-9 if span.end_time else time.time())
                with slot.lock:
                    slot.state.unread_now().other(attrs, ctx.span_id)
            return
        now = step.end_ns * 1e-9 if step.end_ns else time.time()
        slot = self._trace_slot(ctx.trace_id, now)
        with slot.lock:
            record = slot.state
            key = record.key
            agent = record.agents[-1] if record.agents else None
        self._judge_steps(ctx.trace_id, slot, key, attrs, now, [step], agent, ctx=ctx, label=step.agent,
                          span_name=name)

    def _judge_steps(self, trace_id: int, slot: Any, key: Hashable | None, attrs: Any, now: float, steps: list[Step],
                     agent: AgentSpan | None, *, parent_open: bool = False, label: str | None = None,
                     span_name: str = "", ctx: SpanContext | None = None) -> None:
        """Judge the steps one span gave (a tool call; a model call's usage and the calls derived from it)."""
        judge_slot = self._judge_slot(slot, key, attrs, now) if self._per_conversation else slot
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
            self._tell(trace_id, slot, attrs, told, label, span_name, ctx)

    def _count(self, judged: list[Step], agent: AgentSpan | None) -> None:
        """Count the tool calls judged: per tool name (handed to the metric once per drain when deferred) and for the
        open agent."""
        counts = self._tool_counts if self._deferred is not None else None
        for done in judged:
            done_call = done.call
            if done_call is not None and done.kind == STEP_TOOL:
                if counts is not None:
                    tool = done_call.tool
                    counts[tool] = counts.get(tool, 0) + 1
                else:
                    self._emitter.tool_call(done_call.tool)
                if agent is not None:
                    agent.tool_calls += 1

    def _tell(self, trace_id: int, slot: Any, attrs: Any, told: list[Judged], label: str | None, span_name: str,
              ctx: SpanContext | None) -> None:
        """Publish what judging told: the span event goes to the trace's innermost open agent span, else its root
        (looked up only now: most calls tell nothing)."""
        with slot.lock:
            target = self._target(trace_id, slot.state)
            versions = slot.state.versions.values()
        # An agent span whose attributes arrived after its start is recognised by what it carries now.
        label = (label or (self._extractor.agent_name(attrs, name=span_name) if span_name else None)
                 or _agent_of(self._extractor, target))
        conversation = conversation_id(attrs)
        for item in told:
            self._publish(trace_id, item, target, ctx, label, conversation, versions)

    def _agent_ended(self, span: ReadableSpan, attrs: Any) -> None:
        span_id = span.context.span_id
        end = span.end_time
        now = end * 1e-9 if end else time.time()
        slot = self._trace_slot(span.context.trace_id, now)
        with slot.lock:
            record = slot.state
            record.versions.note(_versions_of(self._read_versions, span, attrs), span.start_time or 0, span_id)
            record.agent_read(attrs, _failed(span))
            step = self._subagent_step(record, span, attrs)
            agents = record.agents
            for i in range(len(agents) - 1, -1, -1):
                if agents[i].span_id == span_id:
                    agent = agents.pop(i)
                    break
            else:
                # Recognised only now: its attributes were set after it started (strands, ADK, OpenLLMetry). Its
                # tool calls are those of the trace that ended while it was open.
                start, stop = span.start_time or 0, end or 0
                agent = AgentSpan(span_id, self._extractor.agent_name(attrs, name=span.name), None)
                agent.tool_calls = record.calls_between(start, stop)
            record.agent_name = agent.name or record.agent_name
            key = record.key
        self._emitter.agent_finished(agent.name, agent.tool_calls)
        if step is not None:
            self._judge_steps(span.context.trace_id, slot, key, attrs, now, [step], None, ctx=span.context,
                              label=step.agent, span_name=span.name)

    def _subagent_step(self, record: _Trace, span: ReadableSpan, attrs: Any) -> Step | None:
        """The sub-agent step of an agent span whose parent span is an open agent span of the trace (one known from
        its start, or one that started bare, named like one or the local root, and carries an agent convention's
        attributes now), else None (caller holds the record's lock)."""
        parent = span.parent
        if parent is None or parent.is_remote:
            return None
        parent_id = parent.span_id
        opened = next((a for a in record.agents if a.span_id == parent_id), None)
        if opened is not None:
            source = opened.name or _agent_of(self._extractor, opened.span())
        else:
            # Spans that started bare: named like agent spans, or the trace's local root.
            trace_id = span.context.trace_id
            root = self._roots.refs.get(trace_id)
            bare = [*self._late_agents.refs.get(trace_id, ()), *((root,) if root is not None else ())]
            source = next((_agent_of(self._extractor, s) for ref in bare
                           if (s := ref()) is not None and s.get_span_context().span_id == parent_id), None)
            if source is None:  # the parent is no agent span (or not one known here)
                return None
        return subagent_step(attrs, span.context.span_id, parent_id, span.start_time or 0, span.end_time or 0, source,
                             self._extractor.agent_name(attrs, name=span.name))

    def _root_ended(self, trace_id: int, root: ReadableSpan | None = None) -> None:
        self._roots.pop(trace_id, None)
        self._late_agents.refs.pop(trace_id, None)
        record = self._store.pop(trace_id)
        self._forget_slot(trace_id)
        if record is None:
            return
        if root is not None:
            record.versions.note(_versions_of(self._read_versions, root, _plain(root.attributes)), root.start_time or 0,
                                 root.context.span_id)
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
            return
        judge = record.judge
        if judge is None:
            self._task_ended(record, None, root)
            return
        # Inner spans held for a parent that never ended are judged now.
        for item in judge.finish(None):
            self._publish(trace_id, item, self._target(trace_id, record), None, None, None, record.versions.values())
        self._finished(judge, None)
        self._task_ended(record, judge, root)
        slot = self._finished_traces.slot(trace_id, time.time())
        if slot is not None:
            slot.state.verdict = judge.verdict
            slot.state.stop = judge.stop

    def _task_ended(self, record: _Trace, judge: TraceJudge | None, root: ReadableSpan | None) -> None:
        """Record the trace's task outcome and figures (its root span ended)."""
        if root is not None and _failed(root):
            record.failed = True
        start, end = (root.start_time, root.end_time) if root is not None else (None, None)
        self._emitter.task_finished(record.outcome(judge, record.agent_name, (start, end) if start and end else None))

    def _judge_pending(self, trace_id: int, record: _Trace, steps: list[Step]) -> None:
        """Judge derived calls at the trace's end (the record is out of the store: no other hook holds it)."""
        now = time.time()
        agent = record.agents[-1] if record.agents else None
        target = self._target(trace_id, record)
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
            if done.call is not None:
                self._emitter.tool_call(done.call.tool)
                if agent is not None:
                    agent.tool_calls += 1
        label = (agent.name if agent is not None else None) or _agent_of(self._extractor, target)
        for item in told:
            self._publish(trace_id, item, target, None, label, None, record.versions.values())

    def _report_unread(self, causes: list[Unread]) -> None:
        """Count unread spans; log each cause (reason and keys) once per processor."""
        for cause in causes:
            self._emitter.unread(cause.reason, cause.spans)
            if self._unread_logged.first(cause):
                _logger.warning("otel_loopguard: %s", message(cause))

    def _finished(self, judge: TraceJudge, evicted: str | None) -> None:
        self._emitter.trace_finished(judge.verdict.kind, judge.steps, judge.known_cost, evicted)

    def _evicted(self, key: Hashable, record: _Trace, reason: str) -> None:
        try:
            self._forget_slot(key)
            if isinstance(key, int):
                self._roots.pop(key, None)
            if record.judge is not None:
                self._finished(record.judge, reason)
        except Exception as exc:  # noqa: BLE001
            self._fail("evict", exc)

    def _publish(self, trace_id: int, judged: Judged, target: Span | None, context: SpanContext | None,
                 agent: str | None, conversation: str | None, versions: Versions = ()) -> None:
        event = verdict_event(judged, trace_id, LIVE, ended=context, agent=agent, conversation=conversation,
                              versions=versions)
        self._emitter.emit(event, target)
        for listener in self._listeners:
            try:
                listener(event)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                    raise  # Ctrl-C belongs to the application
                self._fail("listener", exc)
