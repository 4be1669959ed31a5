"""Benchmark: memory of LoopGuardSpanProcessor under a long stream of traces, and of one very long trace.

Run it as a script (pytest does not collect it):

    .venv/bin/python tests/benchmarks/memory.py [--traces 1000000] [--calls 1000000] [--checkpoint 100000]

Part 1 sends ``--traces`` traces through a real TracerProvider with the processor and default limits; each is a
root span and two tool calls, three roots in four never end (their state can only leave by eviction) and every
300 000 traces the synthetic span clock jumps past the one-hour TTL. At each checkpoint it prints current and peak
RSS, tracked traces, live trace-state and span objects, and evictions by reason. Flat RSS after the store first
fills (10 000 traces) is the claim.

Part 2 feeds ``--calls`` calls of one trace to the engine (loops mixed with fresh calls) and prints the deep size
of that trace's state at checkpoints, plus tracemalloc's count of memory retained across the run
(``--tracemalloc-calls`` calls, tracemalloc being slow).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.sdk.trace import Span

from otel_loopguard import LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.core.engine import TraceState
from tests.reliability.conftest import KEY, build_pipeline
from tests.reliability.load import TraceLoad, deep_size, live_instances, peak_rss_kib, rss_kib


def traces_part(total: int, checkpoint: int) -> None:
    """Part 1: many traces through the processor with default limits."""
    pipeline = build_pipeline(export_spans=False)
    processor = pipeline.processor
    load = TraceLoad(pipeline.provider.get_tracer("memory"), end_every=4, ttl_jump_every=300_000)
    print(f"part 1: {total:,} traces, max_traces={processor.config.max_traces}, "
          f"ttl={processor.config.trace_ttl_seconds:.0f}s, 3 of 4 roots never end")
    print(f"{'traces':>10} {'rss MiB':>8} {'peak MiB':>9} {'tracked':>8} {'states':>7} {'spans':>6} "
          f"{'ev.capacity':>12} {'ev.idle':>8} {'us/trace':>9}")
    rows = []
    while load.done < total:
        t = time.perf_counter()
        load.run(min(checkpoint, total - load.done))
        per = (time.perf_counter() - t) / checkpoint * 1e6
        cap = pipeline.metric_total("loopguard.traces.evicted", **{"loopguard.eviction.reason": "capacity"})
        idle = pipeline.metric_total("loopguard.traces.evicted", **{"loopguard.eviction.reason": "idle"})
        row = (load.done, rss_kib() / 1024, peak_rss_kib() / 1024, processor.tracked_traces,
               live_instances(TraceState), live_instances(Span), int(cap), int(idle), per)
        rows.append(row)
        print(f"{row[0]:>10,} {row[1]:>8.1f} {row[2]:>9.1f} {row[3]:>8} {row[4]:>7} {row[5]:>6} "
              f"{row[6]:>12,} {row[7]:>8,} {row[8]:>9.1f}", flush=True)
    abandoned = load.done - (load.done + 3) // 4
    print(f"abandoned roots {abandoned:,} = evicted {rows[-1][6] + rows[-1][7]:,} + tracked {rows[-1][3]:,}; "
          f"processor errors {processor.errors}")
    if len(rows) > 1:
        print(f"RSS growth from first to last checkpoint: {rows[-1][1] - rows[0][1]:+.1f} MiB")
    pipeline.shutdown()


def _call(i: int) -> ToolCall:
    args = '{"q": "poll"}' if (i // 30) % 3 == 0 else f'{{"q": "item {i}"}}'
    return ToolCall("fetch", args, True, f"r{i % 5}", True, start=float(i), end=i + 0.5)


def one_trace_part(total: int, checkpoint: int, traced: int) -> None:
    """Part 2: one trace with very many calls, straight into the engine."""
    engine = LoopEngine(LoopGuardConfig(signature_key=KEY))
    state = engine.new_state()
    print(f"\npart 2: one trace, {total:,} calls (window {engine.config.window})")
    print(f"{'calls':>10} {'state bytes':>12} {'rss MiB':>8}")
    i = 0
    while i < total:
        stop = min(total, i + checkpoint)
        while i < stop:
            engine.observe(state, _call(i))
            i += 1
        print(f"{i:>10,} {deep_size(state):>12,} {rss_kib() / 1024:>8.1f}", flush=True)
    if traced:
        # Retained allocations across `traced` more calls: the state plus the engine's bounded caches.
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for k in range(i, i + traced):
            engine.observe(state, _call(k))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"tracemalloc: {after - before:+,} bytes retained over {traced:,} further calls "
              f"({(after - before) / traced:.2f} bytes/call; the canonical-form and digest caches are capped at "
              f"4096 entries each)")


def main() -> None:
    """Parse arguments and run both parts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--checkpoint", type=int, default=100_000)
    parser.add_argument("--tracemalloc-calls", type=int, default=50_000)
    args = parser.parse_args()
    if args.traces:
        traces_part(args.traces, args.checkpoint)
    if args.calls:
        one_trace_part(args.calls, args.checkpoint, args.tracemalloc_calls)


if __name__ == "__main__":
    main()
