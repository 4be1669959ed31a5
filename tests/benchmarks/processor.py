"""Benchmark: what ``LoopGuardSpanProcessor`` costs per span, on the application thread and in the whole process.

Run: ``.venv/bin/python tests/benchmarks/processor.py [rounds] [chunk]`` (defaults 300 rounds of 50-span chunks).

Three real SDK ``TracerProvider``\\s are measured side by side in one run:

* ``base``: a ``BatchSpanProcessor`` whose exporter drops every batch (no I/O noise);
* ``floor``: the same plus a processor whose ``on_end`` only reads ``gen_ai.operation.name`` (the least any
  attribute-reading processor pays, see the 2026-12-02 note in DESIGN.md);
* ``loopguard``: the same plus ``LoopGuardSpanProcessor`` with real logger and meter providers (batching
  processors, dropping exporters), so event and metric work is counted but nothing leaves the process.

Each sample is one chunk of spans: start span, set six attributes, end span. The variants run interleaved in small
chunks (their order rotates every round) so drift in CPU frequency or caches hits all of them alike. Each chunk is
timed twice:

* **application thread**: ``time.thread_time_ns`` around the spans only, what the instrumented code waits for;
* **whole process**: ``time.process_time_ns`` (every thread of the process) around the spans *and* the variant's
  ``force_flush``, which drains its ``BatchSpanProcessor`` (export of the batch) and, for loopguard, its worker
  thread (judging, verdict events, metrics) and its logger provider. This is the honest cost: the worker thread
  runs in the same process, under the same GIL. The other variants' threads are idle while a chunk runs, since each
  chunk ends drained, and the metric reader's export interval is long (60 s) so that its periodic collection does
  not land on random chunks; one final collection is timed separately in the summary line.

Root spans (an ``invoke_agent`` span, or an HTTP server span, per trace) are timed too, since releasing a trace is
loopguard work the application pays for; the cost is divided over all spans of the chunk.

Workloads:

* ``tool/healthy``: GenAI ``execute_tool`` spans with ~200-byte JSON arguments that differ on every call;
* ``tool/loop``: traces of 10 identical calls (each trace goes working → stuck with a nudge at the third call,
  then a stop at the fourth), so transitions, verdict events and metrics happen in every trace. Span events mostly
  do not: the background thread usually judges a chunk after its root span ended, and an ended span takes no event
  (a harness calling ``check()`` after each call would judge them while the root is open);
* ``tool/at-start``: ``tool/healthy``'s calls, with the attributes given at the span's start and the result set
  before its end, as pydantic-ai and OpenInference do (the processor sees them in ``on_start``);
* ``non-tool``: HTTP-client-like child spans with six ``http.*``/``url.*``/``server.*`` attributes.

Ratios are medians over rounds of each round's variant/base ratio, printed with their range (min-max over rounds).
Targets (issue "honest cost"): application thread loopguard/base <= 1.10 for tool spans, whole process <= 1.25;
for non-tool spans loopguard/base - floor/base <= 0.02 on the application thread.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for tests.benchmarks

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from tests.benchmarks.sinks import DropLogs, DropMetrics, DropSpans

LOOP_TRACE_CALLS = 10
TOOL_TARGET = 1.10
PROCESS_TARGET = 1.25
NON_TOOL_POINTS = 0.02








class _FloorProcessor(SpanProcessor):
    """Reads the one attribute any GenAI-aware processor must read, and nothing else."""

    def __init__(self) -> None:
        self.tool_spans = 0

    def on_end(self, span: ReadableSpan) -> None:
        if span.attributes.get("gen_ai.operation.name") == "execute_tool":
            self.tool_spans += 1


class _Variant:
    def __init__(self, name: str, extra: SpanProcessor | None) -> None:
        self.name = name
        self.exporter = DropSpans()
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        if extra is not None:
            self.provider.add_span_processor(extra)
        self.tracer = self.provider.get_tracer("bench")


def _healthy_args(i: int) -> str:
    args = json.dumps(
        {
            "query": f"quarterly revenue of company number {i} in fiscal year {2000 + i % 25}, audited figures only",
            "limit": 10 + i % 7,
            "filters": {"lang": "en", "region": ["eu", "us"][i % 2], "min_score": 0.5},
            "page": i % 5,
        }
    )
    return args


_LOOP_ARGS = json.dumps(
    {
        "query": "status of deployment job 4411 in the production cluster, including the last error message",
        "limit": 10,
        "filters": {"lang": "en", "region": "eu", "min_score": 0.5},
        "page": 0,
    }
)


def _tool_span(tracer: Any, ctx: Any, i: int, args: str, result: str) -> None:
    span = tracer.start_span("execute_tool search", context=ctx, kind=SpanKind.INTERNAL)
    span.set_attribute("gen_ai.operation.name", "execute_tool")
    span.set_attribute("gen_ai.tool.name", "search")
    span.set_attribute("gen_ai.tool.call.id", f"call_{i}")
    span.set_attribute("gen_ai.tool.call.arguments", args)
    span.set_attribute("gen_ai.tool.call.result", result)
    span.set_attribute("gen_ai.tool.type", "function")
    span.end()


def _tool_span_attributes_at_start(tracer: Any, ctx: Any, i: int, args: str, result: str) -> None:
    """A tool span whose attributes are given at its start (pydantic-ai, OpenInference), its result at its end."""
    span = tracer.start_span("execute_tool search", context=ctx, kind=SpanKind.INTERNAL, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.tool.call.arguments": args, "gen_ai.tool.type": "function"})
    span.set_attribute("gen_ai.tool.call.result", result)
    span.end()


def _http_span(tracer: Any, ctx: Any, i: int) -> None:
    span = tracer.start_span("GET", context=ctx, kind=SpanKind.CLIENT)
    span.set_attribute("http.request.method", "GET")
    span.set_attribute("url.full", f"https://api.example.com/v1/items/{i}")
    span.set_attribute("server.address", "api.example.com")
    span.set_attribute("server.port", 443)
    span.set_attribute("http.response.status_code", 200)
    span.set_attribute("network.protocol.version", "1.1")
    span.end()


def _root(tracer: Any) -> Any:
    return tracer.start_span(
        "invoke_agent research", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "research"}
    )


class _Counter:
    i = 0


def _healthy_chunk(variant: _Variant, chunk: int, counter: _Counter, make: Callable[..., None]) -> tuple[int, int]:
    """One trace of ``chunk`` tool calls with distinct arguments, each span made by ``make``."""
    tracer = variant.tracer
    base = counter.i
    counter.i += chunk
    calls = [(base + k, _healthy_args(base + k), f"{(base + k) * 7919 % 100003} rows matched") for k in range(chunk)]
    t0 = time.thread_time_ns()
    root = _root(tracer)
    ctx = trace.set_span_in_context(root)
    for i, args, result in calls:
        make(tracer, ctx, i, args, result)
    root.end()
    return time.thread_time_ns() - t0, chunk + 1


def _run_healthy(variant: _Variant, chunk: int, counter: _Counter) -> tuple[int, int]:
    return _healthy_chunk(variant, chunk, counter, _tool_span)


def _run_loop(variant: _Variant, chunk: int, counter: _Counter) -> tuple[int, int]:
    tracer = variant.tracer
    t0 = time.thread_time_ns()
    for _ in range(chunk // LOOP_TRACE_CALLS):
        root = _root(tracer)
        ctx = trace.set_span_in_context(root)
        for k in range(LOOP_TRACE_CALLS):
            _tool_span(tracer, ctx, k, _LOOP_ARGS, "deployment job 4411: pending")
        root.end()
    return time.thread_time_ns() - t0, chunk + chunk // LOOP_TRACE_CALLS


def _run_start_attributes(variant: _Variant, chunk: int, counter: _Counter) -> tuple[int, int]:
    return _healthy_chunk(variant, chunk, counter, _tool_span_attributes_at_start)


def _run_http(variant: _Variant, chunk: int, counter: _Counter) -> tuple[int, int]:
    tracer = variant.tracer
    t0 = time.thread_time_ns()
    root = tracer.start_span("GET /report", kind=SpanKind.SERVER)
    ctx = trace.set_span_in_context(root)
    for i in range(chunk):
        _http_span(tracer, ctx, i)
    root.end()
    return time.thread_time_ns() - t0, chunk + 1


WORKLOADS: dict[str, Callable[[_Variant, int, _Counter], tuple[int, int]]] = {
    "tool/healthy": _run_healthy,
    "tool/loop": _run_loop,
    "tool/at-start": _run_start_attributes,
    "non-tool": _run_http,
}


def _ratio(
    samples: dict[tuple[str, str, str], list[float]], key: str, workload: str, name: str
) -> tuple[float, float, float]:
    """Median, min and max over rounds of each round's ``name``/``base`` ratio."""
    ratios = [x / y for x, y in zip(samples[(key, workload, name)], samples[(key, workload, "base")])]
    return statistics.median(ratios), min(ratios), max(ratios)


def main(rounds: int = 300, chunk: int = 50, warmup: int = 20) -> int:
    """Run the benchmark, print the table; returns 0 when every target is met, else 1."""
    assert chunk % LOOP_TRACE_CALLS == 0, "chunk must hold whole loop traces"
    log_exporter = DropLogs()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    metric_exporter = DropMetrics()
    meter_provider = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(metric_exporter, export_interval_millis=60_000)]
    )
    guard = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logger_provider, meter_provider=meter_provider)
    floor = _FloorProcessor()
    variants = [_Variant("base", None), _Variant("floor", floor), _Variant("loopguard", guard)]

    samples: dict[tuple[str, str, str], list[float]] = {
        (key, w, v.name): [] for key in ("thread", "process") for w in WORKLOADS for v in variants
    }
    counter = _Counter()
    for r in range(warmup + rounds):
        for workload, run in WORKLOADS.items():
            # Rotate the order so no variant always runs first (cold) or last.
            for j in range(len(variants)):
                variant = variants[(r + j) % len(variants)]
                p0 = time.process_time_ns()
                ns, spans = run(variant, chunk, counter)
                # Drained: the batch exported, loopguard's worker idle and its events handed to the log exporter.
                variant.provider.force_flush()
                process_ns = time.process_time_ns() - p0
                if r >= warmup:
                    samples[("thread", workload, variant.name)].append(ns / spans / 1000)
                    samples[("process", workload, variant.name)].append(process_ns / spans / 1000)

    c0 = time.process_time_ns()
    meter_provider.force_flush()
    collect_ms = (time.process_time_ns() - c0) / 1e6
    for v in variants:
        v.provider.shutdown()
    logger_provider.shutdown()
    meter_provider.shutdown()

    print(
        f"{rounds} rounds x {chunk} spans (+ roots) per chunk, 3 variants interleaved; µs/span are medians over "
        "chunks; ratios are medians of per-round ratios [min-max]"
    )
    ok = True
    for key, title in (("thread", "application thread CPU"), ("process", "whole process CPU, drained")):
        print(f"-- {title}")
        print(
            f"{'workload':<14}{'base':>8}{'floor':>8}{'guard':>8}{'floor/base':>12}{'guard/base':>12}"
            f"{'range':>14}  target"
        )
        for workload in WORKLOADS:
            base, flo, grd = (statistics.median(samples[(key, workload, n)]) for n in ("base", "floor", "loopguard"))
            rf, _, _ = _ratio(samples, key, workload, "floor")
            rg, lo, hi = _ratio(samples, key, workload, "loopguard")
            if workload.startswith("tool"):
                limit = TOOL_TARGET if key == "thread" else PROCESS_TARGET
                passed = rg <= limit
                target = f"guard/base <= {limit:.2f}"
            elif key == "thread":
                passed = rg - rf <= NON_TOOL_POINTS
                target = f"guard-floor = {100 * (rg - rf):+.1f} pts <= {100 * NON_TOOL_POINTS:.0f}"
            else:
                passed, target = True, f"guard-floor = {100 * (rg - rf):+.1f} pts (no target)"
            ok &= passed
            print(
                f"{workload:<14}{base:>8.2f}{flo:>8.2f}{grd:>8.2f}{rf:>12.3f}{rg:>12.3f}{f'[{lo:.2f}-{hi:.2f}]':>14}"
                f"  {target}  {'PASS' if passed else 'MISS'}"
            )
    print(
        f"loopguard: {guard.errors} hook errors, {log_exporter.records} verdict events exported, "
        f"one metric collection {collect_ms:.1f} ms CPU, floor saw {floor.tool_spans} tool spans"
    )
    if guard.errors or not log_exporter.records:
        print("loopguard did not work as expected: hook errors or no events")
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
