"""A real export path around the processor: SDK batch processors and OTLP/gRPC exporters for spans, logs and
metrics, with small delays so outage tests run fast; plus an agent workload that times every tool span and counts
the exports made on its own thread."""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, VerdictEvent

TOOL = {"gen_ai.operation.name": "execute_tool"}


@dataclass
class OtlpPipeline:
    """Tracer, logger and meter providers exporting over OTLP/gRPC, with loopguard between them.

    Attributes:
        sdk_metrics: a reader for the SDK's own processor metrics (``otel.sdk.processor.log.processed`` counts
            dropped log records with ``error.type=queue_full``; needs ``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``).
        exports: calls of the three OTLP exporters' ``export``, by the ident of the thread that made them.
    """

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    meter_provider: MeterProvider
    processor: LoopGuardSpanProcessor
    sdk_metrics: InMemoryMetricReader
    sdk_meter_provider: MeterProvider
    events: list[VerdictEvent] = field(default_factory=list)
    exports: Counter[int] = field(default_factory=Counter)
    exports_lock: threading.Lock = field(default_factory=threading.Lock)

    def record_exports(self, exporter: Any) -> Any:
        """Wrap ``exporter.export`` (on this instance only) to count its calls by thread; returns the exporter."""
        export = exporter.export

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.exports_lock:
                self.exports[threading.get_ident()] += 1
            return export(*args, **kwargs)

        exporter.export = counted
        return exporter

    def exports_on_this_thread(self) -> int:
        """Export calls made so far on the calling thread."""
        with self.exports_lock:
            return self.exports[threading.get_ident()]

    def shutdown(self) -> float:
        """Shut every provider down; returns the seconds it took."""
        t = time.monotonic()
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
        self.sdk_meter_provider.shutdown()
        return time.monotonic() - t

    def dropped_logs(self) -> int:
        """Log records the SDK's batch processor dropped because its queue was full."""
        data = self.sdk_metrics.get_metrics_data()
        total = 0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == "otel.sdk.processor.log.processed":
                        total += sum(p.value for p in m.data.data_points
                                     if p.attributes.get("error.type") == "queue_full")
        return total


def build_otlp_pipeline(
    endpoint: str,
    *,
    config: LoopGuardConfig | None = None,
    timeout: float = 10.0,
    max_queue_size: int = 2048,
    schedule_delay_millis: int = 50,
    metric_interval_millis: int = 200,
    service: str = "loopguard-reliability",
) -> OtlpPipeline:
    """Build the pipeline; ``endpoint`` is ``http://127.0.0.1:PORT`` of an OTLP/gRPC receiver (or of nothing)."""
    resource = Resource.create({"service.name": service})
    sdk_metrics = InMemoryMetricReader()
    sdk_meter_provider = MeterProvider(metric_readers=[sdk_metrics], shutdown_on_exit=False)
    log_exporter = OTLPLogExporter(endpoint=endpoint, insecure=True, timeout=timeout)
    metric_exporter = OTLPMetricExporter(endpoint=endpoint, insecure=True, timeout=timeout)
    span_exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=timeout)
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(
        log_exporter,
        schedule_delay_millis=schedule_delay_millis, max_queue_size=max_queue_size, max_export_batch_size=min(512, max_queue_size),
        meter_provider=sdk_meter_provider,
    ))
    meter_provider = MeterProvider(
        resource=resource, shutdown_on_exit=False,
        metric_readers=[PeriodicExportingMetricReader(
            metric_exporter,
            export_interval_millis=metric_interval_millis, export_timeout_millis=timeout * 1000,
        )],
    )
    processor = LoopGuardSpanProcessor(
        config or LoopGuardConfig(signature_key=b"reliability-test-key-0123456789"),
        logger_provider=logger_provider, meter_provider=meter_provider,
    )
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(BatchSpanProcessor(
        span_exporter, schedule_delay_millis=50, meter_provider=sdk_meter_provider,
    ))
    pipeline = OtlpPipeline(tracer_provider, logger_provider, meter_provider, processor, sdk_metrics,
                            sdk_meter_provider)
    for exporter in (log_exporter, metric_exporter, span_exporter):
        pipeline.record_exports(exporter)
    processor.add_listener(pipeline.events.append)
    return pipeline


@dataclass(frozen=True)
class Timings:
    """Per-tool-span cost on the agent's thread: CPU (``thread_time``) and wall time of start + end, in seconds; and
    how many exports the agent's thread made itself while it ran the spans (the batch processors' threads export)."""

    cpu: tuple[float, ...]
    wall: tuple[float, ...]
    inline_exports: int = 0


def agent_loop(pipeline: OtlpPipeline, traces: int, calls: int = 6, *, arguments: Any = None,
               result: Any = "no results") -> Timings:
    """Run ``traces`` stuck agent runs of ``calls`` identical tool calls each, timing every tool span.

    Automatic garbage collection is off while the spans run (and back on after): a full collection of the test
    process's heap takes 30-90 ms of CPU, holds the GIL throughout and, on a loaded machine, 0.2-1.2 s of wall time;
    it stalls whichever span allocates or waits for the GIL at that moment, which says nothing about exports.
    """
    tracer = pipeline.tracer_provider.get_tracer("agent")
    cpu: list[float] = []
    wall: list[float] = []
    exports_before = pipeline.exports_on_this_thread()
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i in range(traces):
            with tracer.start_as_current_span("invoke_agent", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}):
                for _ in range(calls):
                    c0, w0 = time.thread_time(), time.perf_counter()
                    span = tracer.start_span("execute_tool search", attributes={
                        **TOOL, "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": arguments if arguments is not None else f'{{"q": "run {i}"}}',
                        "gen_ai.tool.call.result": result})
                    span.end()
                    cpu.append(time.thread_time() - c0)
                    wall.append(time.perf_counter() - w0)
    finally:
        if collecting:
            gc.enable()
    return Timings(tuple(cpu), tuple(wall), pipeline.exports_on_this_thread() - exports_before)


def verdict_keys(pipeline: OtlpPipeline) -> set[tuple[str, int, str]]:
    """(trace id hex, steps, intervention) of every verdict event the processor emitted (once it judged every span)."""
    pipeline.processor.verdict(0)  # drains deferred work first (documented); flushes no exporter
    return {(f"{e.trace_id:032x}", e.steps, e.intervention.action if e.intervention else "none")
            for e in pipeline.events}


def received_verdict_keys(records: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    """The same keys for ``loopguard.verdict`` log records a receiver decoded."""
    return {(r["trace_id"], r["attributes"]["loopguard.steps"], r["attributes"]["loopguard.intervention"])
            for r in records if r["event_name"] == "loopguard.verdict"}
