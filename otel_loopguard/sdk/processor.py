"""``LoopGuardSpanProcessor``: the OpenTelemetry SDK's adapter over the live assembler (conventions/live.py).

Here: the hooks (as cheap as they can be: they run on the application's threads for every span), the queue item
handed to the worker, the reading of an ended SDK span into the assembler's frozen :class:`EndedSpan`, and the
wiring. Its base classes hold the rest: :class:`~.harness_api.HarnessAPI` what the application asks (``verdict``,
``check``, ``resolve``, listeners, ``force_flush``, ``shutdown``), over :class:`~.host.SpanHost` what the assembler
asks (open spans, span-event targets, publishing, counted failures). What a span means for its trace is the
assembler's.
"""

from __future__ import annotations

import atexit
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from ..conventions import names as n
from ..conventions.agent_steps import HANDOFF_MARKERS
from ..conventions.extract import ROLE_TOOL, Extractor
from ..conventions.live import EndedSpan, LiveAssembler, LiveTrace
from ..conventions.versions import version_stamps
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.model import ReviewRequest
from ..core.store import StateStore
from ..errors import ConfigError
from .emit import Emitter
from .harness_api import HarnessAPI
from .host import logger
from .host import plain as plain_attributes
from .open_spans import MAX_OPEN_TOOLS, OpenTools
from .worker import DeferredWork


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


class LoopGuardSpanProcessor(HarnessAPI, SpanProcessor):
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
        self.config = config = config if config is not None else LoopGuardConfig.load()
        self._engine = engine = LoopEngine(config, review=review_handler is not None)
        extractor = Extractor.from_config(config)
        self._logger_provider = logger_provider
        emitter = Emitter(logger_provider, meter_provider, config.max_tool_names, engine.normalizer_version)
        HarnessAPI.__init__(self, config, extractor, emitter, review_handler)
        # The attribute keys that make a span worth a look (the built-in conventions' and the user's), and the span
        # names that make one (a GenAI tool span's, a user convention's span_name_prefix).
        self._markers, self._marker_names = extractor.marker_keys | HANDOFF_MARKERS, extractor.marker_names
        self._stamps = version_stamps(config)
        # Open tool spans, noted by the hooks (see sdk/open_spans.py).
        self._open_tools = OpenTools(MAX_OPEN_TOOLS)
        # One record per trace (agent spans, root, judge), and per conversation when asked for.
        self._store: StateStore[LiveTrace] = StateStore(
            LiveTrace, config.max_traces, config.trace_ttl_seconds, self._evicted
        )
        self._live = LiveAssembler(config, engine, extractor, self._store, self, emitter, logger)
        self._deferred = (
            DeferredWork(self._process, max_queue, self._dropped, on_error=self._worker_failed,
                         on_drained=self._drained) if deferred else None
        )
        self._submit = self._deferred.submit if self._deferred is not None else self._inline
        if self._deferred is not None:
            # Events and histogram records leave at the end of each drain, a batch at a time (see Emitter.hold).
            emitter.hold()
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
        """``deferred=False``: judge now, on the thread that ended the span, and count its tool calls (nothing is
        held for release inline: the emitter holds only for the worker)."""
        self._process(item)
        if self._live.tool_counts:
            self._drained()
