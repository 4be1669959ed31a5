"""The typed (msgspec) OTLP/JSON decoder builds exactly the general decoder's records, or leaves the request to it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.otlp.json_general import _Bad, _request
from otel_loopguard.otlp.json_typed import decode_typed
from otel_loopguard.otlp.read import decode_json_request, read_spans
from tests.support.otlp_edges import SINGLE_CHANGES, SNAKE, SNAKE_ONLY, SPAN, changed_request, mutate, request_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"


def _general(request: Any) -> tuple[Any, ...]:
    try:
        return ("records", repr(_request(request)))
    except _Bad as exc:
        return ("error", exc.message, exc.location)


def _agree(text: str | bytes) -> bool:
    """Checks the typed decoder against the general one on ``text``; True when the typed one took it."""
    typed = decode_typed(text)
    if typed is None:
        return False
    # Whatever the typed path accepts, the general path accepts with the same records (repr: NaN prints alike).
    assert ("records", repr(typed)) == _general(json.loads(text))
    return True


def test_the_common_shape_takes_the_typed_path() -> None:
    """A well-formed span with string, int, bool, double, array and kvlist values and an event is decoded here."""
    span = copy.deepcopy(SPAN)
    span["attributes"] += [
        {"key": "d", "value": {"doubleValue": 0.5}}, {"key": "neg", "value": {"intValue": "-3"}},
        {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "stop"}, {"intValue": "2"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": False}}]}}},
        {"key": "raw", "value": {"bytesValue": "AAEC"}}, {"key": "empty", "value": {}}, {"key": "none"},
    ]
    request = request_of(span, copy.deepcopy(span), resource={"attributes": [
        {"key": "service.name", "value": {"stringValue": "svc"}}]})
    assert _agree(json.dumps(request))
    (record, _) = decode_typed(json.dumps(request).encode())  # type: ignore[misc]
    assert record.attributes["arr"] == ("stop", 2) and record.attributes["kv"] == {"a": False}
    assert "empty" not in record.attributes and "none" not in record.attributes
    assert record.resource == {"service.name": "svc"} and record.status_error is True


def test_numbers_for_times_and_names_for_status_codes_take_the_typed_path() -> None:
    """Exporters that write times as JSON numbers and status codes by name are read here too, alike."""
    span = copy.deepcopy(SPAN)
    span["startTimeUnixNano"] = 1767225600000000000
    span["endTimeUnixNano"] = 1767225600300000000
    span["status"] = {"code": "STATUS_CODE_ERROR", "message": "boom"}
    assert _agree(json.dumps(request_of(span)))
    (record,) = decode_typed(json.dumps(request_of(span)))  # type: ignore[misc]
    assert (record.start_ns, record.end_ns, record.status_error) == (1767225600000000000, 1767225600300000000, True)
    span["startTimeUnixNano"] = 2**64  # beyond uint64: the general decoder's to refuse
    assert decode_typed(json.dumps(request_of(span))) is None


def test_every_recorded_fixture_takes_the_typed_path() -> None:
    """Spans recorded from the real instrumentations are all in the shape the typed path reads."""
    fixtures = [path for path in sorted(FIXTURES.glob("*.json")) if not path.name.startswith("MANIFEST")]
    assert len(fixtures) > 40
    for path in fixtures:
        assert _agree(path.read_bytes()), path.name


@pytest.mark.parametrize(("field", "value"), SINGLE_CHANGES)
def test_typed_and_general_decoders_agree_on_each_edge_value(field: str, value: Any) -> None:
    """Each span field set to each edge value (or removed): the same records, or the general decoder's turn."""
    _agree(json.dumps(changed_request(field, value)))


@pytest.mark.parametrize(("camel", "value"), SNAKE_ONLY)
def test_snake_case_fields_are_left_to_the_general_decoder(camel: str, value: Any) -> None:
    """A snake_case field name is never read by the typed path (the general decoder knows their precedence)."""
    span = copy.deepcopy(SPAN)
    del span[camel]
    span[SNAKE[camel]] = copy.deepcopy(value)
    assert decode_typed(json.dumps(request_of(span))) is None


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_typed_and_general_decoders_agree_on_mutated_requests(data: st.DataObject) -> None:
    """Requests with fields set, replaced or removed at any depth: the same records, or the general decoder's turn."""
    span = copy.deepcopy(SPAN)
    request = request_of(span, resource={"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]})
    mutate(data, request, span)
    _agree(json.dumps(request))


_TEXT_EDGES = [
    # Duplicate keys: the last one wins in both, or the typed path steps aside.
    ('{"stringValue": "a", "stringValue": "b"}', True),
    ('{"stringValue": 5, "stringValue": "b"}', False),
    ('{"intValue": "1", "stringValue": "s"}', True),
    ('{"boolValue": true, "doubleValue": 1.5}', False),
    ('{"doubleValue": 1e400}', False),
    ('{"doubleValue": "NaN"}', True),
    ('{"doubleValue": 100000000000000000000000}', True),
    ('{"stringValue": "\\ud800"}', False),
    ('{"stringValue": "\\ud83d\\ude00"}', True),
    ('{"string_value": "x"}', False),
    ('{"stringValue": null}', False),
    ('{"arrayValue": null}', True),
    ('{"arrayValue": {"values": [NaN]}}', False),
    ('{"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "x"}}]}}', False),
    # An unknown field inside a value (a snake_case name, a future one) is the general decoder's.
    ('{"future": [1, {"x": null}], "stringValue": "s"}', False),
    ('{"stringValue": "s", "string_value": "t"}', False),
    ('{"future": NaN, "stringValue": "s"}', False),
    ('{"future": "\\ud800", "stringValue": "s"}', False),
]


@pytest.mark.parametrize(("value", "typed"), _TEXT_EDGES)
def test_json_text_edges(value: str, typed: bool) -> None:
    """Texts a dict cannot express (duplicate keys, escapes, NaN, huge numbers) agree or go to the general decoder."""
    span = copy.deepcopy(SPAN)
    span["attributes"] = []
    attributes = '"attributes": [{"key": "k", "value": ' + value + "}]"
    text = json.dumps(request_of(span)).replace('"attributes": []', attributes)
    assert _agree(text) is typed


@pytest.mark.parametrize("ignored", [b'"\xff"', b'"\xed\xa0\x80"', b'"ok \xc3\xa9"'])
def test_invalid_utf8_in_an_ignored_field_is_left_to_the_general_decoder(ignored: bytes) -> None:
    """msgspec would skip an ignored field without checking its UTF-8; the general decoder refuses the request."""
    text = b'{"ignored": ' + ignored + b', "resourceSpans": []}'
    valid = ignored.endswith(b'\xa9"')
    assert decode_typed(text) == ([] if valid else None)


def test_a_huge_number_in_an_ignored_field_is_skipped() -> None:
    """The documented difference: json.loads refuses digit strings over its limit, the typed path skips them."""
    text = '{"ignored": 1' + "0" * 5000 + ', "resourceSpans": []}'
    with pytest.raises(ValueError):
        json.loads(text)
    assert decode_typed(text) == []


def test_id_caches_never_answer_for_an_invalid_or_differently_sized_id() -> None:
    """A parent id remembered from one span is still refused as another span's trace id; upper case decodes alike."""
    first = copy.deepcopy(SPAN)
    second = copy.deepcopy(SPAN)
    second["traceId"] = first["parentSpanId"]
    assert decode_typed(json.dumps(request_of(first, second))) is None
    upper = copy.deepcopy(SPAN)
    upper["traceId"] = upper["traceId"].upper()
    spans = decode_typed(json.dumps(request_of(first, upper)))
    assert spans is not None and spans[0].trace_id == spans[1].trace_id == 0x0AF7651916CD43DD8448EB211C80319C


def test_the_readers_take_the_typed_path_and_fall_back(tmp_path: Path) -> None:
    """read_spans and decode_json_request give the general decoder's records and errors for any line."""
    good = json.dumps(request_of(copy.deepcopy(SPAN)))
    odd_span = copy.deepcopy(SPAN)
    odd_span["trace_id"] = odd_span.pop("traceId")
    odd = json.dumps(request_of(odd_span))
    bad = good.replace('"b7ad6b7169203331"', '"nothex"')
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join([good, odd, bad, good]) + "\n")
    errors: list[Any] = []
    records = list(read_spans(str(path), on_error=errors.append))
    assert len(records) == 3 and records[0] == records[1] == records[2]
    assert [(e.location, e.message) for e in errors] == [
        ("line 3, resourceSpans[0].scopeSpans[0].spans[0].spanId", "expected 16 hex digits, got 'nothex'")]
    assert decode_json_request(good.encode()) == decode_json_request(odd) == records[:1]
