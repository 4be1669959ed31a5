"""Decode serialised protobuf ``ExportTraceServiceRequest`` messages into :class:`SpanRecord`.

Reads the generated message objects directly (no detour through JSON). The
rules beyond what protobuf itself enforces (id lengths, the status enum, the
nesting limit) and the error locations are the JSON decoder's, so both
formats accept and refuse the same things and name fields the same way.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..conventions.span import SpanRecord
from ..errors import InputError
from .json_general import MAX_VALUE_DEPTH, STATUS_CODES, STATUS_ERROR, _Bad, bad_status_code, walk_spans

__all__ = ["decode_proto_request"]

_PARSE = ExportTraceServiceRequest.FromString


def _any_value(value: Any, depth: int) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which == "bytes_value":
        return value.bytes_value
    if which == "array_value":
        if depth >= MAX_VALUE_DEPTH:
            raise _Bad(f"values nested more than {MAX_VALUE_DEPTH} deep", "arrayValue")
        index = 0
        try:
            out = []
            for index, item in enumerate(value.array_value.values):
                out.append(_any_value(item, depth + 1))
            return tuple(out)
        except _Bad as exc:
            raise exc.under(f"arrayValue.values[{index}]") from None
    if which == "kvlist_value":
        if depth >= MAX_VALUE_DEPTH:
            raise _Bad(f"values nested more than {MAX_VALUE_DEPTH} deep", "kvlistValue")
        try:
            return _attributes(value.kvlist_value.values, depth + 1, keep_empty=True)
        except _Bad as exc:
            raise exc.under("kvlistValue.values") from None
    # string_value_strindex refers to a dictionary that only profiles carry.
    raise _Bad(f"{which} is not valid in a trace request")


def _attributes(kvs: Any, depth: int = 0, *, keep_empty: bool = False) -> dict[str, Any]:
    """The attributes of a KeyValue list (any value type), an error located by its entry's index.

    A non-empty string, the common value, is taken before asking which oneof member is set (every field access
    builds a wrapper object).
    """
    out: dict[str, Any] = {}
    index = 0
    try:
        for index, kv in enumerate(kvs):
            value = kv.value
            text = value.string_value
            if text:
                out[kv.key] = text
                continue
            which = value.WhichOneof("value")
            if which == "string_value":
                out[kv.key] = text
            elif which == "int_value":
                out[kv.key] = value.int_value
            elif which is None:
                if keep_empty:
                    out[kv.key] = None
            else:
                try:
                    out[kv.key] = _any_value(value, depth)
                except _Bad as exc:
                    raise exc.under("value") from None
    except _Bad as exc:
        raise exc.under(f"[{index}]") from None
    return out


def _bad_id(raw: bytes, size: int, name: str) -> _Bad:
    return _Bad(f"expected {size} bytes, got {len(raw)}", name)


_FROM_BYTES = int.from_bytes


def _span(span: Any, resource: dict[str, Any]) -> SpanRecord:
    # Per span, each field read is a call into protobuf: each is read once, and the ids are checked inline.
    trace_id = span.trace_id
    if len(trace_id) != 16:
        raise _bad_id(trace_id, 16, "traceId")
    span_id = span.span_id
    if len(span_id) != 8:
        raise _bad_id(span_id, 8, "spanId")
    parent = span.parent_span_id
    if parent:
        if len(parent) != 8:
            raise _bad_id(parent, 8, "parentSpanId")
        parent_id: int | None = _FROM_BYTES(parent, "big")
    else:
        parent_id = None
    try:
        attrs = _attributes(span.attributes)
    except _Bad as exc:
        raise exc.under("attributes") from None
    if span.HasField("status"):
        status = span.status
        code = status.code
        if code not in STATUS_CODES:
            raise bad_status_code(code)
        error = code == STATUS_ERROR
        message = status.message
    else:
        error, message = False, ""
    events: tuple[tuple[str, int, dict[str, Any]], ...] = ()
    span_events = span.events
    if span_events:
        index = 0
        try:
            collected = []
            for index, event in enumerate(span_events):
                try:
                    event_attrs = _attributes(event.attributes)
                except _Bad as exc:
                    raise exc.under("attributes") from None
                collected.append((event.name, event.time_unix_nano, event_attrs))
            events = tuple(collected)
        except _Bad as exc:
            raise exc.under(f"events[{index}]") from None
    return SpanRecord(
        trace_id=_FROM_BYTES(trace_id, "big"), span_id=_FROM_BYTES(span_id, "big"), parent_span_id=parent_id,
        name=span.name, start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano, attributes=attrs,
        resource=resource, status_error=error, status_message=message, events=events,
    )


def _resource(rs: Any) -> dict[str, Any]:
    try:
        return _attributes(rs.resource.attributes)
    except _Bad as exc:
        raise exc.under("resource.attributes") from None


def _scopes(rs: Any) -> Any:
    return rs.scope_spans


def _spans(ss: Any) -> Any:
    return ss.spans


def _request(request: Any) -> list[SpanRecord]:
    return walk_spans(request.resource_spans, _resource, _scopes, _spans, _span)


def decode_proto_request(data: bytes, *, source: str = "request") -> list[SpanRecord]:
    """Decode one serialised protobuf ``ExportTraceServiceRequest``.

    Args:
        data: the serialised message (bytes, bytearray or memoryview).
        source: names the input in error messages.

    Returns:
        The spans of the request, in message order.

    Raises:
        InputError: the bytes are not a valid message, or a span is malformed
            (wrong id length, unknown status code); ``location`` says where,
            with the OTLP/JSON field names.
        TypeError: ``data`` is not bytes-like.
    """
    if not isinstance(data, bytes):
        if not isinstance(data, (bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        data = bytes(data)
    try:
        request = _PARSE(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise InputError(f"not a valid protobuf ExportTraceServiceRequest: {exc}", source=source) from None
    try:
        return _request(request)
    except _Bad as exc:
        raise InputError(exc.message, source=source, location=exc.location or None) from None
