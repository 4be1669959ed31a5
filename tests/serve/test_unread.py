"""Unread input through ``serve``: an OTLP ``partial_success`` (``rejected_spans = 0``, an ``error_message``) on
every transport, the counter ``loopguard.spans.unread{reason}``, one WARNING per cause, a note on the report.

Expected counts come from the generator's scenario: ``no_content`` is five scripted tool calls and a final answer,
so six model calls, each one span of the anthropic SDK's own with content off (no message, no finish reason): none
of them readable.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from otel_loopguard.conventions.unread import CONVENTIONS_PAGE, NO_TOOL_CALLS
from tests.serve._support import EXPORT_METHOD, Harness, post, to_proto
from tests.support.recorded_fixtures import FIXTURES

LOGGER = "otel_loopguard.serve.server"
UNREADABLE = FIXTURES / "model_spans" / "anthropic_sdk__no_content.json"
READABLE = FIXTURES / "model_spans" / "openai_v2_span__same_call_loop.json"


def _with_trace_id(path: Path, trace_id: str) -> dict[str, Any]:
    """The recorded trace under another trace id (so three sends are three traces)."""
    doc = json.loads(path.read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["traceId"] = trace_id
    return doc


def _grpc_response(port: int, body: bytes) -> trace_service_pb2.ExportTraceServiceResponse:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(
            EXPORT_METHOD, request_serializer=None,
            response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString)
        response: trace_service_pb2.ExportTraceServiceResponse = export(body, timeout=60)
        return response


def _unread_points(h: Harness) -> dict[str, int]:
    data = h.metrics.get_metrics_data()
    points = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "loopguard.spans.unread" for p in m.data.data_points]
    return {str(p.attributes["loopguard.unread.reason"]): int(p.value) for p in points}


def test_partial_success_on_every_transport(caplog: pytest.LogCaptureFixture) -> None:
    """The same unreadable trace sent as OTLP/HTTP JSON, OTLP/HTTP protobuf and OTLP/gRPC (three trace ids), each
    finished before the next request. No answer warns about a trace still open (more spans may come); each finished
    trace's warning goes in the next answer to its sender (127.0.0.1 on both transports), once; every answer accepts
    every span; the counter holds 3 * 6 spans; the cause is logged once."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    docs = [_with_trace_id(UNREADABLE, f"{i:032x}") for i in (1, 2, 3)]
    with Harness() as h:
        status, body, _ = post(h.server.http_port, json.dumps(docs[0]).encode(), "application/json")
        # The trace is still open: nothing known yet, an empty answer.
        assert (status, json.loads(body)) == (200, {})
        h.server.finish_all()
        messages = []

        status, body, _ = post(h.server.http_port, to_proto(docs[1]), "application/x-protobuf")
        assert status == 200
        response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
        assert response.HasField("partial_success") and response.partial_success.rejected_spans == 0
        messages.append(response.partial_success.error_message)  # about trace 1
        h.server.finish_all()

        response = _grpc_response(h.server.grpc_port, to_proto(docs[2]))
        assert response.HasField("partial_success") and response.partial_success.rejected_spans == 0
        messages.append(response.partial_success.error_message)  # about trace 2
        h.server.finish_all()

        status, body, _ = post(h.server.http_port, b'{"resourceSpans": []}', "application/json")
        assert status == 200
        partial = json.loads(body)["partialSuccess"]
        # OTLP/JSON writes int64 as a decimal string; 0 rejected: every span was accepted.
        assert int(partial.get("rejectedSpans", 0)) == 0
        messages.append(partial["errorMessage"])  # about trace 3

        # Told once: the next answer is empty again.
        status, body, _ = post(h.server.http_port, b'{"resourceSpans": []}', "application/json")
        assert (status, json.loads(body)) == (200, {})

        for message in messages:
            assert "6 GenAI span(s) but no tool call could be read" in message
            assert "SPAN_ONLY" in message and CONVENTIONS_PAGE in message
        assert h.wait_reports(3)
        assert _unread_points(h) == {NO_TOOL_CALLS: 18}
        for report in h.reports:
            assert report.steps_used == 0
            assert [u["reason"] for u in report.as_dict()["unread"]] == [NO_TOOL_CALLS]
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len([w for w in warnings if "no tool call could be read" in w]) == 1


def test_readable_trace_gets_an_empty_answer() -> None:
    """Calls read from the model spans (content on the spans): no partial_success, nothing counted as unread."""
    with Harness() as h:
        status, body, _ = post(h.server.http_port, READABLE.read_bytes(), "application/json")
        assert (status, json.loads(body)) == (200, {})
        status, body, _ = post(h.server.http_port, to_proto(_with_trace_id(READABLE, f"{7:032x}")),
                               "application/x-protobuf")
        assert status == 200
        assert not trace_service_pb2.ExportTraceServiceResponse.FromString(body).HasField("partial_success")
        h.server.finish_all()
        assert h.wait_reports(2)
        assert _unread_points(h) == {}
        assert [r.verdict.kind for r in h.reports] == ["stuck", "stuck"]
