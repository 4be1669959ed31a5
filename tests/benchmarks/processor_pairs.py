"""Benchmark: two or more processors side by side, with the workloads of ``processor.py``, in one run.

Run: ``.venv/bin/python tests/benchmarks/processor_pairs.py KINDS [rounds] [chunk]`` with ``KINDS`` a
comma-separated list of:

* ``guard``: ``LoopGuardSpanProcessor`` as it is;
* ``noslot``: the same without the live assembler's reused trace slot (``LiveAssembler.slot`` asks the store every
  time), to measure that speed trick;
* ``before``: the ``LoopGuardSpanProcessor`` of another revision, imported as ``otel_loopguard_before`` from the
  folder named by ``LOOPGUARD_BENCH_BEFORE``. Make that folder with ``git archive <rev> otel_loopguard | tar -x -C
  DIR && mv DIR/otel_loopguard DIR/otel_loopguard_before`` (its imports are relative, so the copy runs beside this
  one).

Each variant is its own ``TracerProvider`` (the SDK's ``BatchSpanProcessor`` plus the variant), beside ``base``
(the SDK alone). The variants run interleaved in chunks, the order rotating and its direction reversed every other
round, so that no variant always follows the same one (which biased a run with a fixed cyclic order by 1-3 %).
Printed: per workload, the median of per-round ratios against ``base`` and against the first kind, with their
range, for the whole process's CPU (every thread, drained) and the application thread's.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for tests.benchmarks

import tests.benchmarks.processor as bench
from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.conventions.live import LiveAssembler
from tests.benchmarks.sinks import DropLogs, DropMetrics


class _NoSlot(LiveAssembler):
    """The live assembler without the reused slot: every span asks the store (a locked LRU update)."""

    def slot(self, trace_id: int, now: float) -> Any:
        return self._store.slot(trace_id, now)


def _processor(kind: str) -> Any:
    logs = LoggerProvider()
    logs.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    meters = MeterProvider(metric_readers=[PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=60_000)])
    if kind == "before":
        sys.path.insert(0, os.environ["LOOPGUARD_BENCH_BEFORE"])
        import otel_loopguard_before as before  # type: ignore[import-not-found]

        return before.LoopGuardSpanProcessor(before.LoopGuardConfig(), logger_provider=logs, meter_provider=meters)
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logs, meter_provider=meters)
    if kind == "noslot":
        processor._live.__class__ = _NoSlot
    elif kind != "guard":
        raise SystemExit(f"unknown kind {kind!r}: guard, noslot or before")
    return processor


def _ratio(samples: dict[tuple[str, str, str], list[float]], key: str, workload: str, a: str, b: str) -> str:
    ratios = [x / y for x, y in zip(samples[(key, workload, a)], samples[(key, workload, b)])]
    return f"{a}/{b} {statistics.median(ratios):.3f} [{min(ratios):.2f}-{max(ratios):.2f}]"


def main(kinds: list[str], rounds: int = 600, chunk: int = 50, warmup: int = 20) -> int:
    """Run the variants interleaved and print the ratios."""
    variants = [bench._Variant("base", None)] + [bench._Variant(kind, _processor(kind)) for kind in kinds]
    samples: dict[tuple[str, str, str], list[float]] = {
        (key, w, v.name): [] for key in ("thread", "process") for w in bench.WORKLOADS for v in variants
    }
    counter = bench._Counter()
    for r in range(warmup + rounds):
        for workload, run in bench.WORKLOADS.items():
            order = variants if r % 2 == 0 else variants[::-1]
            for j in range(len(order)):
                variant = order[(r // 2 + j) % len(order)]
                p0 = time.process_time_ns()
                ns, spans = run(variant, chunk, counter)
                variant.provider.force_flush()
                process_ns = time.process_time_ns() - p0
                if r >= warmup:
                    samples[("thread", workload, variant.name)].append(ns / spans)
                    samples[("process", workload, variant.name)].append(process_ns / spans)
    print(f"{rounds} rounds x {chunk} spans, variants {', '.join(kinds)} interleaved; medians of per-round ratios")
    for key, title in (("process", "whole process CPU, drained"), ("thread", "application thread CPU")):
        print(f"-- {title}")
        for workload in bench.WORKLOADS:
            parts = [_ratio(samples, key, workload, kind, "base") for kind in kinds]
            parts += [_ratio(samples, key, workload, kind, kinds[0]) for kind in kinds[1:]]
            print(f"{workload:<14}" + "  ".join(parts))
    for variant in variants[1:]:
        variant.provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].split(","), *(int(a) for a in sys.argv[2:4])))
