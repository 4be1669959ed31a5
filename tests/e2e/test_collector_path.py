"""The collector path: real SDK and OTLP exporters → real rotel collector → recording OTLP backend.

What ``rotel==0.0.1a15`` (agent ``0.0.1-alpha10``) does with our telemetry, as checked here: it accepts traces, logs
and metrics over both OTLP/gRPC and OTLP/HTTP (protobuf) with no extra flags, and ``--exporter otlp`` forwards all
three over gRPC. Log records keep ``event_name`` (OTLP field 12), trace and span ids, severity and attributes; span
events and histogram buckets survive. Known limitations: the HTTP receiver is only exercised with protobuf
payloads here (the SDK's HTTP exporters send protobuf, not OTLP/JSON), and rotel batches for ``batch_timeout``
(50 ms in :class:`~tests.support.rotel.RotelCollector`) before forwarding, so waits are bounded by
:meth:`~tests.support.otlp_receiver.RecordingOTLPReceiver.wait_for`, never by sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
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

from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.rotel import RotelCollector

pytestmark = pytest.mark.e2e

WAIT = 60.0  # a deadline: every wait returns as soon as its condition holds
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Pipeline:
    """The three SDK providers of one test, each exporting over OTLP to rotel."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    meter_provider: MeterProvider

    def flush(self) -> None:
        """Push everything buffered out of the SDK now."""
        assert self.tracer_provider.force_flush(30_000)
        assert self.logger_provider.force_flush(30_000)
        assert self.meter_provider.force_flush(30_000)

    def shutdown(self) -> None:
        """Stop the export threads so nothing outlives the test."""
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def _build_pipeline(protocol: str, collector: RotelCollector, service: str) -> Pipeline:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter(endpoint=collector.grpc_endpoint, insecure=True, timeout=5)
        log_exporter = OTLPLogExporter(endpoint=collector.grpc_endpoint, insecure=True, timeout=5)
        metric_exporter = OTLPMetricExporter(endpoint=collector.grpc_endpoint, insecure=True, timeout=5)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # An explicit endpoint argument is used verbatim, so the per-signal path must be spelled out.
        span_exporter = OTLPSpanExporter(endpoint=f"{collector.http_endpoint}/v1/traces", timeout=5)
        log_exporter = OTLPLogExporter(endpoint=f"{collector.http_endpoint}/v1/logs", timeout=5)
        metric_exporter = OTLPMetricExporter(endpoint=f"{collector.http_endpoint}/v1/metrics", timeout=5)

    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    # A long interval: only force_flush exports, so each test sees exactly the points it recorded.
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    return Pipeline(tracer_provider, logger_provider, meter_provider)


@pytest.fixture(params=["grpc", "http"])
def pipeline(request: pytest.FixtureRequest, rotel: RotelCollector) -> Iterator[Pipeline]:
    """SDK providers exporting to rotel over OTLP/gRPC or OTLP/HTTP (protobuf)."""
    built = _build_pipeline(request.param, rotel, service=f"loopguard-e2e-{request.param}")
    try:
        yield built
    finally:
        built.shutdown()


def test_spans_events_and_metrics_cross_the_collector(
    pipeline: Pipeline, otlp_receiver: RecordingOTLPReceiver, rotel: RotelCollector
) -> None:
    """Spans with a span event, a verdict log event tied to its span, and metric points all reach the backend."""
    tracer = pipeline.tracer_provider.get_tracer("e2e")
    logger = pipeline.logger_provider.get_logger("otel_loopguard")
    meter = pipeline.meter_provider.get_meter("otel_loopguard")
    verdicts = meter.create_counter("loopguard.verdicts", unit="{verdict}")
    steps = meter.create_histogram("loopguard.trace.steps", unit="{step}")

    with tracer.start_as_current_span("invoke_agent planner") as agent_span:
        with tracer.start_as_current_span(
            "execute_tool search", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        ) as tool_span:
            tool_span.add_event("loopguard.verdict", {"loopguard.verdict": "stuck", "loopguard.period": 2})
            logger.emit(
                event_name="loopguard.verdict",
                severity_number=SeverityNumber.WARN,
                attributes={"loopguard.verdict": "stuck", "loopguard.verdict.previous": "working"},
                context=trace.set_span_in_context(tool_span),
            )
    verdicts.add(1, {"loopguard.verdict": "stuck"})
    steps.record(7)
    pipeline.flush()

    trace_id = format(agent_span.get_span_context().trace_id, "032x")
    tool_span_id = format(tool_span.get_span_context().span_id, "016x")
    arrived = otlp_receiver.wait_for(
        lambda r: len(r.spans()) >= 2 and r.log_records() and len(r.metric_points()) >= 2, WAIT
    )
    assert arrived, (
        f"spans={otlp_receiver.spans()} logs={otlp_receiver.log_records()} "
        f"metrics={otlp_receiver.metric_points()}\n{rotel.diagnostics()}"
    )

    spans = {s["name"]: s for s in otlp_receiver.spans()}
    assert set(spans) == {"invoke_agent planner", "execute_tool search"}
    tool = spans["execute_tool search"]
    assert tool["trace_id"] == trace_id
    assert tool["span_id"] == tool_span_id
    assert tool["parent_span_id"] == spans["invoke_agent planner"]["span_id"]
    assert tool["attributes"] == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    assert tool["events"] == [("loopguard.verdict", {"loopguard.verdict": "stuck", "loopguard.period": 2})]
    assert tool["resource"]["service.name"] == pipeline.tracer_provider.resource.attributes["service.name"]

    [record] = otlp_receiver.log_records()
    assert record["event_name"] == "loopguard.verdict"
    assert record["trace_id"] == trace_id
    assert record["span_id"] == tool_span_id
    assert record["severity_number"] == SeverityNumber.WARN.value
    assert record["attributes"] == {"loopguard.verdict": "stuck", "loopguard.verdict.previous": "working"}
    assert record["scope"] == "otel_loopguard"

    points = {p["name"]: p for p in otlp_receiver.metric_points()}
    assert points["loopguard.verdicts"]["type"] == "sum"
    assert points["loopguard.verdicts"]["value"] == 1
    assert points["loopguard.verdicts"]["unit"] == "{verdict}"
    assert points["loopguard.verdicts"]["attributes"] == {"loopguard.verdict": "stuck"}
    assert points["loopguard.trace.steps"]["type"] == "histogram"
    assert (points["loopguard.trace.steps"]["count"], points["loopguard.trace.steps"]["sum"]) == (1, 7)
    assert sum(points["loopguard.trace.steps"]["bucket_counts"]) == 1


@pytest.mark.parametrize("outage", ["refuse", "restart"])
def test_collector_redelivers_after_backend_outage(
    outage: str, rotel: RotelCollector, otlp_receiver: RecordingOTLPReceiver
) -> None:
    """A span sent while the backend refuses or is down arrives once the backend is back on the same port."""
    built = _build_pipeline("grpc", rotel, service="loopguard-e2e-outage")
    try:
        if outage == "refuse":
            otlp_receiver.fail_with(grpc.StatusCode.UNAVAILABLE)
        else:
            otlp_receiver.stop()
        output_mark = rotel.output_size()
        with built.tracer_provider.get_tracer("e2e").start_as_current_span("during outage"):
            pass
        assert built.tracer_provider.force_flush(30_000)
        if outage == "refuse":
            # Proof the outage was real: rotel tried and was turned away before we recover.
            assert otlp_receiver.wait_for(lambda r: r.refused("traces") >= 1, WAIT), rotel.diagnostics()
            assert otlp_receiver.spans() == []
            otlp_receiver.fail_with(None)
        else:
            # Proof the outage was real: rotel failed to connect at least once before the backend returns.
            assert rotel.wait_for_output("Exporting failed", WAIT, after=output_mark), rotel.diagnostics()
            assert otlp_receiver.attempts("traces") == 0
            otlp_receiver.start()
        assert otlp_receiver.wait_for(lambda r: len(r.spans()) == 1, WAIT), rotel.diagnostics()
        assert otlp_receiver.spans()[0]["name"] == "during outage"
    finally:
        built.shutdown()


def _run_policy_probe(require: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPGUARD_", "OTEL_", "PYTEST_"))}
    env["LOOPGUARD_E2E_ROTEL_AGENT"] = "/nonexistent/rotel-agent"
    if require:
        env["LOOPGUARD_REQUIRE_E2E"] = "1"
    node = "tests/e2e/test_collector_path.py::test_collector_redelivers_after_backend_outage[refuse]"
    return subprocess.run(
        [sys.executable, "-m", "pytest", node, "-q", "-rA", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a deadline for a hang: a pytest run with the SDK and gRPC imported takes seconds, more when loaded
        check=False,
    )


@pytest.mark.parametrize("require", [False, True], ids=["optional", "required"])
def test_missing_rotel_skips_unless_required(require: bool) -> None:
    """With no usable rotel binary, e2e tests skip by default and fail under LOOPGUARD_REQUIRE_E2E=1."""
    done = _run_policy_probe(require)
    output = done.stdout + done.stderr
    if require:
        assert done.returncode == 1, output
        assert "1 error" in output and "LOOPGUARD_REQUIRE_E2E=1" in output, output
    else:
        assert done.returncode == 0, output
        assert "1 skipped" in output and "/nonexistent/rotel-agent" in output, output
