"""``LoopGuardSpanProcessor``: the OpenTelemetry adapter over the live assembler (conventions/live.py).

What is specific to the SDK stays here: the hooks (as cheap as they can be: they run on the application's threads for
every span), the queue item handed to the worker, the spans held weakly (local roots, agent spans named so that
started bare), where a span event goes, the state store, the emitter and the harness API. What a span means for its
trace is the assembler's.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from ..conventions import names as n
from ..conventions.agent_steps import HANDOFF_MARKERS
from ..conventions.extract import ROLE_TOOL, Extractor
from ..conventions.live import EndedSpan, LiveAssembler, LiveTrace, agent_now
from ..conventions.live import plain as plain_attributes
from ..conventions.verdicts import VerdictEvent
from ..conventions.versions import version_stamps
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.model import NO_INTERVENTION, Intervention, ReviewRequest, Verdict, trace_id_of
from ..core.store import StateStore
from ..errors import ConfigError
from .emit import Emitter
from .open_spans import MAX_OPEN_TOOLS, LateAgents, OpenTools, Roots
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


def _events(span: ReadableSpan) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """A span's events as (name, attributes), read only when needed (``span.events`` copies)."""
    for e in span.events:
        yield e.name, e.attributes or _EMPTY


def _resource(span: Any) -> Mapping[str, Any]:
    """A span's resource attributes (the SDK's resource keeps one attributes object: the version reader caches it)."""
    resource = getattr(span, "resource", None)
    return resource.attributes if resource is not None else _EMPTY


# The hooks run for every span of the application, so they read an SDK span's attributes as the SDK stores them:
# ``span._attributes`` is its ``BoundedAttributes`` and ``._dict`` the plain dict inside (two C-level attribute reads).
# The public ``span.attributes`` costs a Python property, a Python ``__len__`` and a ``MappingProxyType``, and iterating
# it a Python ``__iter__``: together most of what the hooks cost for a span that is not a GenAI span. These are private
# names of the SDK: any span without them (another SDK, a ReadableSpan built by hand, a future SDK) is read through the
# public mapping instead (``AttributeError``), and tests/processor/test_hooks_safety.py checks both paths. The dict is
# only read, never changed or kept past the hook except when the span has ended (the SDK then refuses any change).


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
        engine = LoopEngine(self.config, review=review_handler is not None)
        self._engine = engine
        self._extractor = Extractor.from_config(self.config)
        # The attribute keys that make a span worth a look (the built-in conventions' and the user's).
        self._markers = self._extractor.marker_keys | HANDOFF_MARKERS
        # ... and the span names that make one (a GenAI tool span's, a user convention's span_name_prefix).
        self._marker_names = self._extractor.marker_names
        self._logger_provider = logger_provider
        self._emitter = Emitter(logger_provider, meter_provider, self.config.max_tool_names, engine.normalizer_version)
        # One record per trace (agent spans, root, judge), and per conversation when asked for.
        self._store: StateStore[LiveTrace] = StateStore(
            LiveTrace, self.config.max_traces, self.config.trace_ttl_seconds, self._evicted
        )
        # Traces whose root ended: what verdict() and check() still answer for them.
        self._finished_traces: StateStore[_Finished] = StateStore(
            _Finished, self.config.max_traces, self.config.trace_ttl_seconds
        )
        self._fail = _ErrorLog(self._emitter)
        self._listeners: list[Listener] = [] if review_handler is None else [self._reviews(review_handler)]
        self._stamps = version_stamps(self.config)
        self._is_shutdown = False
        # Local roots that did not start as GenAI spans, still alive, by trace id: for span events when no agent
        # span is open, and to mark their traces at the first GenAI span (GenAI roots go in their trace's record).
        # Weak values: an entry goes with its span, so this index is as large as the roots the application holds.
        self._roots = Roots()
        # Spans named like agent spans that started without attributes; open tool spans (see sdk/open_spans.py).
        self._late_agents, self._open_tools = LateAgents(self.config.max_traces), OpenTools(MAX_OPEN_TOOLS)
        self.late = self._late_agents.refs
        self._live = LiveAssembler(self.config, engine, self._extractor, self._store, self, self._emitter, _logger)
        self._deferred = (
            DeferredWork(self._process, max_queue, self._dropped, on_error=self._worker_failed,
                         on_drained=self._flush_counts) if deferred else None
        )
        self._submit = self._deferred.submit if self._deferred is not None else self._inline
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
            # start) costs two attribute reads and a truth test (see the note above); a span with attributes, one
            # pass over its keys. Only a GenAI span's attributes are copied (C-level), for the worker: the span is
            # still open, so they may change after this hook (no other thread has the span before it returns).
            try:
                attrs: Any = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attrs = span.attributes
            if attrs and not self._markers.isdisjoint(attrs):
                parent = span.parent
                is_root = parent is None or parent.is_remote
                plain = plain_attributes(attrs)  # classified as a copy: the table keeps the last dict it classified
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
            # the SDK's own dict (see the note above), immutable once the span ended, so the worker reads it as is.
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
                ctx = span.get_span_context()
                if not self._live.started(ctx.trace_id, ctx.span_id, span.name, item.attrs, _resource(span),
                                          span.start_time or 0, span, item.is_root) and item.is_root:
                    self._roots.add(ctx.trace_id, span)  # not a GenAI span after all: a plain local root
                return
            # What the assembler needs of the span, read once. ``attrs`` as on_end read them: the ended SDK span's
            # own (immutable) dict as is, else a copy of the public mapping (whose misses raise and catch KeyError).
            attrs = item.attrs
            if attrs.__class__ is not dict:
                attrs = plain_attributes(attrs if attrs is not None else span.attributes)
            ctx = span.context
            parent = span.parent
            status = span.status
            error = status.status_code is StatusCode.ERROR
            ended = EndedSpan(span, ctx, ctx.trace_id, ctx.span_id, parent.span_id if parent is not None else None,
                              span.name, span.start_time or 0, span.end_time or 0, attrs, _resource(span),
                              parent is None or parent.is_remote, error, status.description if error else None)
            if item.genai:
                self._live.ended(ended, item.parent_open)
            if item.is_root:
                self._root_ended(ended)
        except Exception as exc:  # noqa: BLE001 - never raise into the host application
            self._fail("on_start" if item.started else "on_end", exc)

    def _inline(self, item: _HookCall) -> None:
        """``deferred=False``: judge now, on the thread that ended the span, and count its tool calls."""
        self._process(item)
        if self._live.tool_counts:
            self._emitter.count_tool_calls(self._live.take_counts())

    def _root_ended(self, root: EndedSpan) -> None:
        """A local root ended: its trace is released (what verdict() and check() answer for it is kept)."""
        trace_id = root.trace_id
        self._roots.pop(trace_id, None)
        self._late_agents.refs.pop(trace_id, None)
        judge = self._live.finished(trace_id, root)
        if judge is not None:
            slot = self._finished_traces.slot(trace_id, time.time())
            if slot is not None:
                slot.state.verdict = judge.verdict
                slot.state.stop = judge.stop

    # -- what the assembler asks (conventions/live.py Host) ------------------

    #: A span's events as (name, attributes), read lazily.
    events = staticmethod(_events)

    def learn(self, trace_id: int, record: LiveTrace) -> None:
        """The trace's spans named like agent spans that started without attributes: those that carry an agent
        convention's attributes now become agent spans of its record, open from their start (outer first; caller
        holds the record's lock)."""
        if not self._late_agents.refs:
            return
        late = self._late_agents.pop(trace_id)
        if not late:
            return
        known = {a.span_id for a in record.agents}
        for span in sorted(late, key=lambda s: s.start_time or 0):
            span_id = span.get_span_context().span_id
            if span_id in known or not span.is_recording():
                continue
            name = agent_now(self._extractor, span)
            if name is not None:
                self._live.agent_started(record, span_id, name, span.start_time or 0, span)

    def target(self, trace_id: int, record: LiveTrace) -> Span | None:
        """Where a span event goes: the innermost open agent span, else the trace's local root (caller holds the
        record's lock; the record learns its root on first use, and its agent spans that started bare)."""
        self.learn(trace_id, record)
        if record.root is None:
            root = self._roots.get(trace_id)
            if root is not None:
                record.root = weakref.ref(root)
        agent = record.open_agent()
        span: Span | None = agent.span() if agent is not None else None
        if span is None and record.root is not None:
            span = record.root()
        return span

    def bare_agent(self, trace_id: int, span_id: int) -> str | None:
        """The agent name an open span of the trace that started bare (named like an agent span, or the local
        root) carries now, else None."""
        root = self._roots.refs.get(trace_id)
        bare = [*self._late_agents.refs.get(trace_id, ()), *((root,) if root is not None else ())]
        return next((agent_now(self._extractor, s) for ref in bare
                     if (s := ref()) is not None and s.get_span_context().span_id == span_id), None)

    def publish(self, event: VerdictEvent, target: Any) -> None:
        """Emit a verdict event (its span event on ``target``) and hand it to every listener."""
        self._emitter.emit(event, target)
        for listener in self._listeners:
            try:
                listener(event)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                    raise  # Ctrl-C belongs to the application
                self._fail("listener", exc)

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
        self._live.release_all()
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
        judge = self._live.judge_of(trace_id)
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
        judge = self._live.judge_of(trace_id)
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
        told = self._live.resolve(trace_id, approved)
        self._drain()  # hands the held event to the SDK
        return told[0].observation.intervention if told else NO_INTERVENTION  # type: ignore[return-value]

    def _reviews(self, handler: Callable[[ReviewRequest], None]) -> Listener:
        """A listener that hands each review to ``handler``, once, as a :class:`ReviewRequest`."""

        def listen(event: VerdictEvent) -> None:
            review = event.intervention
            if review is None or review.action != "review":
                return
            judge = self._live.judge_of(event.trace_id)
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

    def _evicted(self, key: Hashable, record: LiveTrace, reason: str) -> None:
        try:
            self._live.forget(key)
            if isinstance(key, int):
                self._roots.pop(key, None)
            if record.judge is not None:
                self._live.trace_finished(record.judge, reason)
        except Exception as exc:  # noqa: BLE001
            self._fail("evict", exc)

    def _flush_counts(self) -> None:
        """At the end of a drain: hand the tool calls counted since the last drain to the metric tally (once per tool
        name), and the events and histogram records held meanwhile to the SDK."""
        if self._live.tool_counts:
            self._emitter.count_tool_calls(self._live.take_counts())
        self._emitter.release(self._emit_failed)
