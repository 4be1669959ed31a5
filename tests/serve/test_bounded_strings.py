"""Every emitted string is bounded: a tool name of megabytes, or with control characters, cannot make an OTLP export
too big or a log line unreadable — in ``serve`` and in the in-process processor (both emit through sdk/emit.py)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.escape import MAX_NAME_CHARS, bounded_name
from otel_loopguard.sdk.emit import MAX_MESSAGE_CHARS, bounded_text
from otel_loopguard.sdk.providers import build_providers, service_resource
from otel_loopguard.serve.server import Server
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.proto_spans import kv, request_bytes

from ._support import post

GRPC_LIMIT = 4 * 1024 * 1024  # grpc's default maximum message size, the recording receiver's (and a Collector's)
HUGE = "huge_tool_" + "x" * (5 * 1024 * 1024)  # 5 MiB: over the limit on its own


def test_bounded_name_keeps_short_names_and_digests_the_rest() -> None:
    """128 printable characters pass unchanged; one more, or any control character, gives a 128-character name:
    115 characters of prefix (controls escaped), "~", and the first 12 hex digits of BLAKE2b-48 of the name."""
    name = "a" * 128
    assert bounded_name(name) == name
    longer = "a" * 129
    expected = "a" * 115 + "~" + hashlib.blake2b(longer.encode(), digest_size=6).hexdigest()
    assert bounded_name(longer) == expected and len(expected) == 128
    evil = "search\x1b[2J\nrm"
    assert bounded_name(evil) == "search\\x1b[2J\\x0arm~" + hashlib.blake2b(evil.encode(), digest_size=6).hexdigest()
    # Distinct names sharing a long prefix stay distinct; the same name maps to the same value.
    assert bounded_name(HUGE) != bounded_name(HUGE + "y")
    assert bounded_name(HUGE) == bounded_name(str(HUGE))
    assert bounded_name("\udcff lone surrogate").startswith("\\udcff lone surrogate~")
    assert bounded_text("x" * 5000) == "x" * (MAX_MESSAGE_CHARS - 1) + "\u2026"
    assert bounded_text("two\nlines\x07") == "two\\x0alines\\x07"


def _tool_spans(trace_no: int, tool: str, calls: int) -> list[trace_pb2.Span]:
    t0 = 1_767_225_600 * 10**9
    spans = []
    for i in range(calls):
        start = t0 + i * 10**9
        spans.append(trace_pb2.Span(
            trace_id=trace_no.to_bytes(16, "big"), span_id=(trace_no * 64 + 2 + i).to_bytes(8, "big"),
            parent_span_id=(trace_no * 64 + 1).to_bytes(8, "big"), name="execute_tool",
            start_time_unix_nano=start, end_time_unix_nano=start + 500_000,
            attributes=[kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", tool),
                        kv("gen_ai.tool.call.arguments", '{"q": 1}'), kv("gen_ai.tool.call.result", '{"hits": []}')]))
    return spans


def test_serve_with_a_5_mib_tool_name_still_delivers_every_event_and_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two looping traces, one of whose tool is named with 5 MiB; serve's own providers (sdk/providers.py) export to
    a gRPC backend with the default 4 MiB limit. Both traces' stuck events arrive in one log batch, the metrics
    arrive, and the huge name is 128 characters wherever it appears."""
    with RecordingOTLPReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{receiver.endpoint}")
        # Nothing leaves before the flushes below, so both events travel in the same log batch.
        monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "600000")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
        logger_provider, meter_provider = build_providers({}, service_resource("otel-loopguard"))
        try:
            server = Server(LoopGuardConfig(), grpc_address=None, http_address="127.0.0.1:0", idle=600,
                            logger_provider=logger_provider, meter_provider=meter_provider)
            with server:
                for span in _tool_spans(1, HUGE, 4):  # one request a span: each 5 MiB, under max_body
                    assert post(server.http_port, request_bytes([span]), "application/x-protobuf")[0] == 200
                assert post(server.http_port, request_bytes(_tool_spans(2, "search", 4)),
                            "application/x-protobuf")[0] == 200
                assert logger_provider.force_flush(30_000)
                assert meter_provider.force_flush(30_000)
        finally:
            logger_provider.shutdown()
            meter_provider.shutdown()
        records = [r for r in receiver.log_records() if r["event_name"] == "loopguard.verdict"]
        stuck = {r["trace_id"][-2:]: r for r in records if r["attributes"]["loopguard.verdict"] == "stuck"}
        assert set(stuck) == {"01", "02"}  # the ordinary trace's event was not lost with the huge one's
        huge_event = stuck["01"]["attributes"]
        assert huge_event["gen_ai.tool.name"] == bounded_name(HUGE)
        assert re.fullmatch(r"huge_tool_x{105}~[0-9a-f]{12}", huge_event["gen_ai.tool.name"])
        nudges = [r for r in records if r["trace_id"].endswith("01") and "loopguard.message" in r["attributes"]]
        assert nudges and all(len(r["attributes"]["loopguard.message"]) <= MAX_MESSAGE_CHARS for r in nudges)
        assert all(len(str(r["body"])) <= MAX_MESSAGE_CHARS for r in records)
        assert bounded_name(HUGE) in nudges[0]["attributes"]["loopguard.message"]
        calls = {p["attributes"]["gen_ai.tool.name"]: p["value"] for p in receiver.metric_points()
                 if p["name"] == "loopguard.tool_calls"}
        assert calls == {bounded_name(HUGE): 4, "search": 4}
        for kind in ("logs", "metrics"):
            assert all(r.request.ByteSize() < 64 * 1024 for r in receiver.received(kind)), kind


def test_processor_bounds_names_in_events_span_events_and_metrics() -> None:
    """In-process: a tool and an agent name with an escape sequence and 300 characters are emitted bounded in the log
    event, the span event on the agent span and the metric attributes."""
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    processor = LoopGuardSpanProcessor(logger_provider=logger_provider, meter_provider=meter_provider, deferred=False)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    tracer = tracer_provider.get_tracer("agent")
    tool = "lookup\x1b[31m" + "t" * 300
    agent = "agent\r\n" + "a" * 300
    with tracer.start_as_current_span("invoke_agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}) as root:
        for _ in range(4):
            with tracer.start_as_current_span("execute_tool", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps({"q": 1}), "gen_ai.tool.call.result": "[]"}):
                pass
        span_events = [e for e in root.events if e.name == "loopguard.verdict"]  # type: ignore[attr-defined]
    processor.force_flush()
    records = [d.log_record for d in logs.get_finished_logs()]
    assert records and span_events
    for attributes in [dict(r.attributes or {}) for r in records] + [dict(e.attributes) for e in span_events]:
        assert attributes["gen_ai.tool.name"] == bounded_name(tool)
        assert attributes["gen_ai.agent.name"] == bounded_name(agent)
        assert len(attributes["gen_ai.tool.name"]) == MAX_NAME_CHARS
    data = reader.get_metrics_data()
    assert data is not None
    names = {str(v) for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
             for p in m.data.data_points for k, v in p.attributes.items() if k.startswith("gen_ai.")}
    assert names == {bounded_name(tool), bounded_name(agent)}
    tracer_provider.shutdown()
    logger_provider.shutdown()
    meter_provider.shutdown()
