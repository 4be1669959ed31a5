"""serve in a pipeline: agent (SDK, no processor) → OTLP/gRPC → rotel → serve → OTLP → recording backend.

The agent only exports spans; rotel forwards them to serve's OTLP/gRPC receiver; serve judges the trace and sends
its ``loopguard.verdict`` event and metrics through real SDK OTLP exporters to the recording backend.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.server import Server
from tests.support.collector_fixtures import ROTEL_AGENT_OVERRIDE
from tests.support.external import unavailable
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.rotel import RotelCollector

pytestmark = pytest.mark.e2e

WAIT = 60.0  # a deadline: every wait returns as soon as its condition holds


@pytest.fixture
def serve(otlp_receiver: RecordingOTLPReceiver) -> Iterator[tuple[Server, LoggerProvider, MeterProvider]]:
    """An in-process serve whose events and metrics go over OTLP/gRPC to the recording backend."""
    endpoint = f"http://{otlp_receiver.endpoint}"
    resource = Resource.create({"service.name": "otel-loopguard"})
    logger_provider = LoggerProvider(resource=resource)
    exporter = OTLPLogExporter(endpoint=endpoint, insecure=True)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    meter_provider = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, insecure=True),
                                      export_interval_millis=60_000)
    ])
    server = Server(LoopGuardConfig(), grpc_address="127.0.0.1:0", http_address=None, idle=0.5,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    server.start()
    try:
        yield server, logger_provider, meter_provider
    finally:
        server.stop()
        logger_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def rotel_to_serve(
    rotel_unavailable_reason: str | None, serve: tuple[Server, LoggerProvider, MeterProvider]
) -> Iterator[RotelCollector]:
    """A rotel agent whose OTLP exporter points at serve's gRPC receiver."""
    if rotel_unavailable_reason is not None:
        unavailable(f"rotel collector unavailable: {rotel_unavailable_reason}")
    collector = RotelCollector(f"127.0.0.1:{serve[0].grpc_port}", agent=ROTEL_AGENT_OVERRIDE)
    collector.start()
    try:
        yield collector
    except Exception:
        print(collector.diagnostics())
        raise
    finally:
        collector.stop()
        collector.remove_files()


def test_agent_without_processor_gets_verdict_through_rotel_and_serve(
    rotel_to_serve: RotelCollector, serve: tuple[Server, LoggerProvider, MeterProvider],
    otlp_receiver: RecordingOTLPReceiver,
) -> None:
    """A looping agent's plain GenAI spans reach serve via rotel; the stuck event and the metrics reach the backend."""
    server, logger_provider, meter_provider = serve
    judged = threading.Event()
    server.add_listener(lambda event: judged.set() if event.verdict.kind == "stuck" else None)
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "looping-agent"}))
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=rotel_to_serve.grpc_endpoint, insecure=True),
                           schedule_delay_millis=50)
    )
    tracer = tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent researcher", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher",
    }) as root:
        trace_id = f"{root.get_span_context().trace_id:032x}"
        tool_span_ids = []
        for _ in range(4):
            with tracer.start_as_current_span("execute_tool search", attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": json.dumps({"query": "weather in Paris"}),
                "gen_ai.tool.call.result": json.dumps({"hits": []}),
            }) as tool:
                tool_span_ids.append(f"{tool.get_span_context().span_id:016x}")
    assert tracer_provider.force_flush(30_000)
    tracer_provider.shutdown()

    def stuck_event(r: RecordingOTLPReceiver) -> bool:
        return any(rec["event_name"] == "loopguard.verdict" and rec["attributes"].get("loopguard.verdict") == "stuck"
                   for rec in r.log_records())

    # The event leaves serve's batch log processor on the flush, once serve has judged the spans rotel forwarded.
    assert judged.wait(WAIT), rotel_to_serve.diagnostics()
    assert logger_provider.force_flush(30_000)
    assert otlp_receiver.wait_for(stuck_event, timeout=WAIT), rotel_to_serve.diagnostics()
    record = next(r for r in otlp_receiver.log_records()
                  if r["event_name"] == "loopguard.verdict" and r["attributes"]["loopguard.verdict"] == "stuck")
    assert record["trace_id"] == trace_id
    assert record["span_id"] in tool_span_ids
    assert record["attributes"]["gen_ai.tool.name"] == "search"
    assert record["attributes"]["loopguard.verdict.previous"] == "working"
    assert record["severity_text"] == "WARN"
    assert record["resource"]["service.name"] == "otel-loopguard"
    assert meter_provider.force_flush(30_000)
    assert otlp_receiver.wait_for(
        lambda r: {"loopguard.verdicts", "loopguard.tool_calls"} <= {p["name"] for p in r.metric_points()}, timeout=WAIT
    )
    verdict_points = [p for p in otlp_receiver.metric_points() if p["name"] == "loopguard.verdicts"]
    assert any(p["attributes"]["loopguard.verdict"] == "stuck" and p["value"] >= 1 for p in verdict_points)
    calls = [p for p in otlp_receiver.metric_points() if p["name"] == "loopguard.tool_calls"]
    assert max(p["value"] for p in calls) == 4
