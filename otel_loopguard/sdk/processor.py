"""``LoopGuardSpanProcessor``: the OpenTelemetry shell around the engine."""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from ..conventions import names as n
from ..conventions.extract import (
    ROLE_AGENT,
    ROLE_LLM,
    ROLE_TOOL,
    Extractor,
    conversation_id,
    is_mcp_client,
)
from ..conventions.model_calls import TurnJudge
from ..conventions.unread import Unread, UnreadTrace, message
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine, TraceState
from ..core.model import NO_INTERVENTION, Intervention, Observation, Verdict
from ..core.store import StateStore
from ..errors import ConfigError
from .emit import Emitter, VerdictEvent
from .worker import DeferredWork

_logger = logging.getLogger(__name__)

Listener = Callable[[VerdictEvent], None]

# Kinds of queued hook calls (identity-compared markers).
_STARTED = "started"
_ENDED = "ended"


def _remember(table: dict[int, Any], key: int, value: Any, limit: int) -> None:
    """Set ``table[key]``, dropping the oldest entry beyond ``limit`` (safe against concurrent removal)."""
    table[key] = value
    if len(table) > limit:
        try:
            del table[next(iter(table))]
        except (KeyError, StopIteration, RuntimeError):
            pass  # another thread changed the table meanwhile; the next insert trims again


def _events(span: ReadableSpan) -> Any:
    """A span's events as (name, attributes), read only when the convention needs them (``span.events`` copies)."""
    for e in span.events:
        yield e.name, e.attributes or _EMPTY


def _drain_at_exit(ref: weakref.ref[LoopGuardSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._drain()


_EMPTY: dict[str, Any] = {}
_TOOL_SPAN_PREFIX = n.EXECUTE_TOOL_SPAN_PREFIX
# Tool-call end times kept per open trace, and causes of unread input logged per processor, at most.
_MAX_TOOL_ENDS = 4096
_MAX_UNREAD_LOGGED = 256


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


class _Agent:
    __slots__ = ("name", "span", "span_id", "tool_calls")

    def __init__(self, span_id: int, name: str | None, span: Span) -> None:
        self.span_id = span_id
        self.name = name
        self.span = span
        self.tool_calls = 0


class _OpenTrace:
    """Spans of one trace that are still open (its agent and tool spans), its model turns and what went unread."""

    __slots__ = ("agents", "tool_ends", "tools", "turns", "unread")

    def __init__(self) -> None:
        self.agents: list[_Agent] = []
        self.tools: set[int] = set()
        # Model calls counted once; tool calls derived from them while the trace has no tool span.
        self.turns = TurnJudge()
        self.unread = UnreadTrace()
        # End times of the trace's tool calls (bounded), for agent spans recognised only when they end.
        self.tool_ends: list[int] = []


class _OpenSpans:
    """Bounded map trace id → open spans; the oldest trace is dropped beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._traces: OrderedDict[int, _OpenTrace] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, trace_id: int, create: bool) -> _OpenTrace | None:
        """The open spans of a trace (caller holds ``lock``)."""
        entry = self._traces.get(trace_id)
        if entry is None and create:
            entry = self._traces[trace_id] = _OpenTrace()
            if len(self._traces) > self._limit:
                self._traces.popitem(last=False)
        return entry

    def pop(self, trace_id: int) -> _OpenTrace | None:
        """Forget a trace (caller holds ``lock``)."""
        return self._traces.pop(trace_id, None)


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
    ) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ConfigError(f"max_queue must be a positive integer, got {max_queue!r}")
        self.config = config if config is not None else LoopGuardConfig.load()
        self._engine = LoopEngine(self.config)
        self._extractor = Extractor.from_config(self.config)
        self._markers = self._extractor.marker_keys
        self._logger_provider = logger_provider
        self._emitter = Emitter(logger_provider, meter_provider, self.config.max_tool_names,
                                self._engine.normalizer_version)
        self._store: StateStore[TraceState] = StateStore(
            self._new_state, self.config.max_traces, self.config.trace_ttl_seconds, self._evicted
        )
        self._open = _OpenSpans(self.config.max_traces)
        self._fail = _ErrorLog(self._emitter)
        self._listeners: list[Listener] = []
        # Causes of unread input already logged (each once).
        self._unread_logged: set[tuple[str, tuple[str, ...]]] = set()
        # Conversation keys are used only when asked for; the alias map lets verdict(trace_id) find them.
        self._aliases: OrderedDict[int, Hashable] = OrderedDict()
        self._stamps = {
            n.VERSION_ATTRIBUTES[k]: v for k, v in self.config.versions.items()
        }
        self._is_shutdown = False
        # Open local roots, and traces known to hold GenAI spans (so their root's end is queued); both bounded.
        self._max_open = self.config.max_traces
        self._roots: dict[int, weakref.ref[Span]] = {}
        self._genai: dict[int, bool] = {}
        self._deferred = DeferredWork(self._process, max_queue, self._dropped) if deferred else None
        self._submit = self._deferred.submit if self._deferred is not None else self._process
        if self._deferred is not None:
            # Drain at exit before the providers' own atexit shutdowns (registered earlier, so run later).
            atexit.register(_drain_at_exit, weakref.ref(self))

    # -- SpanProcessor hooks -------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Stamp versions; queue the start of agent and tool spans (and GenAI roots) for bookkeeping."""
        try:
            if self._stamps:
                span.set_attributes(self._stamps)
            parent = span.parent
            if parent is None or parent.is_remote:
                # Any local root may have to carry a span event (when no agent span is open). A weak
                # reference, so an ended root frees itself and non-GenAI traces need no work at their end;
                # the table itself stays bounded by trimming the oldest entries.
                _remember(self._roots, span.get_span_context().trace_id, weakref.ref(span), self._max_open)
            # Runs for every span, so the usual case (no attributes yet: instrumentations mostly set them after
            # start) costs one len(). Otherwise one C-level copy: iterating a live span's attributes copies the
            # keys under a lock, and each Mapping.get miss raises and catches KeyError.
            attrs = span.attributes
            if attrs:
                attrs = _plain(attrs)
                if not self._markers.isdisjoint(attrs):
                    # The worker works out the role; the trace is marked as GenAI when the span ends.
                    self._submit((_STARTED, span, None, attrs, False))
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_start", exc)

    def on_end(self, span: ReadableSpan) -> None:
        """Queue (or, inline, judge) GenAI spans and the roots of their traces; other spans cost a set check."""
        if self._is_shutdown:
            return
        try:
            # Most spans are not GenAI spans: one pass over the ended (immutable, so lock-free) keys rejects them
            # (a GenAI tool span name without attributes is one too: ADK for JS when the tool raised).
            if not self._markers.isdisjoint(span.attributes or ()) or span.name.startswith(_TOOL_SPAN_PREFIX):
                trace_id = span.context.trace_id
                parent = span.parent
                is_root = parent is None or parent.is_remote
                if is_root:
                    self._genai.pop(trace_id, None)
                    self._roots.pop(trace_id, None)
                else:
                    _remember(self._genai, trace_id, True, self._max_open)
                self._submit((_ENDED, span, True, None, is_root))
            elif self._genai and span.context.trace_id in self._genai:
                parent = span.parent
                if parent is None or parent.is_remote:
                    # The root of a trace that had GenAI spans: release the trace's state.
                    trace_id = span.context.trace_id
                    self._roots.pop(trace_id, None)
                    self._genai.pop(trace_id, None)
                    self._submit((_ENDED, span, False, None, True))
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_end", exc)

    def _process(self, item: tuple[Any, ...]) -> None:
        """Do the work of one queued hook call (on the worker, or inline); never raises."""
        kind, span, a, b, is_root = item
        try:
            if kind is _STARTED:
                self._started(span, a, b, is_root)
                return
            if a:
                # Every further read is a plain dict lookup (see on_start for why not the mapping itself).
                attrs = _plain(span.attributes)
                role = self._extractor.span_role(attrs, span.name)
                if role == ROLE_TOOL:
                    self._tool_ended(span, attrs)
                elif role == ROLE_LLM:
                    self._llm_ended(span, attrs)
                elif role == ROLE_AGENT:
                    self._agent_ended(span, attrs)
            if is_root:
                self._root_ended(span.context.trace_id)
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_end" if kind is _ENDED else "on_start", exc)

    def _started(self, span: Span, role: str | None, attrs: Any, is_root: bool) -> None:
        role = self._extractor.span_role(attrs, span.name)
        if role is None:
            return
        ctx = span.get_span_context()
        with self._open.lock:
            entry = self._open.get(ctx.trace_id, create=True)
            assert entry is not None  # create=True always returns an entry
            if role == ROLE_AGENT:
                entry.agents.append(_Agent(ctx.span_id, self._extractor.agent_name(attrs, name=span.name), span))
            elif role == ROLE_TOOL:
                entry.tools.add(ctx.span_id)

    def _dropped(self) -> None:
        self._fail.count_only("queue_full")

    def shutdown(self) -> None:
        """Release every trace (recording its final metrics); later spans are ignored. Safe to call twice."""
        if self._is_shutdown:
            return
        if self._deferred is not None:
            self._deferred.shutdown()
        self._is_shutdown = True
        for key in self._store.tracked_keys():
            state = self._store.pop(key)
            if state is not None:
                self._finished(state, None)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Judge every queued span, then flush the logger provider, so pending verdict events leave now."""
        self._drain()
        provider = self._logger_provider
        flush = getattr(provider, "force_flush", None)
        if flush is None:
            return True
        try:
            return bool(flush(timeout_millis))
        except Exception as exc:  # noqa: BLE001
            self._fail("force_flush", exc)
            return False

    # -- harness API ---------------------------------------------------------

    def verdict(self, trace_id: int) -> Verdict | None:
        """The current verdict of a trace, or None when it is not tracked (no tool call yet, or finished)."""
        self._drain()
        state = self._store.get(self._aliases.get(trace_id, trace_id))
        return state.verdict if state is not None else None

    def check(self, trace_id: int | None = None) -> Intervention:
        """What the harness should do now for a trace (the current span's trace when None).

        Returns:
            ``stop`` once the trace was stopped (it stays stopped), ``nudge`` right after the call that
            triggered one, else an intervention whose action is ``none``.
        """
        if trace_id is None:
            trace_id = trace.get_current_span().get_span_context().trace_id
        self._drain()
        state = self._store.get(self._aliases.get(trace_id, trace_id))
        if state is None:
            return NO_INTERVENTION
        if state.stop is not None:
            return state.stop
        return state.last_intervention or NO_INTERVENTION

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every transition and intervention.

        Deferred (the default), listeners run on the background thread, or on the thread that called
        :meth:`check`, :meth:`verdict` or :meth:`force_flush` when that drained the queue; inline, on the
        thread that ended the span.

        A listener that raises is counted as a processor error; it never reaches the application.
        """
        self._listeners.append(listener)

    @property
    def errors(self) -> int:
        """Failures caught inside the hooks so far (after judging every queued span)."""
        self._drain()
        return self._fail.count

    @property
    def tracked_traces(self) -> int:
        """Traces with state now (after judging every queued span)."""
        self._drain()
        return len(self._store)

    # -- internals -----------------------------------------------------------

    def _drain(self) -> None:
        if self._deferred is not None:
            try:
                self._deferred.drain()
            except Exception as exc:  # noqa: BLE001
                self._fail("drain", exc)

    def _new_state(self) -> TraceState:
        self._emitter.trace_started()
        return self._engine.new_state()

    def _state_key(self, trace_id: int, attrs: Any) -> Hashable:
        if not self.config.per_conversation:
            return trace_id
        conversation = conversation_id(attrs)
        if conversation is None:
            return trace_id
        key = ("conversation", conversation)
        aliases = self._aliases
        if trace_id not in aliases:
            aliases[trace_id] = key
            if len(aliases) > self.config.max_traces:
                aliases.popitem(last=False)
        return key

    def _tool_ended(self, span: ReadableSpan, attrs: Any) -> None:
        ctx = span.context
        trace_id = ctx.trace_id
        parent = span.parent
        # Without an open agent span, a verdict's span event goes on the trace's local root.
        root_ref = self._roots.get(trace_id)
        fallback = root_ref() if root_ref is not None else None
        with self._open.lock:
            entry = self._open.get(trace_id, create=True)
            assert entry is not None  # create=True always returns an entry
            entry.tools.discard(ctx.span_id)
            if is_mcp_client(attrs) and parent is not None and parent.span_id in entry.tools:
                return  # the enclosing execute_tool span is the same call; count it once
            # The trace's calls are read from its tool spans: none is derived from its model spans.
            entry.turns.tool_span_seen()
            if len(entry.tool_ends) < _MAX_TOOL_ENDS:
                entry.tool_ends.append(span.end_time or 0)
            agent = entry.agents[-1] if entry.agents else None
            if agent is not None:
                agent.tool_calls += 1
            target = agent.span if agent is not None else fallback
        status = span.status
        status_error = status.status_code is StatusCode.ERROR
        call = self._extractor.tool_call(
            attrs,
            span_name=span.name,
            start_ns=span.start_time,
            end_ns=span.end_time,
            status_error=status_error,
            status_message=status.description,
            # Read only when the convention keeps content in events or the call failed.
            events=_events(span),
        )
        with self._open.lock:
            # Content found: only counted; not found: the span's unknown content-like keys are noted.
            entry.unread.tool(attrs, call.arguments_captured, call.result_captured, _events(span),
                              self._extractor.convention(attrs, span.name)
                              if not (call.arguments_captured and call.result_captured) else None)
        now = call.end if call.end is not None else time.time()
        key = self._state_key(trace_id, attrs)
        slot = self._store.slot(key, now)
        assert slot is not None
        with slot.lock:
            state = slot.state
            observation = self._engine.observe(state, call, now)
            steps = state.steps
        self._emitter.tool_call(call.tool)
        if observation.transition is not None or observation.intervention is not None:
            agent_label = ((agent.name if agent is not None else None)
                           or self._extractor.agent_name(attrs, name=span.name) or _agent_of(self._extractor, target))
            self._publish(trace_id, ctx, observation, call.tool, agent_label, conversation_id(attrs), steps,
                          span.end_time, target)

    def _llm_ended(self, span: ReadableSpan, attrs: Any) -> None:
        ctx = span.context
        trace_id = ctx.trace_id
        parent = span.parent
        with self._open.lock:
            entry = self._open.get(trace_id, create=True)
            assert entry is not None  # create=True always returns an entry
            entry.unread.model(attrs)
            turn = self._extractor.model_turn(
                attrs, span.name, ctx.span_id, parent.span_id if parent is not None else None, span.start_time or 0,
                span.end_time or 0, messages=entry.turns.derive, context=False)
            steps = entry.turns.add(turn) if turn is not None else []
            if steps:
                entry.unread.derived(sum(1 for step in steps if step.call is not None))
        for step in steps:
            if step.call is not None:
                self._derived_ended(trace_id, ctx, step.call, attrs, step.end_ns)
            elif step.usage is not None:
                self._usage(span, attrs, step.model, step.usage)

    def _usage(self, span: ReadableSpan, attrs: Any, model: str | None, usage: Any) -> None:
        trace_id = span.context.trace_id
        now = span.end_time * 1e-9 if span.end_time else time.time()
        slot = self._store.slot(self._state_key(trace_id, attrs), now)
        assert slot is not None
        with slot.lock:
            observation = self._engine.add_usage(slot.state, model, usage)
            steps = slot.state.steps
        if observation is not None:
            with self._open.lock:
                entry = self._open.get(trace_id, create=False)
                target = None
                if entry is not None:
                    root_ref = self._roots.get(trace_id)
                    target = entry.agents[-1].span if entry.agents else (root_ref() if root_ref else None)
            self._publish(trace_id, span.context, observation, None, self._extractor.agent_name(attrs),
                          conversation_id(attrs),
                          steps, span.end_time, target)

    def _derived_ended(self, trace_id: int, span_context: Any, call: Any, attrs: Any, end_ns: int) -> None:
        """A tool call read from model spans (the trace has no tool span): judged like any other."""
        root_ref = self._roots.get(trace_id)
        fallback = root_ref() if root_ref is not None else None
        with self._open.lock:
            entry = self._open.get(trace_id, create=False)
            agent = entry.agents[-1] if entry is not None and entry.agents else None
            if agent is not None:
                agent.tool_calls += 1
            if entry is not None and len(entry.tool_ends) < _MAX_TOOL_ENDS:
                entry.tool_ends.append(end_ns)
        target = agent.span if agent is not None else fallback
        now = call.end if call.end is not None else time.time()
        slot = self._store.slot(self._state_key(trace_id, attrs), now)
        assert slot is not None
        with slot.lock:
            observation = self._engine.observe(slot.state, call, now)
            steps = slot.state.steps
        self._emitter.tool_call(call.tool)
        if observation.transition is not None or observation.intervention is not None:
            agent_label = (agent.name if agent is not None else None) or _agent_of(self._extractor, target)
            self._publish(trace_id, span_context, observation, call.tool, agent_label, conversation_id(attrs), steps,
                          end_ns, target)

    def _agent_ended(self, span: ReadableSpan, attrs: Any) -> None:
        span_id = span.context.span_id
        with self._open.lock:
            entry = self._open.get(span.context.trace_id, create=True)
            assert entry is not None  # create=True always returns an entry
            entry.unread.model(attrs)
            for i in range(len(entry.agents) - 1, -1, -1):
                if entry.agents[i].span_id == span_id:
                    agent = entry.agents.pop(i)
                    break
            else:
                # Recognised only now: its attributes were set after it started (strands, ADK, OpenLLMetry). Its
                # tool calls are those of the trace that ended while it was open.
                start, end = span.start_time or 0, span.end_time or 0
                calls = sum(1 for t in entry.tool_ends if start <= t <= end)
                agent = _Agent(span_id, self._extractor.agent_name(attrs, name=span.name), None)  # type: ignore[arg-type]
                agent.tool_calls = calls
        self._emitter.agent_finished(agent.name, agent.tool_calls)

    def _root_ended(self, trace_id: int) -> None:
        with self._open.lock:
            entry = self._open.pop(trace_id)
        if entry is not None:
            # Calls derived from model spans that never got a result are judged now, without one.
            pending = entry.turns.finish()
            entry.unread.derived(len(pending))
            for step in pending:
                if step.call is not None:
                    self._derived_ended(trace_id, None, step.call, {}, step.end_ns)
            self._report_unread(entry.unread.causes())
        key = self._aliases.pop(trace_id, trace_id)
        if isinstance(key, tuple):
            return  # conversation state outlives one trace; its TTL releases it
        state = self._store.pop(key)
        if state is not None:
            self._finished(state, None)

    def _report_unread(self, causes: list[Unread]) -> None:
        """Count unread spans; log each cause (reason and keys) once per processor."""
        for cause in causes:
            self._emitter.unread(cause.reason, cause.spans)
            key = (cause.reason, cause.keys)
            if key not in self._unread_logged and len(self._unread_logged) < _MAX_UNREAD_LOGGED:
                self._unread_logged.add(key)
                _logger.warning("otel_loopguard: %s", message(cause))

    def _finished(self, state: TraceState, evicted: str | None) -> None:
        cost = state.cost
        seen_usage = cost.usd > 0 or cost.unpriced_tokens > 0
        self._emitter.trace_finished(state.verdict.kind, state.steps, cost.usd if seen_usage else None, evicted)

    def _evicted(self, key: Hashable, state: TraceState, reason: str) -> None:
        try:
            self._finished(state, reason)
            if isinstance(key, int):
                # The trace's bookkeeping goes with its state, so those tables share the store's idle TTL.
                self._roots.pop(key, None)
                self._genai.pop(key, None)
                with self._open.lock:
                    self._open.pop(key)
        except Exception as exc:  # noqa: BLE001
            self._fail("evict", exc)

    def _publish(self, trace_id: int, span_context: Any, observation: Observation, tool: str | None,
                 agent: str | None, conversation: str | None, steps: int, timestamp_ns: int | None,
                 target: Span | None) -> None:
        event = VerdictEvent(
            trace_id=trace_id,
            span_context=span_context,
            verdict=observation.verdict,
            transition=observation.transition,
            intervention=observation.intervention,
            tool=tool,
            agent=agent,
            conversation=conversation,
            signature_digest=observation.signature_digest,
            steps=steps,
            timestamp_ns=timestamp_ns,
        )
        self._emitter.emit(event, target)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - a user's listener must not break the host either
                self._fail("listener", exc)
