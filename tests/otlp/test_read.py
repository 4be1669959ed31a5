"""OTLP readers: real SDK spans through OTLP/JSON and protobuf, files in every supported shape, and clear errors."""

from __future__ import annotations

import base64
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.errors import InputError
from otel_loopguard.otlp.read import decode_json_request, decode_proto_request, read_spans
from otel_loopguard.sdk.otlp_write import spans_to_otlp_dict, write_otlp_json

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"

ALL_TYPES: dict[str, Any] = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.call.arguments": json.dumps({"query": "weather in Paris", "limit": 3}),
    "empty.string": "",
    "unicode": "héllo ✓ 日本",
    "int.small": 7,
    "int.negative": -42,
    "int.max": 2**63 - 1,
    "int.min": -(2**63),
    "bool.true": True,
    "bool.false": False,
    "float": 1.25,
    "float.negative": -0.5,
    "float.inf": float("inf"),
    "float.neg_inf": float("-inf"),
    "bytes": b"\x00\x01\xfe\xff",
    "array.str": ["a", "b"],
    "array.int": [1, -2, 3],
    "array.float": [0.5, 2.0],
    "array.bool": [True, False],
    "array.empty": [],
    "array.with_none": [None, "x"],
    "map": {"k": 1, "nested": {"deep": ["x", 2]}, "none": None},
}


def _provider(resource: dict[str, Any] | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource or {"service.name": "agent", "deployment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture(name="sdk_spans")
def _sdk_spans() -> list[ReadableSpan]:
    """A root agent span, a failing tool span with every attribute type and events, and a NaN span."""
    provider, exporter = _provider()
    tracer = provider.get_tracer("test.scope", "1.0")
    with tracer.start_as_current_span("invoke_agent research") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span("execute_tool search", attributes=ALL_TYPES) as tool:
            tool.add_event("retry", {"attempt": 2, "reason": "timeout", "delays": [0.5, 1.0]})
            tool.add_event("bare")
            tool.set_status(Status(StatusCode.ERROR, "upstream timed out"))
        with tracer.start_as_current_span("execute_tool ok") as ok:
            ok.set_attribute("float.nan", float("nan"))
            ok.set_status(Status(StatusCode.OK))
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    assert len(spans) == 3
    return spans


def _same_value(decoded: Any, original: Any) -> bool:
    if isinstance(original, float) and math.isnan(original):
        return isinstance(decoded, float) and math.isnan(decoded)
    if isinstance(original, dict):
        return isinstance(decoded, dict) and decoded.keys() == original.keys() and all(
            _same_value(decoded[k], v) for k, v in original.items()
        )
    if isinstance(original, (tuple, list)):
        return isinstance(decoded, tuple) and len(decoded) == len(original) and all(map(_same_value, decoded, original))
    return type(decoded) is type(original) and decoded == original


def _same_attributes(decoded: Any, original: Any) -> bool:
    # Empty values (None) are dropped at the top level, as the readers document.
    return _same_value(dict(decoded), {k: v for k, v in dict(original or {}).items() if v is not None})


def _assert_records_match(records: list[SpanRecord], spans: list[ReadableSpan]) -> None:
    by_id = {record.span_id: record for record in records}
    assert len(by_id) == len(records) == len(spans)
    for span in spans:
        record = by_id[span.context.span_id]
        assert record.trace_id == span.context.trace_id
        assert record.parent_span_id == (span.parent.span_id if span.parent else None)
        assert record.name == span.name
        assert record.start_ns == span.start_time
        assert record.end_ns == span.end_time
        assert _same_attributes(record.attributes, span.attributes), (record.attributes, span.attributes)
        assert _same_attributes(record.resource, span.resource.attributes)
        assert record.status_error is (span.status.status_code is StatusCode.ERROR)
        assert record.status_message == (span.status.description or "")
        assert len(record.events) == len(span.events)
        for (name, time_ns, attrs), event in zip(record.events, span.events):
            assert name == event.name
            assert time_ns == event.timestamp
            assert _same_attributes(attrs, event.attributes)


def _request_json(**fields: Any) -> dict[str, Any]:
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7", "name": "s"}
    span.update(fields)
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _error(data: Any) -> InputError:
    with pytest.raises(InputError) as info:
        decode_json_request(data)
    return info.value


# --- round trips ------------------------------------------------------------


def test_json_round_trip_matches_sdk_spans(sdk_spans: list[ReadableSpan]) -> None:
    """Spans written by _otlp_write as OTLP/JSON text decode back field by field."""
    text = json.dumps(spans_to_otlp_dict(sdk_spans))
    records = decode_json_request(text)
    _assert_records_match(records, sdk_spans)
    tool = next(r for r in records if r.name == "execute_tool search")
    assert tool.attributes["bytes"] == b"\x00\x01\xfe\xff"
    assert tool.attributes["map"] == {"k": 1, "nested": {"deep": ("x", 2)}, "none": None}
    assert tool.status_error is True
    assert tool.events[0] == ("retry", sdk_spans[0].events[0].timestamp, {"attempt": 2, "reason": "timeout", "delays": (0.5, 1.0)})


def test_json_accepts_bytes_str_and_parsed_dict_alike(sdk_spans: list[ReadableSpan]) -> None:
    """The same request as bytes, str and dict decodes to equal records (NaN aside, records compare equal)."""
    data = spans_to_otlp_dict(sdk_spans[:1])
    text = json.dumps(data)
    assert decode_json_request(text.encode()) == decode_json_request(text) == decode_json_request(data)


def test_proto_round_trip_matches_sdk_spans(sdk_spans: list[ReadableSpan]) -> None:
    """Spans serialised by the SDK's protobuf encoder decode back field by field."""
    blob = encode_spans(sdk_spans).SerializeToString()
    records = decode_proto_request(blob)
    _assert_records_match(records, sdk_spans)
    root = next(r for r in records if r.name == "invoke_agent research")
    assert root.parent_span_id is None
    assert root.resource["service.name"] == "agent"


def test_json_and_proto_decode_to_the_same_records(sdk_spans: list[ReadableSpan]) -> None:
    """Both encodings of one request give equal records in the same order (the NaN span excluded)."""
    spans = [s for s in sdk_spans if "float.nan" not in (s.attributes or {})]
    from_json = decode_json_request(spans_to_otlp_dict(spans))
    from_proto = decode_proto_request(encode_spans(spans).SerializeToString())
    assert from_json == from_proto
    assert len(from_json) == 2


def test_snake_case_field_names_and_enum_names_are_accepted(sdk_spans: list[ReadableSpan]) -> None:
    """protobuf's field names (resource_spans, trace_id, string_value...) and STATUS_CODE_* names decode like the spec form."""
    request = encode_spans(sdk_spans)
    data = MessageToDict(request, preserving_proto_field_name=True)
    for rs in data["resource_spans"]:
        for ss in rs["scope_spans"]:
            for span in ss["spans"]:
                for name in ("trace_id", "span_id", "parent_span_id"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    assert "STATUS_CODE_ERROR" in json.dumps(data)
    _assert_records_match(decode_json_request(data), sdk_spans)


def test_numbers_where_strings_are_usual_and_special_doubles() -> None:
    """int64 fields as JSON numbers, doubles as "NaN"/"Infinity"/numeric strings, and bytes as url-safe base64 decode."""
    data = _request_json(
        startTimeUnixNano=1000,
        endTimeUnixNano="2000",
        attributes=[
            {"key": "n", "value": {"intValue": 5}},
            {"key": "big", "value": {"intValue": "-9223372036854775808"}},
            {"key": "f", "value": {"doubleValue": 3}},
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "inf", "value": {"doubleValue": "-Infinity"}},
            {"key": "fs", "value": {"doubleValue": "2.5e3"}},
            {"key": "b", "value": {"bytesValue": "_-8"}},
        ],
        status={"code": "STATUS_CODE_OK", "message": "fine"},
    )
    (record,) = decode_json_request(data)
    attrs = record.attributes
    assert (record.start_ns, record.end_ns) == (1000, 2000)
    assert attrs["n"] == 5 and attrs["big"] == -(2**63)
    assert attrs["f"] == 3.0 and isinstance(attrs["f"], float)
    assert math.isnan(attrs["nan"]) and attrs["inf"] == float("-inf") and attrs["fs"] == 2500.0
    assert attrs["b"] == b"\xff\xef"
    assert record.status_error is False and record.status_message == "fine"


def test_empty_values_are_skipped_at_top_level_and_kept_inside_kvlists() -> None:
    """An attribute with an empty AnyValue is dropped; inside a kvlist it decodes to None."""
    data = _request_json(
        attributes=[
            {"key": "gone", "value": {}},
            {"key": "gone.too"},
            {"key": "kept", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}},
        ]
    )
    (record,) = decode_json_request(data)
    assert record.attributes == {"kept": {"x": None}}


def test_missing_optional_fields_take_protobuf_defaults() -> None:
    """A span with only its ids decodes with empty name, zero times, no parent, no status, no events."""
    (record,) = decode_json_request({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "00f067aa0ba902b7", "parentSpanId": ""}
    ]}]}]})
    assert record == SpanRecord(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, None, "", 0, 0, {}, {}, False, "", ())
    assert decode_json_request("{}") == []


def test_pydantic_ai_fixtures_decode() -> None:
    """Every recorded pydantic-ai OTLP/JSON fixture decodes, with execute_tool spans among the records."""
    files = sorted(FIXTURES.glob("pydantic_ai__*.json"))
    assert files
    for path in files:
        records = decode_json_request(path.read_bytes(), source=str(path))
        assert any(r.attributes.get("gen_ai.operation.name") == "execute_tool" for r in records), path


# --- JSON request errors -----------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "location", "fragment"),
    [
        ({"traceId": "zz"}, "traceId", "expected 32 hex digits, got 'zz'"),
        ({"traceId": "0af7651916cd43dd8448eb211c80319"}, "traceId", "expected 32 hex digits"),
        ({"traceId": "0x" + "a" * 30}, "traceId", "expected 32 hex digits"),
        ({"traceId": "CvdlGRbNQ92ESOshHIAxnA=="}, "traceId", "looks like base64"),
        ({"spanId": "00f067aa0ba902b"}, "spanId", "expected 16 hex digits"),
        ({"spanId": None}, "spanId", "missing"),
        ({"parentSpanId": "00f0 7aa0ba902b7"}, "parentSpanId", "expected 16 hex digits"),
        ({"status": {"code": "STATUS_CODE_BROKEN"}}, "status.code", "STATUS_CODE_BROKEN"),
        ({"status": {"code": 7}}, "status.code", "expected a status code"),
        ({"status": {"code": True}}, "status.code", "expected a status code"),
        ({"status": "error"}, "status", "expected a Status object"),
        ({"startTimeUnixNano": "-1"}, "startTimeUnixNano", "unsigned 64-bit"),
        ({"endTimeUnixNano": 1.5}, "endTimeUnixNano", "unsigned 64-bit"),
        ({"name": 3}, "name", "expected a string"),
        ({"attributes": {}}, "attributes", "expected an array"),
        ({"attributes": [{"key": "a", "value": {"intValue": "12x"}}]}, "attributes[0].value.intValue", "got '12x'"),
        ({"attributes": [{"key": "a", "value": {"intValue": str(2**63)}}]}, "attributes[0].value.intValue", "64-bit"),
        ({"attributes": [{"key": "ok", "value": {"stringValue": "x"}}, {"value": {"stringValue": "x"}}]},
         "attributes[1].key", "expected a string"),
        ({"attributes": [{"key": "b", "value": {"boolValue": "true"}}]}, "attributes[0].value.boolValue", "true or false"),
        ({"attributes": [{"key": "d", "value": {"doubleValue": "nan"}}]}, "attributes[0].value.doubleValue", "NaN"),
        ({"attributes": [{"key": "y", "value": {"bytesValue": "!!"}}]}, "attributes[0].value.bytesValue", "base64"),
        ({"attributes": [{"key": "d", "value": {"doubleValue": 10**400}}]}, "attributes[0].value.doubleValue",
         "out of the range of a double"),
        ({"attributes": [{"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}, {"intValue": []}]}}}]},
         "attributes[0].value.arrayValue.values[1].intValue", "64-bit"),
        ({"attributes": [{"key": "m", "value": {"kvlistValue": {"values": [{"key": "k", "value": 5}]}}}]},
         "attributes[0].value.kvlistValue.values[0].value", "AnyValue object"),
        ({"events": [{"name": "e"}, {"name": "f", "timeUnixNano": "x"}]}, "events[1].timeUnixNano", "unsigned 64-bit"),
        ({"events": [{"attributes": [{"key": 1}]}]}, "events[0].attributes[0].key", "expected a string"),
    ],
)
def test_malformed_span_fields_name_the_field_and_the_problem(fields: dict[str, Any], location: str, fragment: str) -> None:
    """Each malformed field gives one InputError whose location is the full path to the field."""
    error = _error(_request_json(**fields))
    assert error.source == "request"
    assert error.location == f"resourceSpans[0].scopeSpans[0].spans[0].{location}"
    assert fragment in error.message


def test_error_location_counts_resources_scopes_and_spans() -> None:
    """The path indexes the failing resourceSpans, scopeSpans and span, not just the first."""
    good = _request_json()["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    data = {"resourceSpans": [
        {"scopeSpans": [{"spans": [good]}]},
        {"scopeSpans": [{"spans": []}, {"spans": [good, good, good, dict(good, traceId="zz")]}]},
    ]}
    error = _error(data)
    assert error.location == "resourceSpans[1].scopeSpans[1].spans[3].traceId"
    assert str(error) == "request:resourceSpans[1].scopeSpans[1].spans[3].traceId: expected 32 hex digits, got 'zz'"


@pytest.mark.parametrize(
    ("data", "location", "fragment"),
    [
        ("[1, 2]", None, "expected an ExportTraceServiceRequest object, got an array"),
        ("42", None, "got a number"),
        ('{"resourceSpans": {}}', "resourceSpans", "expected an array"),
        ('{"resourceSpans": [[]]}', "resourceSpans[0]", "ResourceSpans object"),
        ('{"resourceSpans": [{"resource": []}]}', "resourceSpans[0].resource", "Resource object"),
        ('{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"intValue": true}}]}}]}',
         "resourceSpans[0].resource.attributes[0].value.intValue", "64-bit"),
        ('{"resourceSpans": [{"scopeSpans": [1]}]}', "resourceSpans[0].scopeSpans[0]", "ScopeSpans object"),
        ('{"resourceSpans": [{"scopeSpans": [{"spans": [null]}]}]}', "resourceSpans[0].scopeSpans[0].spans[0]", "Span object"),
        ('{"resourceSpans": [', "line 1 column 20", "not valid JSON"),
        (b'{"a": "\xff"}', None, "UTF-8"),
    ],
)
def test_malformed_documents_raise_input_error(data: str | bytes, location: str | None, fragment: str) -> None:
    """Non-object roots, wrong container types and non-JSON bodies raise InputError with location and reason."""
    error = _error(data)
    assert error.location == location
    assert fragment in error.message


def test_deep_nesting_is_refused_not_crashing() -> None:
    """Values nested beyond the limit and JSON too deep for the parser both give InputError."""
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(40):
        value = {"arrayValue": {"values": [value]}}
    assert "nested more than" in _error(_request_json(attributes=[{"key": "deep", "value": value}])).message
    assert "nested too deeply" in _error("[" * 100_000 + "]" * 100_000).message


# --- protobuf request errors -------------------------------------------------


def _proto_with(**fields: Any) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes(range(16))
    span.span_id = bytes(range(8))
    for name, value in fields.items():
        if name == "status_code":
            span.status.code = value
        else:
            setattr(span, name, value)
    return request.SerializeToString()


@pytest.mark.parametrize(
    ("fields", "location", "fragment"),
    [
        ({"trace_id": b"\x01\x02\x03"}, "traceId", "expected 16 bytes, got 3"),
        ({"span_id": b""}, "spanId", "expected 8 bytes, got 0"),
        ({"parent_span_id": b"\x01" * 9}, "parentSpanId", "expected 8 bytes, got 9"),
        ({"status_code": 7}, "status.code", "expected a status code"),
    ],
)
def test_malformed_protobuf_spans_name_the_field(fields: dict[str, Any], location: str, fragment: str) -> None:
    """Protobuf spans with wrong id lengths or an unknown status code give the same paths as JSON."""
    with pytest.raises(InputError) as info:
        decode_proto_request(_proto_with(**fields), source="grpc")
    assert info.value.location == f"resourceSpans[0].scopeSpans[0].spans[0].{location}"
    assert info.value.source == "grpc"
    assert fragment in info.value.message


def test_protobuf_attributes_of_every_kind_in_any_order_keep_their_order_and_positions() -> None:
    """Strings and ints first, then other kinds, decode in key order; a bad value after them names its own index.

    The expected values are the attributes as built here: an empty value is dropped at the top level, an empty
    string is kept; the string table index (a profiles-only member) is refused at its position, 3.
    """
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes(range(16))
    span.span_id = bytes(range(8))
    for key, member, value in [("s", "string_value", "x"), ("n", "int_value", 5), ("b", "bool_value", True),
                               ("empty", None, None), ("blank", "string_value", ""), ("d", "double_value", 0.5)]:
        kv = span.attributes.add(key=key)
        if member is not None:
            setattr(kv.value, member, value)
    (record,) = decode_proto_request(request.SerializeToString())
    assert list(record.attributes.items()) == [("s", "x"), ("n", 5), ("b", True), ("blank", ""), ("d", 0.5)]
    span.attributes[3].value.string_value_strindex = 1
    with pytest.raises(InputError) as info:
        decode_proto_request(request.SerializeToString())
    assert info.value.location == "resourceSpans[0].scopeSpans[0].spans[0].attributes[3].value"


def test_truncated_protobuf_raises_input_error(sdk_spans: list[ReadableSpan]) -> None:
    """A protobuf request cut short is reported as not a valid ExportTraceServiceRequest."""
    blob = encode_spans(sdk_spans).SerializeToString()
    with pytest.raises(InputError, match="not a valid protobuf ExportTraceServiceRequest"):
        decode_proto_request(blob[: len(blob) // 2])


def test_proto_decoder_rejects_non_bytes() -> None:
    """Passing a str is a programming error and raises TypeError, not InputError."""
    with pytest.raises(TypeError):
        decode_proto_request("not bytes")  # type: ignore[arg-type]


# --- files ------------------------------------------------------------------


def _jsonl(spans: list[ReadableSpan], per_line: int) -> bytes:
    lines = [json.dumps(spans_to_otlp_dict(spans[i : i + per_line]), separators=(",", ":")) for i in range(0, len(spans), per_line)]
    return ("\n".join(lines) + "\n").encode()


def _collect(path: Path) -> tuple[list[SpanRecord], list[InputError]]:
    errors: list[InputError] = []
    records = list(read_spans(str(path), on_error=errors.append))
    return records, errors


def test_read_pretty_printed_document(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A multi-line OTLP/JSON document written by write_otlp_json reads as one request."""
    path = tmp_path / "trace.json"
    write_otlp_json(sdk_spans, str(path))
    assert path.read_text().count("\n") > 10
    _assert_records_match(list(read_spans(str(path))), sdk_spans)


def test_read_json_lines_plain_and_gzipped(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """JSON Lines (one request per line), plain or gzipped and with blank lines, yield every span in order."""
    data = _jsonl(sdk_spans, per_line=1)
    plain = tmp_path / "spans.jsonl"
    plain.write_bytes(b"\n" + data.replace(b"\n", b"\n\n", 1))
    zipped = tmp_path / "spans.jsonl.gz"
    zipped.write_bytes(gzip.compress(data))
    for path in (plain, zipped):
        records = list(read_spans(str(path)))
        assert [r.span_id for r in records] == [s.context.span_id for s in sdk_spans]
        _assert_records_match(records, sdk_spans)


def test_read_json_lines_written_by_the_writer(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """Appending write_otlp_json(lines=True) output line by line gives a readable JSON Lines file."""
    path = tmp_path / "out.jsonl"
    parts = []
    for span in sdk_spans:
        part = tmp_path / "part.jsonl"
        write_otlp_json([span], str(part), lines=True)
        parts.append(part.read_bytes())
    path.write_bytes(b"".join(parts))
    _assert_records_match(list(read_spans(str(path))), sdk_spans)


@pytest.mark.parametrize("name", ["trace.bin", "trace.pb", "trace.binpb.gz", "trace.protobuf"])
def test_read_protobuf_files(tmp_path: Path, sdk_spans: list[ReadableSpan], name: str) -> None:
    """A serialised request is read by content sniffing or by extension, gzipped or not."""
    blob = encode_spans(sdk_spans).SerializeToString()
    path = tmp_path / name
    path.write_bytes(gzip.compress(blob) if name.endswith(".gz") else blob)
    _assert_records_match(list(read_spans(str(path))), sdk_spans)


def test_read_array_of_requests(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A document whose root is an array of requests yields the spans of each."""
    path = tmp_path / "many.json"
    path.write_text(json.dumps([spans_to_otlp_dict([s]) for s in sdk_spans], indent=2))
    _assert_records_match(list(read_spans(str(path))), sdk_spans)


def test_corrupt_line_in_the_middle_is_reported_and_reading_continues(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """Line 2 of 4 is corrupt: one error with location "line 2", and the spans of lines 1, 3 and 4 still arrive."""
    lines = _jsonl(sdk_spans, per_line=1).splitlines()
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join([lines[0], b'{"resourceSpans": [{"scopeSpans": [', lines[1], lines[2]]) + b"\n")
    records, errors = _collect(path)
    assert [r.span_id for r in records] == [s.context.span_id for s in sdk_spans]
    assert len(errors) == 1
    assert errors[0].source == str(path) and errors[0].location == "line 2"
    assert "not valid JSON" in errors[0].message


def test_structural_error_in_a_line_names_line_and_field(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A well-formed JSON line with a bad span id reports the line and the field path; its spans are skipped."""
    good = _jsonl(sdk_spans[:1], per_line=1)
    bad = json.dumps(_request_json(spanId="123")).encode() + b"\n"
    path = tmp_path / "spans.jsonl"
    path.write_bytes(good + bad + good)
    records, errors = _collect(path)
    assert len(records) == 2
    assert [e.location for e in errors] == ["line 2, resourceSpans[0].scopeSpans[0].spans[0].spanId"]


def test_default_on_error_raises_after_streaming_earlier_lines(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """Without on_error the reader yields the good first line lazily, then raises InputError at line 3."""
    lines = _jsonl(sdk_spans, per_line=1).splitlines()
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join([lines[0], lines[1], b"not json", lines[2]]))
    spans = read_spans(str(path))
    assert next(spans).span_id == sdk_spans[0].context.span_id
    assert next(spans).span_id == sdk_spans[1].context.span_id
    with pytest.raises(InputError) as info:
        next(spans)
    assert info.value.location == "line 3"


def test_truncated_first_line_followed_by_good_lines(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A first line cut off mid-structure is reported as line 1, not mistaken for a multi-line document."""
    lines = _jsonl(sdk_spans, per_line=1).splitlines()
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join([b'{"resourceSpans":[', lines[1], lines[2]]))
    records, errors = _collect(path)
    assert len(records) == 2
    assert [e.location for e in errors] == ["line 1"]


def test_corrupt_multi_line_document_is_one_error(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A pretty-printed document with a syntax error gives one error naming line and column in the document."""
    path = tmp_path / "trace.json"
    write_otlp_json(sdk_spans, str(path))
    text = path.read_text().splitlines()
    text[5] = text[5] + ","  # a trailing comma JSON does not allow
    path.write_text("\n".join(text))
    records, errors = _collect(path)
    assert records == []
    assert len(errors) == 1
    assert errors[0].location is not None and errors[0].location.startswith("line ")


def test_truncated_gzip_reports_after_the_lines_it_could_read(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A gzip stream cut short yields the complete leading lines, then one error about truncated gzip data."""
    data = _jsonl(sdk_spans * 50, per_line=1)
    blob = gzip.compress(data)
    path = tmp_path / "spans.jsonl.gz"
    path.write_bytes(blob[: len(blob) * 3 // 4])
    records, errors = _collect(path)
    assert 0 < len(records) < len(sdk_spans) * 50
    assert len(errors) == 1
    assert "truncated or corrupt gzip data" in errors[0].message
    assert errors[0].location == f"line {len(records) + 1}"


def test_truncated_gzip_protobuf_is_one_error(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A truncated gzipped protobuf file gives exactly one InputError and no spans."""
    blob = gzip.compress(encode_spans(sdk_spans).SerializeToString())
    path = tmp_path / "trace.pb.gz"
    path.write_bytes(blob[:-10])
    records, errors = _collect(path)
    assert records == [] and len(errors) == 1
    assert "gzip" in errors[0].message


def test_file_that_is_neither_json_nor_protobuf(tmp_path: Path) -> None:
    """Plain text that is neither format gives one InputError saying so."""
    path = tmp_path / "notes.txt"
    path.write_text("hello, these are not spans\n" * 3)
    records, errors = _collect(path)
    assert records == []
    assert len(errors) == 1 and "neither OTLP/JSON nor OTLP protobuf" in errors[0].message
    with pytest.raises(InputError, match="neither"):
        list(read_spans(str(path)))


def test_empty_and_missing_files(tmp_path: Path) -> None:
    """An empty file has no spans and no errors; a missing file is an InputError naming it."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert _collect(empty) == ([], [])
    missing = tmp_path / "missing.json"
    with pytest.raises(InputError, match="cannot open") as info:
        list(read_spans(str(missing)))
    assert info.value.source == str(missing)


def test_utf8_bom_is_tolerated(tmp_path: Path, sdk_spans: list[ReadableSpan]) -> None:
    """A UTF-8 byte-order mark before JSON Lines does not break detection or the first line."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _jsonl(sdk_spans, per_line=2))
    _assert_records_match(list(read_spans(str(path))), sdk_spans)
