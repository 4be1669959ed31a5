"""serve under hostile input: huge attribute keys, all-zero ids (issue 28's serve attacks, in-process)."""

from __future__ import annotations

import gc
import json
import logging
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from otel_loopguard.conventions.unread import INVALID_IDS, MAX_KEY_CHARS, MAX_KEYS, UNKNOWN_ATTRIBUTES
from tests.serve._support import Harness, post, to_proto
from tests.serve.test_unread import _grpc_response, _unread_points

LOGGER = "otel_loopguard.serve.server"
T0 = 1_767_225_600 * 10**9


def _rss_mb() -> float:
    """This process's resident memory now (VmRSS of /proc/self/status), in MiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _span(trace: int, span: int, attributes: dict[str, str]) -> dict[str, Any]:
    return {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": "execute_tool search",
            "startTimeUnixNano": str(T0 + span), "endTimeUnixNano": str(T0 + span + 10**8),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()]}


def _request(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}]}
                      ).encode()


def _huge_keys(request: int, size: int) -> dict[str, str]:
    """A tool span whose call content sits under 12 content-like keys of ``size`` characters, with a raw ESC and
    a newline in each (distinct per request, so every request is a new cause)."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    for k in range(12):
        attrs[f"acme.\x1b[2J\n{request:04d}{k:02d}{'x' * size}_input"] = "v"
    return attrs


def test_unread_keys_are_bounded_escaped_and_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    """20 requests, each one tool span with 12 content-like keys of 200 kB (48 MB of keys in all): memory after
    they finished grows by far less than those keys (they were kept whole before); each log line and answer is
    one escaped line within 2 048 characters naming at most 12 keys of at most 128 characters."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with Harness() as h:
        post(h.server.http_port, _request(_span(1, 1, {"a": "b"})), "application/json")  # warm the receiver up
        h.server.finish_all()
        gc.collect()
        before = _rss_mb()
        for r in range(20):
            status, body, _ = post(h.server.http_port, _request(_span(100 + r, 1, _huge_keys(r, 200_000))),
                                   "application/json")
            assert status == 200
            h.server.finish_all()
        gc.collect()
        grown = _rss_mb() - before
        assert _unread_points(h)[UNKNOWN_ATTRIBUTES] == 20
    assert grown < 24, f"RSS grew by {grown:.0f} MiB"
    message = json.loads(body)["partialSuccess"]["errorMessage"]
    assert len(message) <= 2048 and "\x1b" not in message and "\n" not in message
    logged = [r.getMessage() for r in caplog.records if r.name == LOGGER and UNKNOWN_ATTRIBUTES not in r.getMessage()
              and "attributes no convention reads" in r.getMessage()]
    assert len(logged) == 20
    for line in logged:
        assert len(line) <= 2048 + len("otel-loopguard serve: ") and "\n" not in line and "\x1b" not in line
        keys = line.split("reads: ", 1)[1].split("; describe", 1)[0].split(", ")
        assert len(keys) <= MAX_KEYS and all(len(k) <= MAX_KEY_CHARS for k in keys)
        assert keys[0].startswith("acme.\\x1b[2J\\x0a")


def test_all_zero_ids_are_rejected_in_partial_success() -> None:
    """Spans with an all-zero trace id or span id are rejected (rejected_spans, a message, the counter) on
    OTLP/HTTP JSON, protobuf and gRPC; the valid span beside them is judged."""
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "r"}
    doc = json.loads(_request(_span(0, 1, tool), _span(5, 0, tool), _span(5, 2, tool)))
    with Harness() as h:
        status, body, _ = post(h.server.http_port, json.dumps(doc).encode(), "application/json")
        partial = json.loads(body)["partialSuccess"]
        assert (status, partial["rejectedSpans"]) == (200, "2")
        assert partial["errorMessage"] == "2 span(s) rejected: an all-zero trace id or span id is invalid in OTLP"
        status, body, _ = post(h.server.http_port, to_proto(doc), "application/x-protobuf")
        response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
        assert response.partial_success.rejected_spans == 2
        assert _grpc_response(h.server.grpc_port, to_proto(doc)).partial_success.rejected_spans == 2
        assert _unread_points(h)[INVALID_IDS] == 6
        assert h.server.stats().spans == 3  # the one valid span of each request
