"""Decode OTLP/JSON ``ExportTraceServiceRequest`` objects into :class:`SpanRecord`.

The mapping is the one the OTLP specification defines for JSON: trace and span
ids as hex strings, enums as integers or names, 64-bit integers as strings or
numbers, lowerCamelCase field names (snake_case accepted, as protobuf's own
JSON parser does). Unknown fields are ignored, as OTLP receivers must.

The decoder runs on every span of an audited file, so the common case (an
attribute holding a ``stringValue``) takes an inline fast path and everything
else goes through one general value decoder. Errors are raised as
:class:`_Bad` with a location relative to the object being decoded; each
enclosing level prepends its own segment on the way out, so the happy path
never builds a location string. The protobuf decoder shares these primitives.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from ..conventions.span import SpanRecord
from ..core.jsontext import loads
from ..errors import InputError

__all__ = ["decode_json_document", "decode_json_request"]

# AnyValue nesting (arrays/kvlists inside values) beyond this is refused, so a
# hostile document cannot exhaust the interpreter stack.
MAX_VALUE_DEPTH = 32

_INT64_MIN = -(2**63)
_INT64_LIMIT = 2**63
_UINT64_LIMIT = 2**64

# Names are accepted too, because protobuf's JSON mapping allows either.
STATUS_CODES: dict[Any, int] = {
    0: 0,
    1: 1,
    2: 2,
    "STATUS_CODE_UNSET": 0,
    "STATUS_CODE_OK": 1,
    "STATUS_CODE_ERROR": 2,
}
STATUS_ERROR = 2

_SPECIAL_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
# float() alone would also take "nan", "1_0" and surrounding spaces.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_B64_URLSAFE = str.maketrans("-_", "+/")
_fromhex = bytes.fromhex
_from_bytes = int.from_bytes

_STRING, _BOOL, _INT, _DOUBLE, _ARRAY, _KVLIST, _BYTES = range(7)
_VALUE_FIELDS = {
    "stringValue": _STRING,
    "string_value": _STRING,
    "boolValue": _BOOL,
    "bool_value": _BOOL,
    "intValue": _INT,
    "int_value": _INT,
    "doubleValue": _DOUBLE,
    "double_value": _DOUBLE,
    "arrayValue": _ARRAY,
    "array_value": _ARRAY,
    "kvlistValue": _KVLIST,
    "kvlist_value": _KVLIST,
    "bytesValue": _BYTES,
    "bytes_value": _BYTES,
}
_CAMEL = {v: k for k, v in reversed(_VALUE_FIELDS.items())}


class _Bad(Exception):
    """Internal: malformed input at ``location`` (relative; enclosing levels prepend)."""

    def __init__(self, message: str, location: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.location = location

    def under(self, segment: str) -> _Bad:
        """Return self with ``segment`` prepended to the location."""
        if not self.location:
            self.location = segment
        elif self.location.startswith("["):
            self.location = segment + self.location
        else:
            self.location = f"{segment}.{self.location}"
        return self


def short(value: Any) -> str:
    """A bounded ``repr`` for error messages, so a huge bad value cannot flood a log."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def kind_of(value: Any) -> str:
    """The JSON name of ``value``'s type, for "expected X, got Y" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def bad_status_code(code: Any) -> _Bad:
    """The error for a status code outside the OTLP enum."""
    return _Bad(f"expected a status code 0, 1, 2 or its STATUS_CODE_* name, got {short(code)}", "status.code")


def _hex_id(value: Any, digits: int, name: str) -> int:
    number = hex_id(value, digits)
    if number is not None:
        return number
    if value is None:
        raise _Bad(f"missing; expected {digits} hex digits", name)
    hint = ""
    if value.__class__ is str and len(value) == (digits // 2 + 2) // 3 * 4:
        hint = " (this looks like base64; OTLP/JSON ids are hex)"
    raise _Bad(f"expected {digits} hex digits, got {short(value)}{hint}", name)


def _uint64(value: Any, name: str) -> int:
    cls = value.__class__
    if cls is str:
        if value.isascii() and value.isdigit():
            number = int(value)
            if number < _UINT64_LIMIT:
                return number
    elif cls is int:
        if 0 <= value < _UINT64_LIMIT:
            return value
    elif cls is float and value.is_integer() and 0 <= value < _UINT64_LIMIT:
        return int(value)
    elif value is None:
        return 0
    raise _Bad(f"expected an unsigned 64-bit integer, got {short(value)}", name)


def _int64(value: Any) -> int:
    cls = value.__class__
    number: int | None = None
    if cls is int:
        number = value
    elif cls is str:
        # Same leniency as protobuf's own JSON parser: int() of a string without spaces.
        if " " not in value:
            try:
                number = int(value)
            except ValueError:
                number = None
    elif cls is float and value.is_integer():
        number = int(value)
    if number is None or not _INT64_MIN <= number < _INT64_LIMIT:
        raise _Bad(f"expected a 64-bit integer, got {short(value)}")
    return number


def _double(value: Any) -> float:
    cls = value.__class__
    if cls is float:
        return value
    if cls is int:
        try:
            return float(value)
        except OverflowError:
            raise _Bad(f"number out of the range of a double: {short(value)}") from None
    if cls is str:
        special = _SPECIAL_DOUBLES.get(value)
        if special is not None:
            return special
        if _JSON_NUMBER.fullmatch(value):
            return float(value)
    raise _Bad(f"expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", got {short(value)}")


def _bytes(value: Any) -> bytes:
    if value.__class__ is str:
        text = value.translate(_B64_URLSAFE)
        text += "=" * (-len(text) % 4)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise _Bad(f"expected base64 bytes, got {short(value)}")


def _array_of(value: Any) -> list[Any]:
    """The ``values`` list of an ArrayValue/KeyValueList object."""
    if value is None:
        return []
    if value.__class__ is not dict:
        raise _Bad(f"expected an object, got {kind_of(value)}")
    items = value.get("values")
    if items is None:
        return []
    if items.__class__ is not list:
        raise _Bad(f"expected an array, got {kind_of(items)}", "values")
    return items


def any_value(value: Any, depth: int) -> Any:
    """Decode one OTLP/JSON ``AnyValue`` object; an empty one decodes to None.

    Raises:
        _Bad: the value is malformed (location relative to the value).
    """
    if value.__class__ is not dict:
        raise _Bad(f"expected an AnyValue object, got {kind_of(value)}")
    for field, raw in value.items():
        which = _VALUE_FIELDS.get(field)
        if which is None:
            continue
        try:
            if which == _STRING:
                if raw.__class__ is str:
                    return raw
                raise _Bad(f"expected a string, got {kind_of(raw)}")
            if which == _INT:
                return _int64(raw)
            if which == _BOOL:
                if raw.__class__ is bool:
                    return raw
                raise _Bad(f"expected true or false, got {short(raw)}")
            if which == _DOUBLE:
                return _double(raw)
            if which == _BYTES:
                return _bytes(raw)
            if depth >= MAX_VALUE_DEPTH:
                raise _Bad(f"values nested more than {MAX_VALUE_DEPTH} deep")
            if which == _ARRAY:
                items = _array_of(raw)
                index = 0
                try:
                    out = []
                    for index, item in enumerate(items):
                        out.append(any_value(item, depth + 1))
                    return tuple(out)
                except _Bad as exc:
                    raise exc.under(f"values[{index}]") from None
            items = _array_of(raw)
            try:
                return attributes(items, depth + 1, keep_empty=True)
            except _Bad as exc:
                raise exc.under("values") from None
        except _Bad as exc:
            raise exc.under(_CAMEL[which]) from None
    return None


def attributes(kvs: Any, depth: int = 0, *, keep_empty: bool = False) -> dict[str, Any]:
    """Decode a list of OTLP/JSON ``KeyValue`` objects into a dict.

    Args:
        kvs: the list (None counts as empty).
        depth: AnyValue nesting depth so far.
        keep_empty: keep empty values as None (inside kvlists) instead of dropping them.

    Raises:
        _Bad: a key or value is malformed (location relative to the list).
    """
    out: dict[str, Any] = {}
    if kvs.__class__ is not list:
        if kvs is None:
            return out
        raise _Bad(f"expected an array, got {kind_of(kvs)}")
    # The inline checks take the two kinds that dominate GenAI spans without a
    # function call; anything else, including every malformed entry, goes to
    # _key_value, which also works out the error location.
    for kv in kvs:
        if kv.__class__ is dict:
            value = kv.get("value")
            if value.__class__ is dict:
                text = value.get("stringValue")
                if text.__class__ is str:
                    key = kv.get("key")
                    if key.__class__ is str:
                        out[key] = text
                        continue
                elif text is None:
                    number = value.get("intValue")
                    # Under 19 digits an int64 cannot overflow.
                    if number.__class__ is str and len(number) < 19 and number.isdigit() and number.isascii():
                        key = kv.get("key")
                        if key.__class__ is str:
                            out[key] = int(number)
                            continue
        _key_value(out, kv, kvs, depth, keep_empty)
    return out


def _key_value(out: dict[str, Any], kv: Any, kvs: list[Any], depth: int, keep_empty: bool) -> None:
    try:
        if kv.__class__ is not dict:
            raise _Bad(f"expected a KeyValue object, got {kind_of(kv)}")
        key = kv.get("key")
        if key.__class__ is not str:
            raise _Bad(f"expected a string, got {kind_of(key)}", "key")
        value = kv.get("value")
        if value is None:
            decoded = None
        else:
            try:
                decoded = any_value(value, depth)
            except _Bad as exc:
                raise exc.under("value") from None
        if decoded is not None or keep_empty:
            out[key] = decoded
    except _Bad as exc:
        # Entries before this one decoded, so the first identical object is this one.
        index = next(i for i, item in enumerate(kvs) if item is kv)
        raise exc.under(f"[{index}]") from None


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _list(obj: dict[str, Any], camel: str, snake: str) -> list[Any]:
    value = obj.get(camel)
    if value is None:
        value = obj.get(snake)
        if value is None:
            return []
    if value.__class__ is not list:
        raise _Bad(f"expected an array, got {kind_of(value)}", camel)
    return value


def _status(status: Any) -> tuple[bool, str]:
    """A span's status as (is an error, message)."""
    if status.__class__ is not dict:
        raise _Bad(f"expected a Status object, got {kind_of(status)}", "status")
    error = False
    code = status.get("code")
    if code is not None:
        if code.__class__ is bool or code.__class__ is float:
            raise bad_status_code(code)
        try:
            error = STATUS_CODES[code] == STATUS_ERROR
        except (KeyError, TypeError):
            raise bad_status_code(code) from None
    message = status.get("message")
    if message.__class__ is not str:
        if message is not None:
            raise _Bad(f"expected a string, got {kind_of(message)}", "status.message")
        message = ""
    return error, message


def _span(span: Any, resource: dict[str, Any]) -> SpanRecord:
    if span.__class__ is not dict:
        raise _Bad(f"expected a Span object, got {kind_of(span)}")
    get = span.get
    # Inline fast paths take well-formed values in the spec's spelling; the rest
    # (snake_case names, JSON numbers, malformed values) goes to the helpers,
    # which also build the error.
    trace_id = _hex_id(_get(span, "traceId", "trace_id"), 32, "traceId")
    span_id = _hex_id(_get(span, "spanId", "span_id"), 16, "spanId")
    value = get("parentSpanId")
    parent_id = None
    if value:
        parent_id = _hex_id(value, 16, "parentSpanId")
    elif value is None:
        value = get("parent_span_id")
        if value:
            parent_id = _hex_id(value, 16, "parentSpanId")
    name = get("name")
    if name.__class__ is not str:
        if name is not None:
            raise _Bad(f"expected a string, got {kind_of(name)}", "name")
        name = ""
    # Under 20 digits a uint64 cannot overflow.
    value = get("startTimeUnixNano")
    if value.__class__ is str and len(value) < 20 and value.isdigit() and value.isascii():
        start = int(value)
    else:
        start = _uint64(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    value = get("endTimeUnixNano")
    if value.__class__ is str and len(value) < 20 and value.isdigit() and value.isascii():
        end = int(value)
    else:
        end = _uint64(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano")
    try:
        attrs = attributes(get("attributes"))
    except _Bad as exc:
        raise exc.under("attributes") from None
    status = get("status")
    error, message = _status(status) if status is not None else (False, "")
    events: tuple[tuple[str, int, dict[str, Any]], ...] = ()
    raw_events = get("events")
    if raw_events:
        if raw_events.__class__ is not list:
            raise _Bad(f"expected an array, got {kind_of(raw_events)}", "events")
        events = tuple(_event(event, index) for index, event in enumerate(raw_events))
    return SpanRecord(
        trace_id=trace_id, span_id=span_id, parent_span_id=parent_id, name=name, start_ns=start, end_ns=end,
        attributes=attrs, resource=resource, status_error=error, status_message=message, events=events,
    )


def _event(event: Any, index: int) -> tuple[str, int, dict[str, Any]]:
    try:
        if event.__class__ is not dict:
            raise _Bad(f"expected an Event object, got {kind_of(event)}")
        name = event.get("name")
        if name.__class__ is not str:
            if name is not None:
                raise _Bad(f"expected a string, got {kind_of(name)}", "name")
            name = ""
        time_ns = _uint64(_get(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano")
        try:
            attrs = attributes(event.get("attributes"))
        except _Bad as exc:
            raise exc.under("attributes") from None
        return (name, time_ns, attrs)
    except _Bad as exc:
        raise exc.under(f"events[{index}]") from None




def hex_id(value: Any, digits: int) -> int | None:
    """The number a hex id string of exactly ``digits`` digits spells, else None."""
    if value.__class__ is not str or len(value) != digits:
        return None
    try:
        raw = _fromhex(value)
    except ValueError:
        return None
    # fromhex skips embedded whitespace, which then shows up as a short result.
    if len(raw) * 2 != digits:
        return None
    return _from_bytes(raw, "big")


def walk_spans(resource_spans: Iterable[Any], resource_of: Callable[[Any], dict[str, Any]],
               scopes_of: Callable[[Any], Iterable[Any]], spans_of: Callable[[Any], Iterable[Any]],
               span_of: Callable[[Any, dict[str, Any]], SpanRecord]) -> list[SpanRecord]:
    """The resource / scope / span walk of a request, shared by the JSON and protobuf decoders.

    ``resource_of(rs)`` and ``scopes_of(rs)`` read one ResourceSpans, ``spans_of(ss)`` one ScopeSpans and
    ``span_of(span, resource)`` decodes one span; a :class:`_Bad` any of them raises gets the location of the
    element it came from (``resourceSpans[i].scopeSpans[j].spans[k]``).
    """
    out: list[SpanRecord] = []
    append = out.append
    i = 0
    try:
        for i, rs in enumerate(resource_spans):
            resource = resource_of(rs)
            scopes = scopes_of(rs)
            j = 0
            try:
                for j, ss in enumerate(scopes):
                    spans = spans_of(ss)
                    k = 0
                    try:
                        for k, span in enumerate(spans):
                            append(span_of(span, resource))
                    except _Bad as exc:
                        raise exc.under(f"spans[{k}]") from None
            except _Bad as exc:
                raise exc.under(f"scopeSpans[{j}]") from None
    except _Bad as exc:
        raise exc.under(f"resourceSpans[{i}]") from None
    return out


def _resource(rs: Any) -> dict[str, Any]:
    if rs.__class__ is not dict:
        raise _Bad(f"expected a ResourceSpans object, got {kind_of(rs)}")
    res = rs.get("resource")
    if res is None:
        return {}
    if res.__class__ is not dict:
        raise _Bad(f"expected a Resource object, got {kind_of(res)}", "resource")
    try:
        return attributes(res.get("attributes"))
    except _Bad as exc:
        raise exc.under("resource.attributes") from None


def _scopes(rs: dict[str, Any]) -> list[Any]:
    scopes = _list(rs, "scopeSpans", "scope_spans")
    if not scopes:
        # OTLP before 0.19 used this name; old dumps still carry it.
        scopes = _list(rs, "instrumentationLibrarySpans", "instrumentation_library_spans")
    return scopes


def _spans(ss: Any) -> list[Any]:
    if ss.__class__ is not dict:
        raise _Bad(f"expected a ScopeSpans object, got {kind_of(ss)}")
    return _list(ss, "spans", "spans")


def _request(obj: Any) -> list[SpanRecord]:
    """Decode a parsed request, span by span."""
    if obj.__class__ is not dict:
        raise _Bad(f"expected an ExportTraceServiceRequest object, got {kind_of(obj)}")
    return walk_spans(_list(obj, "resourceSpans", "resource_spans"), _resource, _scopes, _spans, _span)


def decode_json_document(obj: Any, *, source: str | None, location: str | None = None) -> list[SpanRecord]:
    """Decode one already-parsed OTLP/JSON request object (the shared path of requests and files).

    Args:
        obj: the result of ``json.loads``.
        source: where it came from, for errors.
        location: a prefix for error locations (for example "line 3").

    Raises:
        InputError: the object is not a well-formed ExportTraceServiceRequest.
    """
    try:
        return _request(obj)
    except _Bad as exc:
        where = ", ".join(part for part in (location, exc.location) if part) or None
        raise InputError(exc.message, source=source, location=where) from None


def decode_json_request(data: bytes | str | dict[str, Any], *, source: str = "request") -> list[SpanRecord]:
    """Decode one OTLP/JSON ``ExportTraceServiceRequest``.

    Args:
        data: the request body (bytes or str), or the object ``json.loads`` made of it.
        source: names the input in error messages.

    Returns:
        The spans of the request, in document order.

    Raises:
        InputError: the body is not JSON, or not a well-formed request; ``location``
            says where (for example ``resourceSpans[0].scopeSpans[1].spans[3].traceId``).
    """
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        data = parse_json(data, source=source, location=None)
    return decode_json_document(data, source=source)


def parse_json(text: bytes | bytearray | memoryview | str, *, source: str | None, location: str | None) -> Any:
    """:func:`loads` that raises only :class:`InputError`.

    Raises:
        InputError: not JSON, not UTF-8, or nested too deeply for the parser.
    """
    try:
        if isinstance(text, memoryview):
            text = bytes(text)
        return loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"not valid JSON: {exc.msg}", source=source, location=_join(location, where)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 text: {exc.reason}", source=source, location=location) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", source=source, location=location) from None
    except ValueError as exc:
        # e.g. an integer literal longer than the interpreter's digit limit.
        raise InputError(f"not valid JSON: {exc}", source=source, location=location) from None


def _join(prefix: str | None, rest: str) -> str:
    return f"{prefix}, {rest}" if prefix else rest
