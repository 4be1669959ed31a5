"""A well-formed OTLP/JSON span and the edge values of each of its fields, for the decoders' differential tests."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from tests.support.json_paths import json_paths

SPAN: dict[str, Any] = {
    "traceId": "0af7651916cd43dd8448eb211c80319c",
    "spanId": "b7ad6b7169203331",
    "parentSpanId": "00f067aa0ba902b7",
    "name": "execute_tool search",
    "kind": 1,
    "startTimeUnixNano": "1767225600000000000",
    "endTimeUnixNano": "1767225600300000000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": '{"q": 1}'}},
        {"key": "n", "value": {"intValue": "12"}},
        {"key": "b", "value": {"boolValue": True}},
    ],
    "status": {"code": 2, "message": "RateLimitError"},
    "events": [{"name": "exception", "timeUnixNano": "1767225600200000000",
                "attributes": [{"key": "exception.type", "value": {"stringValue": "E"}}]}],
}

# Values chosen to sit on the edges of the quick path's checks: ids of every case, length and spelling,
# digit strings at the uint64/int64 limits, numbers where strings are expected, empty and wrong containers.
EDGE = st.sampled_from([
    None, True, False, 0, 1, 2, 3, -1, 1.0, 2.0, 1.5, "", " ", "0", "-1", "+1", "1_0", "٣",
    "0af7651916cd43dd8448eb211c80319c", "0AF7651916CD43DD8448EB211C80319C", "0af7651916cd43dd8448eb211c80319",
    "0af7651916cd43dd 8448eb211c80319c", "0x f7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "B7AD6B7169203331",
    "b7ad6b716920333 ", "0x7ad6b716920333", "AAECAwQFBgcICQoLDA0ODw==", "18446744073709551615",
    "18446744073709551616", "9999999999999999999", "9223372036854775807", "9223372036854775808",
    "STATUS_CODE_ERROR", "STATUS_CODE_OK", "NaN", {}, [], {"code": 2}, {"code": True}, {"message": 3}, {"code": 3},
    {"code": -1}, {"code": 2.0}, {"code": "STATUS_CODE_ERROR"}, {"code": 1, "message": "m"}, {"code": None},
    {"stringValue": "x"}, {"stringValue": 5}, {"intValue": "-3"}, {"intValue": 4}, {"string_value": "y"},
    [{"key": "k", "value": {"stringValue": "v"}}], [{"key": 1, "value": {"stringValue": "v"}}], ["kv"],
    [{"name": "e"}], [{"name": "e", "timeUnixNano": "x"}],
])
JSON = st.recursive(EDGE, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["key", "value", "stringValue", "intValue", "code", "message", "name"]), inner, max_size=3),
    max_leaves=8)
DELETE = object()
SPAN_ATTRIBUTES = SPAN["attributes"]
_IDS = ["0af7651916cd43dd8448eb211c80319c", "0AF7651916CD43DD8448EB211C80319C", "0af7651916cd43dd8448eb211c80319",
        "0af7651916cd43dd 8448eb211c80319c", "0x0f7651916cd43dd8448eb211c80319c", "b7ad6b7169203331",
        "B7AD6B7169203331", "b7ad6b716920333 ", "0x7ad6b716920333", "b7ad6b716920333", "", 0, 5, None, [], {}]
_TIMES = ["0", "", " 1", "+1", "-1", "1_0", "٣", "1.0", "18446744073709551615", "18446744073709551616",
          "9999999999999999999", "99999999999999999999", 0, 5, 1.0, 1.5, -1, True, None]
_KV = [{"key": "k", "value": {"stringValue": "v"}}, {"key": 1, "value": {"stringValue": "v"}}, "kv", None,
       {"key": "k"}, {"value": {"stringValue": "v"}}, {"key": "k", "value": {}}, {"key": "k", "value": None},
       {"key": "k", "value": {"stringValue": 5}}, {"key": "k", "value": {"intValue": "-3"}},
       {"key": "k", "value": {"intValue": "9223372036854775808"}}, {"key": "k", "value": {"intValue": "٣"}},
       {"key": "k", "value": {"intValue": 7}}, {"key": "k", "value": {"boolValue": "true"}},
       {"key": "k", "value": {"intValue": "1", "stringValue": "s"}}, {"key": "k", "value": []}]
_CODES = [0, 1, 2, 3, -1, 2.0, True, False, None, "STATUS_CODE_ERROR", "STATUS_CODE_OK", "STATUS_CODE_X", "2", [], {}]
_MESSAGES = ["", "m", None, 1, []]
_EVENTS = [{"name": name, "timeUnixNano": time, "attributes": [kv]} for name in ("e", None, 1) for time in _TIMES[:6]
           for kv in _KV[:3]] + [{}, {"name": "e"}, "e", None]
# Every single change of one field to an edge value (or its removal), enumerated: rare values must not depend on luck.
SINGLE_CHANGES: list[tuple[str, Any]] = (
    [(field, value) for field in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
     for value in _IDS]
    + [(field, value) for field in ("startTimeUnixNano", "endTimeUnixNano", "start_time_unix_nano",
                                    "end_time_unix_nano") for value in _TIMES]
    + [("name", value) for value in ["", "x", None, 3, [], {}]]
    + [("attributes", [*SPAN_ATTRIBUTES, kv]) for kv in _KV] + [("attributes", v) for v in [None, [], {}, "a", 0]]
    + [("status", {"code": code, "message": message}) for code in _CODES for message in _MESSAGES]
    + [("status", {"code": code}) for code in _CODES] + [("status", {"message": m}) for m in _MESSAGES]
    + [("status", value) for value in [None, {}, [], "ERROR", 0]]
    + [("events", [event]) for event in _EVENTS] + [("events", value) for value in [None, [], {}, "e", 0]]
    + [(field, DELETE) for field in SPAN]
)
SNAKE = {"traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id",
          "startTimeUnixNano": "start_time_unix_nano", "endTimeUnixNano": "end_time_unix_nano"}
# A field only in its snake_case spelling, with each edge value.
SNAKE_ONLY: list[tuple[str, Any]] = [(camel, value) for camel in SNAKE
                                     for value in (_IDS if camel.endswith("Id") else _TIMES)]
# Per field, the values on the edges of the quick path's checks for it.
FIELD_VALUES: dict[str, Any] = {
    "traceId": st.sampled_from(_IDS), "spanId": st.sampled_from(_IDS), "parentSpanId": st.sampled_from(_IDS),
    "trace_id": st.sampled_from(_IDS), "span_id": st.sampled_from(_IDS), "parent_span_id": st.sampled_from(_IDS),
    "name": st.sampled_from(["", "x", None, 3, [], {}]),
    "startTimeUnixNano": st.sampled_from(_TIMES), "endTimeUnixNano": st.sampled_from(_TIMES),
    "start_time_unix_nano": st.sampled_from(_TIMES), "end_time_unix_nano": st.sampled_from(_TIMES),
    "attributes": st.one_of(st.lists(st.sampled_from(_KV), max_size=3), st.sampled_from([None, {}, "a", 0])),
    "status": st.one_of(st.sampled_from([None, {}, [], "ERROR", 0]), st.fixed_dictionaries({}, optional={
        "code": st.sampled_from([0, 1, 2, 3, -1, 2.0, True, False, None, "STATUS_CODE_ERROR", "STATUS_CODE_OK",
                                 "STATUS_CODE_X", "2", [], {}]),
        "message": st.sampled_from(["", "m", None, 1, []])})),
    "events": st.one_of(st.sampled_from([None, [], {}, "e", 0]), st.lists(st.fixed_dictionaries({}, optional={
        "name": st.sampled_from(["e", None, 1]), "timeUnixNano": st.sampled_from(_TIMES),
        "attributes": st.lists(st.sampled_from(_KV), max_size=2)}), max_size=2)),
}
FIELDS = sorted(FIELD_VALUES)


def request_of(*spans: Any, resource: Any = None) -> dict[str, Any]:
    """An ExportTraceServiceRequest of ``spans`` in one scope (under ``resource`` when given)."""
    resource_spans: dict[str, Any] = {"scopeSpans": [{"spans": list(spans)}]}
    if resource is not None:
        resource_spans["resource"] = resource
    return {"resourceSpans": [resource_spans]}


def changed_request(field: str, value: Any) -> dict[str, Any]:
    """A request of two copies of SPAN with ``field`` set to ``value`` (removed for ``DELETE``)."""
    span = copy.deepcopy(SPAN)
    if value is DELETE:
        del span[field]
    else:
        span[field] = copy.deepcopy(value)
    return request_of(span, copy.deepcopy(span))


def mutate(data: st.DataObject, root: Any, span: dict[str, Any]) -> None:
    """One to three changes: a span field set to an edge value, or any value under ``root`` replaced or removed."""
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            field = data.draw(st.sampled_from(FIELDS))
            span[field] = copy.deepcopy(data.draw(st.one_of(FIELD_VALUES[field], JSON)))
        elif len(json_paths(root)) > 1:
            path = data.draw(st.sampled_from(json_paths(root)[1:]))
            parent = root
            for step in path[:-1]:
                parent = parent[step]
            if data.draw(st.booleans()):
                parent[path[-1]] = copy.deepcopy(data.draw(JSON))
            elif isinstance(parent, dict):
                del parent[path[-1]]
