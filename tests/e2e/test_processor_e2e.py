"""``LoopGuardSpanProcessor`` end to end: agent loop in-process → SDK OTLP exporters → rotel → recording backend.

Run once over OTLP/gRPC and once over OTLP/HTTP (protobuf). The agent emits GenAI-convention spans; the verdict
event, the span event on the agent span and the metrics are asserted as the backend received them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.rotel import RotelCollector

pytestmark = pytest.mark.e2e

WAIT = 60.0  # a deadline: every wait returns as soon as its condition holds
ARGS = '{"query": "e2e-secret-arg"}'
RESULT = "e2e-secret-result"


@dataclass(frozen=True)
class Guarded:
    """Providers exporting to rotel, with loopguard on the tracer provider."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    meter_provider: MeterProvider
    processor: LoopGuardSpanProcessor

    def flush(self) -> None:
        """Push spans, events and metrics out of the SDK now."""
        assert self.tracer_provider.force_flush(30_000)
        assert self.processor.force_flush(30_000)
        assert self.meter_provider.force_flush(30_000)

    def shutdown(self) -> None:
        """Stop every export thread."""
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def _exporters(protocol: str, collector: RotelCollector) -> tuple[object, object, object]:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        endpoint = collector.grpc_endpoint
        return (OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=5),
                OTLPLogExporter(endpoint=endpoint, insecure=True, timeout=5),
                OTLPMetricExporter(endpoint=endpoint, insecure=True, timeout=5))
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    base = collector.http_endpoint
    # An explicit endpoint is used verbatim, so each signal's path is spelled out.
    return (HttpSpanExporter(endpoint=f"{base}/v1/traces", timeout=5),
            HttpLogExporter(endpoint=f"{base}/v1/logs", timeout=5),
            HttpMetricExporter(endpoint=f"{base}/v1/metrics", timeout=5))


@pytest.fixture(params=["grpc", "http"])
def guarded(request: pytest.FixtureRequest, rotel: RotelCollector) -> Iterator[Guarded]:
    """Loopguard in a TracerProvider whose spans, events and metrics go to rotel over gRPC or HTTP."""
    span_exporter, log_exporter, metric_exporter = _exporters(request.param, rotel)
    resource = Resource.create({"service.name": f"loopguard-processor-e2e-{request.param}"})
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    # Only force_flush exports, so the backend sees exactly one cumulative point set per metric.
    meter_provider = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(metric_exporter, export_interval_millis=600_000)])
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logger_provider,
                                       meter_provider=meter_provider)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    built = Guarded(tracer_provider, logger_provider, meter_provider, processor)
    try:
        yield built
    finally:
        built.shutdown()


def _run_agent(guarded: Guarded) -> tuple[trace.Span, list[trace.Span], list[str]]:
    """A GenAI-instrumented agent that repeats one search until loopguard says stop."""
    tracer = guarded.tracer_provider.get_tracer("e2e.agent")
    tools: list[trace.Span] = []
    actions: list[str] = []
    with tracer.start_as_current_span("invoke_agent research_agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "research_agent"}) as agent:
        for _ in range(10):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": ARGS}) as tool:
                tool.set_attribute("gen_ai.tool.call.result", RESULT)
            tools.append(tool)
            decision = guarded.processor.check()
            actions.append(decision.action)
            if decision.action == "stop":
                break
    return agent, tools, actions


def test_verdicts_reach_backend_through_collector(
    guarded: Guarded, otlp_receiver: RecordingOTLPReceiver, rotel: RotelCollector
) -> None:
    """The nudge and stop events, the agent's span events and loopguard's metrics arrive at the backend."""
    agent, tools, actions = _run_agent(guarded)
    assert actions == ["none", "none", "nudge", "stop"]
    guarded.flush()

    def arrived(r: RecordingOTLPReceiver) -> bool:
        names = {p["name"] for p in r.metric_points()}
        return (len(r.spans()) >= 5 and len(r.log_records()) >= 2
                and {"loopguard.verdicts", "loopguard.interventions", "loopguard.tool_calls"} <= names)

    assert otlp_receiver.wait_for(arrived, WAIT), (
        f"spans={len(otlp_receiver.spans())} logs={otlp_receiver.log_records()} "
        f"metrics={[p['name'] for p in otlp_receiver.metric_points()]}\n{rotel.diagnostics()}")

    trace_id = format(agent.get_span_context().trace_id, "032x")
    records = [r for r in otlp_receiver.log_records() if r["event_name"] == "loopguard.verdict"]
    assert [r["attributes"]["loopguard.intervention"] for r in records] == ["nudge", "stop"]
    nudge, stop = records
    for record, tool in ((nudge, tools[2]), (stop, tools[3])):
        assert record["trace_id"] == trace_id
        assert record["span_id"] == format(tool.get_span_context().span_id, "016x")
        assert record["severity_number"] == SeverityNumber.WARN.value
        assert record["scope"] == "otel_loopguard"
    attrs = nudge["attributes"]
    assert (attrs["loopguard.verdict"], attrs["loopguard.verdict.previous"], attrs["loopguard.rule"]) == (
        "stuck", "working", "period")
    assert (attrs["loopguard.period"], attrs["loopguard.repetitions"], attrs["loopguard.cycle.start"],
            attrs["loopguard.steps"]) == (1, 3, 0, 3)
    assert isinstance(attrs["loopguard.period"], int) and isinstance(attrs["loopguard.steps"], int)
    assert (attrs["gen_ai.tool.name"], attrs["gen_ai.agent.name"]) == ("search", "research_agent")
    assert nudge["body"] == attrs["loopguard.message"]
    for record in records:
        for value in [*record["attributes"].values(), record["body"]]:
            assert "e2e-secret" not in str(value)

    spans = {s["span_id"]: s for s in otlp_receiver.spans()}
    agent_span = spans[format(agent.get_span_context().span_id, "016x")]
    assert agent_span["trace_id"] == trace_id
    assert [(name, a["loopguard.intervention"]) for name, a in agent_span["events"]] == [
        ("loopguard.verdict", "nudge"), ("loopguard.verdict", "stop")]
    assert agent_span["events"][0][1] == nudge["attributes"]
    assert [s for s in spans.values() if s["events"] and s is not agent_span] == []

    points = otlp_receiver.metric_points()
    verdicts = [p for p in points if p["name"] == "loopguard.verdicts"]
    assert [(p["attributes"], p["value"], p["unit"]) for p in verdicts] == [(
        {"loopguard.verdict": "stuck", "loopguard.verdict.previous": "working", "loopguard.rule": "period",
         "gen_ai.agent.name": "research_agent", "loopguard.step.kind": "tool"}, 1, "{transition}")]
    interventions = {p["attributes"]["loopguard.intervention"]: p for p in points
                     if p["name"] == "loopguard.interventions"}
    assert {k: (p["value"], p["attributes"]["loopguard.rule"]) for k, p in interventions.items()} == {
        "nudge": (1, "period"), "stop": (1, "period")}
    tool_calls = [p for p in points if p["name"] == "loopguard.tool_calls"]
    assert [(p["attributes"], p["value"], p["monotonic"]) for p in tool_calls] == [
        ({"gen_ai.tool.name": "search"}, 4, True)]
    steps = [p for p in points if p["name"] == "loopguard.trace.steps"]
    assert [(p["count"], p["sum"]) for p in steps] == [(1, 4)]
