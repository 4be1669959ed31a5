"""Benchmark: what one verdict event and one histogram record cost through ``Emitter``, against a bare SDK call.

Run: ``.venv/bin/python tests/benchmarks/emit.py [rounds] [chunk]`` (defaults 200 rounds of 200 calls).

Real SDK providers, as the processor's benchmark and ``serve`` build them: a ``LoggerProvider`` with a
``BatchLogRecordProcessor`` whose exporter drops every batch, a ``MeterProvider`` whose reader exports every 60 s
(never during a chunk). Each sample is one chunk of calls, timed with ``time.process_time_ns`` around the calls and
a ``force_flush`` of the logger provider (the batch processor's export of the chunk, in its own thread, is counted:
it is CPU of the process). Variants run interleaved, their order rotating every round.

Variants, per event (a stuck transition with a nudge, as a looping trace emits; 14 attributes):

* ``event/bare``: ``Logger.emit`` with the attributes of the event built once (the least the SDK costs us);
* ``event/ours``: ``Emitter.emit`` with no target span, the whole path (attributes, counts, the event's
  ``loopguard.detection.delay`` record, log record).

Per histogram record:

* ``hist/bare``: ``Histogram.record(5, {"gen_ai.agent.name": "researcher"})``;
* ``hist/ours``: ``Emitter.agent_finished("researcher", 5)`` (that same record);
* ``hist-noattr/bare`` and ``hist-noattr/ours``: ``Histogram.record(5)`` and ``Emitter.trace_finished`` (one record,
  ``loopguard.trace.steps``, no attributes, and the active-traces count);
* ``hist-in-span/...``: ``hist/...`` while a sampled span is current, as when the application's thread drains the
  processor (``check()``, ``force_flush()``): a trace-based exemplar filter then offers the record to the reservoir.

Every variant runs on two sets of providers: ``/sdk``, the SDK's default settings (what a user may pass to the
processor), and ``/ours``, as ``build_providers`` makes them for ``serve`` (exemplars off).

Printed: µs per call (median over rounds of the chunk's CPU / chunk, with min-max), and ours/bare ratios.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import context, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for tests.benchmarks

from otel_loopguard.conventions import names as n
from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.model import Intervention, Transition, Verdict
from otel_loopguard.sdk import providers
from otel_loopguard.sdk.emit import Emitter, event_attributes
from tests.benchmarks.sinks import DropLogs, DropMetrics


def _sdk_providers() -> tuple[LoggerProvider, MeterProvider]:
    """Providers of the SDK's default settings (what a user may pass to the processor)."""
    logs = LoggerProvider(resource=Resource.create({}))
    logs.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=60_000)
    return logs, MeterProvider(resource=Resource.create({}), metric_readers=[reader])


def _our_providers() -> tuple[LoggerProvider, MeterProvider]:
    """Providers as ``build_providers`` makes them (serve, zero-code), with dropping exporters."""
    made: list[str] = []

    def exporter(signal: Any, environ: Any) -> Any:
        made.append(signal)
        return DropLogs() if signal == "logs" else DropMetrics()

    original = providers.otlp_exporter
    providers.otlp_exporter = exporter  # type: ignore[assignment]
    try:
        logs, meters = providers.build_providers({}, Resource.create({}))
    finally:
        providers.otlp_exporter = original  # type: ignore[assignment]
    assert made == ["logs", "metrics"]
    return logs, meters


def _event() -> VerdictEvent:
    # A stuck transition with a nudge at the third identical call, as tests/benchmarks/processor.py's loop workload.
    verdict = Verdict("stuck", "period", 2, period=1, repetitions=3, cycle_start=0, tool="search",
                      signature_digest="0123456789abcdef0123")
    nudge = Intervention("nudge", "You called search three times with the same arguments.", "period", 2, verdict)
    context = SpanContext(0x1234, 0x5678, False, TraceFlags(TraceFlags.SAMPLED))
    return VerdictEvent(
        trace_id=0x1234, span_context=context, verdict=verdict, transition=Transition(2, "working", verdict),
        intervention=nudge, tool="search", agent="researcher", conversation="conv-1",
        signature_digest="0123456789abcdef0123", steps=3, timestamp_ns=time.time_ns(),
    )


def _variants(chunk: int) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    """name -> (one chunk of calls, flush)."""
    event = _event()
    variants: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}
    for label, make in (("sdk", _sdk_providers), ("ours", _our_providers)):
        logs, meters = make()
        emitter = Emitter(logs, meters, 100, "1")
        logger = logs.get_logger("bench", "1")
        meter = meters.get_meter("bench", "1")
        hist = meter.create_histogram("bench.hist", "{call}", "x", explicit_bucket_boundaries_advisory=(1, 2, 4, 8))
        attrs = event_attributes(event, "1")

        def bare_event(logger: Any = logger, attrs: dict[str, Any] = attrs) -> None:
            for _ in range(chunk):
                logger.emit(timestamp=event.timestamp_ns, severity_text="WARN", body="x", attributes=attrs,
                            event_name=n.EVENT_VERDICT)

        def our_event(emitter: Emitter = emitter) -> None:
            for _ in range(chunk):
                emitter.emit(event, None)

        def bare_hist(hist: Any = hist) -> None:
            for _ in range(chunk):
                hist.record(5, {n.GEN_AI_AGENT_NAME: "researcher"})

        def our_hist(emitter: Emitter = emitter) -> None:
            for _ in range(chunk):
                emitter.agent_finished("researcher", 5)

        def bare_hist_noattr(hist: Any = hist) -> None:
            for _ in range(chunk):
                hist.record(5)

        def our_hist_noattr(emitter: Emitter = emitter) -> None:
            for _ in range(chunk):
                emitter.trace_finished("stuck", 5, None)

        def bare_hist_in_span(hist: Any = hist) -> None:
            token = context.attach(trace.set_span_in_context(NonRecordingSpan(event.span_context)))
            try:
                for _ in range(chunk):
                    hist.record(5, {n.GEN_AI_AGENT_NAME: "researcher"})
            finally:
                context.detach(token)

        def our_hist_in_span(emitter: Emitter = emitter) -> None:
            token = context.attach(trace.set_span_in_context(NonRecordingSpan(event.span_context)))
            try:
                for _ in range(chunk):
                    emitter.agent_finished("researcher", 5)
            finally:
                context.detach(token)

        def flush(logs: LoggerProvider = logs) -> None:
            logs.force_flush()

        variants[f"hist-in-span/bare/{label}"] = (bare_hist_in_span, flush)
        variants[f"hist-in-span/ours/{label}"] = (our_hist_in_span, flush)

        variants[f"event/bare/{label}"] = (bare_event, flush)
        variants[f"event/ours/{label}"] = (our_event, flush)
        variants[f"hist/bare/{label}"] = (bare_hist, flush)
        variants[f"hist/ours/{label}"] = (our_hist, flush)
        variants[f"hist-noattr/bare/{label}"] = (bare_hist_noattr, flush)
        variants[f"hist-noattr/ours/{label}"] = (our_hist_noattr, flush)
    return variants


def main(rounds: int = 200, chunk: int = 200, warmup: int = 10) -> int:
    variants = _variants(chunk)
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds + warmup):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            run, flush = variants[name]
            flush()
            start = time.process_time_ns()
            run()
            flush()
            elapsed = time.process_time_ns() - start
            if r >= warmup:
                samples[name].append(elapsed / chunk / 1000)
    print(f"{rounds} rounds x {chunk} calls, {len(names)} variants interleaved; whole-process CPU µs per call, "
          "median [min-max] over rounds")
    for name in names:
        values = samples[name]
        print(f"  {name:26s} {statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]")
    print("ratios ours/bare (median of per-round ratios [min-max]):")
    for name in names:
        kind, who, label = name.split("/")
        if who != "ours":
            continue
        bare = samples[f"{kind}/bare/{label}"]
        ratios = [o / b for o, b in zip(samples[name], bare, strict=True)]
        print(f"  {kind}/{label:6s} {statistics.median(ratios):5.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
