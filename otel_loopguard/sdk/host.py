"""What the live assembler asks of the processor (``Host`` in conventions/live.py), answered from the SDK's spans.

:class:`SpanHost` is the processor's base class: it keeps the indexes of open spans the hooks fill (local roots,
spans named like agent spans that started bare; sdk/open_spans.py), says where a span event goes and what agent an
open span carries now, and publishes verdict events to the emitter and the listeners. :class:`ErrorLog` counts and
logs the failures the processor catches, so nothing raises into the application.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span

from ..conventions.extract import ROLE_AGENT, Extractor
from ..conventions.live import LiveTrace
from ..conventions.verdicts import VerdictEvent
from .emit import Emitter
from .open_spans import LateAgents, Roots

# The processor's logger, by the name users filter it (failures here, each cause of unread input in the assembler).
logger = logging.getLogger("otel_loopguard.sdk.processor")

Listener = Callable[[VerdictEvent], None]

_EMPTY: dict[str, Any] = {}


def plain(attrs: Any) -> dict[str, Any]:
    """A span's attributes as a plain dict (never mutated by the caller).

    ``span.attributes`` is a ``MappingProxyType`` over the SDK's ``BoundedAttributes``, whose public
    ``copy()`` is one C-level dict copy; anything else is copied the slow way.
    """
    if attrs is None:
        return {}
    try:
        copied = attrs.copy()
    except AttributeError:
        return dict(attrs)
    return copied if type(copied) is dict else dict(attrs)


def agent_now(extractor: Extractor, span: Any) -> str | None:
    """The agent name a still-open span carries now (an agent span whose attributes arrived after its start)."""
    if span is None:
        return None
    try:
        attrs = plain(span.attributes)
    except Exception:  # noqa: BLE001 - a span of another SDK: no name
        return None
    if extractor.span_role(attrs, span.name) != ROLE_AGENT:
        return None
    return extractor.agent_name(attrs, name=span.name)


def _events(span: ReadableSpan) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """A span's events as (name, attributes), read only when needed (``span.events`` copies)."""
    for e in span.events:
        yield e.name, e.attributes or _EMPTY


class ErrorLog:
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
                logger.warning("otel_loopguard: %s failed (%s: %s); counting further failures silently",
                                where, kind, exc, exc_info=exc)
        except Exception:  # noqa: BLE001 - the error path itself must never raise into the host
            pass


class SpanHost:
    """The assembler's host over SDK spans: open-span indexes, span-event targets, agent names, publishing.

    Args:
        extractor: reads an open span's attributes through the convention table.
        emitter: where verdict events, metrics and counted failures go.
        max_traces: traces whose spans that started bare are remembered, at most.
    """

    def __init__(self, extractor: Extractor, emitter: Emitter, max_traces: int) -> None:
        self._extractor = extractor
        self._emitter = emitter
        self._fail = ErrorLog(emitter)
        self._listeners: list[Listener] = []
        # Local roots that did not start as GenAI spans, still alive, by trace id: for span events when no agent
        # span is open, and to mark their traces at the first GenAI span (GenAI roots go in their trace's record).
        # Weak values: an entry goes with its span, so this index is as large as the roots the application holds.
        self._roots = Roots()
        # Spans named like agent spans that started without attributes (see sdk/open_spans.py).
        self._late_agents = LateAgents(max_traces)
        self.late = self._late_agents.refs

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
                record.agent_opened(span_id, name, span.start_time or 0, span)

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

    def agent_of(self, span: Any) -> str | None:
        """The agent name an open span of this process carries now (None: no span, or no agent span)."""
        return agent_now(self._extractor, span)

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

    def _released(self, trace_id: int) -> None:
        """A trace's local root ended: its open-span entries go."""
        self._roots.pop(trace_id, None)
        self._late_agents.refs.pop(trace_id, None)
