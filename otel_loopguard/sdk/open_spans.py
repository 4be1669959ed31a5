"""What the application thread keeps about open spans, for the processor's hooks.

The hooks run on the application's threads for every span, so these indexes are plain dicts, read and changed
without a lock (each operation is one dict operation; a race can only forget an entry early), bounded, and hold
spans weakly: local roots that are not GenAI spans, spans named like agent spans that started without attributes,
and the ids of tool spans that started with their attributes and have not ended.
"""

from __future__ import annotations

import weakref

from opentelemetry.sdk.trace import Span
from opentelemetry.trace import SpanContext

#: Open agent spans remembered per trace, at most (the innermost open one receives the span events).
MAX_OPEN_AGENTS = 64
#: Open tool spans remembered per processor, at most (an inner span of one of them waits to be joined with it).
MAX_OPEN_TOOLS = 1 << 16


class Roots:
    """Local roots by trace id, held weakly: an entry goes when its span is freed, so the index is never larger
    than the set of roots the application itself still holds (a dict of weak references, tested in C by
    membership on the application's thread)."""

    __slots__ = ("__weakref__", "refs")

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[Span]] = {}

    def add(self, trace_id: int, span: Span) -> None:
        refs = self.refs
        own = weakref.ref(self)

        def gone(ref: weakref.ref[Span]) -> None:
            index = own()
            # Only this reference's entry: the trace id may have a newer root since.
            if index is not None and index.refs.get(trace_id) is ref:
                index.refs.pop(trace_id, None)

        refs[trace_id] = weakref.ref(span, gone)

    def get(self, trace_id: int) -> Span | None:
        ref = self.refs.get(trace_id)
        return ref() if ref is not None else None

    def pop(self, trace_id: int, default: None = None) -> None:
        self.refs.pop(trace_id, None)


class OpenTools:
    """Span ids of the tool spans that started with their attributes and have not ended, noted by the application
    thread in ``on_start`` and dropped in ``on_end``, which tells the worker whether a span's parent is still open.
    No start item is queued for them. At most ``limit`` ids (the oldest forgotten: a span that never ends)."""

    __slots__ = ("ids", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ids: dict[int, None] = {}

    def add(self, span_id: int) -> None:
        ids = self.ids
        if len(ids) >= self.limit:
            try:
                del ids[next(iter(ids))]
            except (StopIteration, KeyError, RuntimeError):
                pass  # changed by another application thread meanwhile
        ids[span_id] = None

    def ended(self, span_id: int, parent: SpanContext | None) -> bool:
        """Forget an ended span; returns whether its parent is an open tool span."""
        ids = self.ids
        if not ids:
            return False
        ids.pop(span_id, None)
        return parent is not None and parent.span_id in ids


class LateAgents:
    """Spans named like agent spans that started without attributes, by trace id: held weakly (an ended, freed span
    goes), at most ``limit`` traces (the oldest forgotten)."""

    __slots__ = ("limit", "refs")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.refs: dict[int, list[weakref.ref[Span]]] = {}

    def add(self, trace_id: int, span: Span) -> None:
        refs = self.refs
        entry = refs.get(trace_id)
        if entry is None:
            if len(refs) >= self.limit:
                try:
                    del refs[next(iter(refs))]
                except (StopIteration, KeyError, RuntimeError):
                    pass  # changed by the worker meanwhile
            entry = refs[trace_id] = []
        if len(entry) < MAX_OPEN_AGENTS:
            entry.append(weakref.ref(span))

    def pop(self, trace_id: int) -> list[Span]:
        entry = self.refs.pop(trace_id, None)
        if not entry:
            return []
        return [span for ref in entry if (span := ref()) is not None]
