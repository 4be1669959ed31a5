"""A decoded span, independent of where it came from.

The OTLP readers (files, ``serve``) decode into :class:`SpanRecord`; the
extractor reads the same fields from a live SDK span, so one extraction path
serves the processor, ``audit`` and ``serve``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct

from . import names as n

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class SpanRecord(Struct, frozen=True, gc=False):
    """One finished span as decoded from OTLP.

    An immutable value compared field by field, built through its constructor. Not tracked by the garbage
    collector: its fields hold decoded values only (numbers, strings, fresh dicts and tuples), which cannot
    refer back to it, and ``audit`` builds one per stored span.

    Attributes:
        trace_id: 128-bit trace id as an int.
        span_id: 64-bit span id as an int.
        parent_span_id: the parent's span id, or None for a root span.
        name: span name.
        start_ns: start time, ns since the epoch.
        end_ns: end time, ns since the epoch.
        attributes: span attributes; values are str, bool, int, float, bytes,
            tuples of those, or dicts (OTLP kvlist values).
        resource: resource attributes of the span's resource.
        status_error: True when the span status code is ERROR.
        status_message: the status description, "" when absent.
        events: (name, time_ns, attributes) of each span event.
    """

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    start_ns: int
    end_ns: int
    # One shared read-only empty mapping: a default is shared by every record.
    attributes: Mapping[str, Any] = _EMPTY
    resource: Mapping[str, Any] = _EMPTY
    status_error: bool = False
    status_message: str = ""
    events: tuple[tuple[str, int, Mapping[str, Any]], ...] = ()


def ended_in_error(status_error: bool, event_names: Iterable[str]) -> bool:
    """Whether a span ended in error: error status, or an ``exception`` event (recorded without setting a status)."""
    return status_error or any(name == n.EVENT_EXCEPTION for name in event_names)
