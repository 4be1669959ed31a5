"""Typed OTLP/JSON decoding: the common shape of an export request straight to :class:`SpanRecord`.

msgspec parses the request into the structs below, checking the types of the fields loopguard reads
and skipping the ones it ignores, so the conversion only checks what a type cannot say (id lengths,
digit strings, enum ranges). It accepts a strict subset of what the general decoder in
:mod:`._otlp_json` accepts; snake_case or legacy field names, unknown fields inside a value, JSON
null where a value is expected, malformed values, a root that is an array and the like make
:func:`decode_typed` return None, and the caller decodes the same text with the general decoder,
which accepts it or names the error. For what both accept they build identical records (a
differential test checks it), so this module changes only the speed of reading. The one difference:
a number of more than 4,300 digits in a field loopguard ignores is skipped here, where ``json.loads``
refuses the whole request (Python's limit on converting digit strings).
"""

from __future__ import annotations

from typing import Any, cast

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ..conventions.span import SpanRecord
from ..core.cache import BoundedCache
from .json_general import (
    _UINT64_LIMIT,
    STATUS_CODES,
    STATUS_ERROR,
    _Bad,
    _bytes,
    _double,
    _event,
    _int64,
    any_value,
    hex_id,
)

__all__ = ["decode_typed"]


class _Fallback(Exception):
    """Internal: not the common shape; the general decoder must take the whole request."""


# The structs are not tracked by the cyclic collector (gc=False): they never hold a cycle.
# AnyValue has seven fields and one is set; an unknown field (the snake_case spellings the general decoder also
# takes, in document order with the others) makes the value, and so the request, the general decoder's. Not
# declaring the snake_case names keeps the struct small: it is built for every attribute.
class _Value(Struct, gc=False, forbid_unknown_fields=True):
    stringValue: str | UnsetType = UNSET
    intValue: str | int | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    doubleValue: float | int | str | UnsetType = UNSET
    arrayValue: Raw | UnsetType = UNSET
    kvlistValue: Raw | UnsetType = UNSET
    bytesValue: str | UnsetType = UNSET


class _KeyValue(Struct, gc=False):
    key: str
    value: _Value | None = None


class _Status(Struct, gc=False):
    code: int | str | None = None
    message: str | None = None


class _Span(Struct, gc=False):
    traceId: str | UnsetType = UNSET
    spanId: str | UnsetType = UNSET
    parentSpanId: str | None = None
    name: str | None = None
    # OTLP/JSON writes 64-bit integers as strings; some exporters write numbers.
    startTimeUnixNano: str | int | UnsetType = UNSET
    endTimeUnixNano: str | int | UnsetType = UNSET
    attributes: list[_KeyValue] | None = None
    status: _Status | None = None
    events: Raw | UnsetType = UNSET
    trace_id: Raw | UnsetType = UNSET
    span_id: Raw | UnsetType = UNSET
    parent_span_id: Raw | UnsetType = UNSET
    start_time_unix_nano: Raw | UnsetType = UNSET
    end_time_unix_nano: Raw | UnsetType = UNSET


class _ScopeSpans(Struct, gc=False):
    spans: list[_Span] | None = None


class _Resource(Struct, gc=False):
    attributes: list[_KeyValue] | None = None


class _ResourceSpans(Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] | None = None
    scope_spans: Raw | UnsetType = UNSET
    instrumentationLibrarySpans: Raw | UnsetType = UNSET
    instrumentation_library_spans: Raw | UnsetType = UNSET


class _Request(Struct, gc=False):
    resourceSpans: list[_ResourceSpans] | None = None
    resource_spans: Raw | UnsetType = UNSET


_decode_request = msgspec.json.Decoder(_Request).decode
_decode_any = msgspec.json.Decoder().decode
# Whatever msgspec refuses (wrong types, lone surrogates, numbers out of range, invalid JSON) is the general
# decoder's to accept or report.
_REFUSALS = (msgspec.MsgspecError, RecursionError, UnicodeEncodeError, ValueError)


def _load(raw: Raw) -> Any:
    try:
        return _decode_any(raw)
    except _REFUSALS:
        raise _Fallback from None


# The spans of a trace share its id and siblings share a parent, so each distinct id is converted once.
_ID_CACHE_ENTRIES = 4096
_TRACE_IDS: BoundedCache[str, int] = BoundedCache(_ID_CACHE_ENTRIES)
_PARENT_IDS: BoundedCache[str, int] = BoundedCache(_ID_CACHE_ENTRIES)


def _cached_id(cache: BoundedCache[str, int], text: str, digits: int) -> int:
    number = cache.get(text)
    if number is None:
        number = hex_id(text, digits)
        if number is None:
            raise _Fallback
        cache.put(text, number)
    return number


def _events(raw: Any) -> tuple[tuple[str, int, dict[str, Any]], ...]:
    """A span's decoded ``events``: a list, or a falsy value for none."""
    if not raw:
        return ()
    if raw.__class__ is not list:
        raise _Fallback
    try:
        return tuple(_event(event, index) for index, event in enumerate(raw))
    except _Bad:
        raise _Fallback from None


def decode_typed(data: bytes | str) -> list[SpanRecord] | None:
    """The spans of one OTLP/JSON export request, or None when it is not in the common shape.

    Never raises for bad input: None sends the caller to the general decoder, which reports it.
    """
    if data.__class__ is bytes and not data.isascii():
        # msgspec skips ignored fields without checking their UTF-8, which json.loads refuses.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        request = _decode_request(data)
    except _REFUSALS:
        return None
    try:
        return _spans_of(request)
    except _Fallback:
        return None


def _spans_of(request: _Request) -> list[SpanRecord]:
    if request.resource_spans is not UNSET:
        raise _Fallback
    out: list[SpanRecord] = []
    append = out.append
    for rs in request.resourceSpans or ():
        if (rs.scope_spans is not UNSET or rs.instrumentationLibrarySpans is not UNSET
                or rs.instrumentation_library_spans is not UNSET):
            raise _Fallback
        res = rs.resource
        resource = _attributes(res.attributes) if res is not None else {}
        for ss in rs.scopeSpans or ():
            for span in ss.spans or ():
                append(_span(span, resource))
    return out


def _span(span: _Span, resource: dict[str, Any]) -> SpanRecord:
    if (span.trace_id is not UNSET or span.span_id is not UNSET or span.parent_span_id is not UNSET
            or span.start_time_unix_nano is not UNSET or span.end_time_unix_nano is not UNSET):
        raise _Fallback
    trace_id = _cached_id(_TRACE_IDS, span.traceId, 32)  # type: ignore[arg-type]
    span_id = hex_id(span.spanId, 16)
    if span_id is None:
        raise _Fallback
    parent = span.parentSpanId
    parent_id = _cached_id(_PARENT_IDS, parent, 16) if parent else None  # "" or null: a root
    # Under 20 digits a uint64 cannot overflow.
    start = _time(span.startTimeUnixNano)
    end = _time(span.endTimeUnixNano)
    kvs = span.attributes
    attrs = _attributes(kvs) if kvs else {}
    error = False
    message = ""
    status = span.status
    if status is not None:
        code = status.code
        if code is not None:
            # A number or a name (STATUS_CODE_ERROR) of the enum; anything else is the general decoder's to refuse.
            number = STATUS_CODES.get(code)
            if number is None:
                raise _Fallback
            error = number == STATUS_ERROR
        if status.message is not None:
            message = status.message
    events = _events(_load(span.events)) if span.events is not UNSET else ()
    name = span.name
    return SpanRecord(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent_id, name="" if name is None else name,
        start_ns=start, end_ns=end, attributes=attrs, resource=resource, status_error=error, status_message=message,
        events=events,
    )


def _time(value: str | int | UnsetType) -> int:
    if value.__class__ is str:
        # Under 20 digits a uint64 cannot overflow.
        if len(value) < 20 and value.isdigit() and value.isascii():
            return int(value)
    elif value.__class__ is int and 0 <= value < _UINT64_LIMIT:
        return value
    raise _Fallback


def _attributes(kvs: list[_KeyValue] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kvs is None:
        return out
    for kv in kvs:
        value = kv.value
        if value is None:
            continue  # an absent value: dropped, as the general decoder drops it
        text = value.stringValue
        if text is not UNSET:
            out[kv.key] = text
            continue
        number = value.intValue
        # Under 19 digits an int64 cannot overflow.
        if number.__class__ is str and len(number) < 19 and number.isdigit() and number.isascii():
            out[kv.key] = int(number)
            continue
        decoded = _other_value(value)
        if decoded is not None:
            out[kv.key] = decoded
    return out


def _other_value(value: _Value) -> Any:
    """A value that is not a string or a small non-negative int; None when empty."""
    present = [
        (which, raw) for which, raw in (
            ("int", value.intValue), ("bool", value.boolValue), ("double", value.doubleValue),
            ("array", value.arrayValue), ("kvlist", value.kvlistValue), ("bytes", value.bytesValue),
        ) if raw is not UNSET
    ]
    if not present:
        return None
    if len(present) > 1:
        raise _Fallback  # the general decoder takes the first in document order, which this path cannot see
    which, raw = present[0]
    try:
        if which == "int":
            return _int64(raw)
        if which == "bool":
            return raw
        if which == "double":
            return _double(raw)
        if which == "bytes":
            return _bytes(raw)
        # Only the array and kvlist fields are declared as Raw: they are decoded here, on demand.
        return any_value({which + "Value": _load(cast(Raw, raw))}, 0)
    except _Bad:
        raise _Fallback from None
