"""Shutdown: ``force_flush`` and ``shutdown`` deliver pending verdict events, can be repeated, and a process that
simply exits loses no verdict event (the SDK providers' atexit shutdown delivers them)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.reliability.otlp import agent_loop, build_otlp_pipeline, received_verdict_keys, verdict_keys
from tests.support.otlp_receiver import LOGS, METRICS, RecordingOTLPReceiver

REPO_ROOT = Path(__file__).resolve().parents[2]
# Deadlines, not waits: a flush or a shutdown with a healthy backend takes 10-160 ms even with three busy loops on
# two cores. FLUSH_MS bounds force_flush, which returns as soon as the export has returned. SHUTDOWN_S is half the
# one-minute batch delay: a shutdown that waited for the batch timer (or hung) takes longer.
FLUSH_MS = 30_000
SHUTDOWN_S = 30.0


def test_force_flush_and_shutdown_deliver_pending_events_and_can_be_repeated(
    otlp_receiver: RecordingOTLPReceiver,
) -> None:
    """With a one-minute batch delay nothing leaves on its own; ``force_flush`` delivers every pending event before
    it returns, a second flush and two shutdowns are harmless, and spans after shutdown are ignored quietly."""
    pipeline = build_otlp_pipeline("http://" + otlp_receiver.endpoint, schedule_delay_millis=60_000)
    agent_loop(pipeline, 20)
    assert len(verdict_keys(pipeline)) == 40
    assert received_verdict_keys(otlp_receiver.log_records()) == set()  # still pending in the SDK's queue

    processor = pipeline.processor
    assert processor.force_flush(FLUSH_MS) is True
    # force_flush returned only after the exporter's call returned, so the receiver has already recorded them.
    assert verdict_keys(pipeline) <= received_verdict_keys(otlp_receiver.log_records())
    assert processor.force_flush(FLUSH_MS) is True

    processor.shutdown()
    processor.shutdown()
    before = len(pipeline.events)
    agent_loop(pipeline, 3)
    assert len(verdict_keys(pipeline)) == before
    assert processor.errors == 0
    assert pipeline.shutdown() < SHUTDOWN_S
    pipeline.shutdown()  # every provider tolerates a second shutdown


EXIT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[2])
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

    endpoint = sys.argv[1]
    # Created in this order on purpose: atexit runs handlers last-in first-out, so the tracer provider (and the
    # processor's final metrics) shuts down first, then the logger provider, then the meter provider.
    meters = MeterProvider(metric_readers=[PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=endpoint, insecure=True), export_interval_millis=3_600_000)])
    logs = LoggerProvider()
    # A one-hour delay: only the exit-time shutdown can deliver these events.
    logs.add_log_record_processor(BatchLogRecordProcessor(
        OTLPLogExporter(endpoint=endpoint, insecure=True), schedule_delay_millis=3_600_000))
    processor = LoopGuardSpanProcessor(LoopGuardConfig(signature_key=b"k" * 16),
                                       logger_provider=logs, meter_provider=meters)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("exit-test")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": "x"}', "gen_ai.tool.call.result": "none"}
    for _ in range(3):
        with tracer.start_as_current_span("agent run"):
            for _ in range(6):
                tracer.start_span("execute_tool search", attributes=tool).end()
    abandoned = tracer.start_span("agent run that never ends")
    for _ in range(2):
        tracer.start_span("execute_tool search", context=None, attributes=tool).end()
    # No flush, no shutdown: the process just ends.
    """
)


def test_a_process_that_exits_without_flushing_loses_no_verdict_event(
    otlp_receiver: RecordingOTLPReceiver, tmp_path: Path
) -> None:
    """A child process loops, then exits without flush or shutdown; the SDK's atexit shutdown delivers every
    verdict event and the tool-call metric over OTLP to this test's receiver."""
    script = tmp_path / "agent_exits.py"
    script.write_text(EXIT_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), "http://" + otlp_receiver.endpoint, str(REPO_ROOT)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    # The child has exited, so every request it made has been recorded already: a nudge at the third identical
    # call and a stop at the fourth, for each of the three looping runs.
    received = received_verdict_keys(otlp_receiver.log_records())
    assert sorted((steps, action) for _, steps, action in received) == [(3, "nudge")] * 3 + [(4, "stop")] * 3
    assert len({trace_id for trace_id, _, _ in received}) == 3
    assert otlp_receiver.received(LOGS) and otlp_receiver.received(METRICS)
    tool_calls = [p["value"] for p in otlp_receiver.metric_points() if p["name"] == "loopguard.tool_calls"]
    assert sum(tool_calls) == 3 * 6 + 2
