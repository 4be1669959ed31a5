"""Fuzzing the OTLP readers: whatever the input, the only exception is InputError, and decoding finishes quickly."""

from __future__ import annotations

import copy
import gzip
import json
import os
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.errors import InputError
from otel_loopguard.otlp.read import decode_json_request, decode_proto_request, read_spans
from otel_loopguard.sdk.otlp_write import spans_to_otlp_dict
from tests.support.json_paths import json_paths

# A generous deadline: far above any honest decode of these small inputs, so
# only a hang or a blow-up trips it, not a busy machine.
FUZZ = settings(max_examples=120, deadline=5000, suppress_health_check=[HealthCheck.too_slow])


def _real_spans() -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "fuzz"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("fuzz")
    with tracer.start_as_current_span("invoke_agent") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span(
            "execute_tool",
            attributes={"s": "x", "i": -3, "f": 0.5, "b": True, "y": b"\x01", "a": [1, 2], "m": {"k": ["v"]}},
        ) as tool:
            tool.add_event("e", {"n": 1})
            tool.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


SPANS = _real_spans()
VALID_JSON = spans_to_otlp_dict(SPANS)
VALID_PROTO = encode_spans(SPANS).SerializeToString()

OTLP_KEYS = [
    "resourceSpans", "resource_spans", "resource", "attributes", "scopeSpans", "scope_spans", "scope", "spans",
    "traceId", "spanId", "parentSpanId", "name", "startTimeUnixNano", "endTimeUnixNano", "status", "code",
    "message", "events", "timeUnixNano", "key", "value", "values", "stringValue", "intValue", "boolValue",
    "doubleValue", "arrayValue", "kvlistValue", "bytesValue", "instrumentationLibrarySpans",
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "NaN", "-Infinity", "STATUS_CODE_ERROR",
                      "12345678901234567890123", "AAEC", ""])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(OTLP_KEYS) | st.text(max_size=8), children, max_size=5),
    max_leaves=40,
)


def _only_input_errors(call: Any) -> list[SpanRecord]:
    try:
        result = call()
    except InputError as error:
        assert error.message
        return []
    assert isinstance(result, list) and all(isinstance(r, SpanRecord) for r in result)
    return result


@FUZZ
@given(JSON_VALUES)
def test_generated_json_values_give_records_or_input_error(value: Any) -> None:
    """Arbitrary JSON values (with OTLP field names as keys) decode or raise InputError, as objects and as text."""
    _only_input_errors(lambda: decode_json_request(value))
    try:
        text = json.dumps(value)
    except ValueError:
        return
    _only_input_errors(lambda: decode_json_request(text))


@FUZZ
@given(st.data())
def test_mutated_real_requests_give_records_or_input_error(data: st.DataObject) -> None:
    """A real request with one subtree replaced or removed decodes or raises InputError with a location."""
    document = copy.deepcopy(VALID_JSON)
    path = data.draw(st.sampled_from(json_paths(document)[1:]))
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans()):
        parent[path[-1]] = data.draw(JSON_VALUES)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    try:
        records = decode_json_request(document)
    except InputError as error:
        assert error.location is None or error.location.startswith("resourceSpans")
        return
    assert len(records) <= 2


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_give_records_or_input_error(blob: bytes) -> None:
    """Random bytes fed to both request decoders never raise anything but InputError."""
    _only_input_errors(lambda: decode_json_request(blob))
    _only_input_errors(lambda: decode_proto_request(blob))


@FUZZ
@given(st.integers(min_value=0, max_value=len(VALID_PROTO)), st.lists(st.tuples(st.integers(0, len(VALID_PROTO) - 1), st.integers(0, 255)), max_size=4))
def test_truncated_and_corrupted_protobuf_give_records_or_input_error(cut: int, flips: list[tuple[int, int]]) -> None:
    """A real protobuf request cut at any point, with a few bytes overwritten, decodes or raises InputError."""
    blob = bytearray(VALID_PROTO)
    for index, byte in flips:
        blob[index] = byte
    records = _only_input_errors(lambda: decode_proto_request(bytes(blob[:cut])))
    assert len(records) <= 2


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=400),
        st.lists(JSON_VALUES, max_size=4).map(lambda vs: "\n".join(json.dumps(v) for v in vs).encode()),
        st.integers(0, len(VALID_PROTO)).map(lambda n: VALID_PROTO[:n]),
    ),
    st.sampled_from(["plain", "gzip", "gzip-truncated"]),
    st.sampled_from(["spans.jsonl", "spans.pb", "spans"]),
)
def test_files_of_any_content_report_only_input_errors(content: bytes, packing: str, name: str) -> None:
    """read_spans over arbitrary content, plain or gzipped (even cut short), only reports InputError."""
    if packing != "plain":
        content = gzip.compress(content)
        if packing == "gzip-truncated":
            content = content[: max(0, len(content) - 7)]
    errors: list[InputError] = []
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name)
        with open(path, "wb") as fh:
            fh.write(content)
        records = list(read_spans(path, on_error=errors.append))
    assert all(isinstance(r, SpanRecord) for r in records)
    assert all(isinstance(e, InputError) and e.source == path for e in errors)
