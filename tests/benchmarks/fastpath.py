"""Benchmark: each speed trick of ``otel_loopguard/core/fastpath.py`` against the general code, interleaved in one run.

Run: ``.venv/bin/python tests/benchmarks/fastpath.py [--tool-spans 5000] [--rounds 15]``.

The steps are those of ``tests/benchmarks/judge.py`` (the audit benchmark's traces, both files). The live replays
judge them as the processor does (no kept steps, no step audit), the audit replays as ``audit`` does. Per round,
every variant replays every file once, in an order that rotates each round; each replay is timed on the whole
process's CPU (``time.process_time_ns``, every thread), with the garbage collector off. Printed per file: µs per
tool call (median over rounds, and range), and the median of the per-round ratios of the replay with every trick
against the variant (below 1: what the missing trick saves), with their range. All variants of one replay must
reach the same verdicts, or the script stops.

Variants (the tricks are ``judge_alone``, the judge's lone-step path, and ``quiet_observation``, the engine's
shortcut for a call that changes nothing):

* ``live``: :meth:`TraceJudge.judge`, one call per step, every trick on (the baseline of the live ratios);
* ``live, no lone step``: :meth:`TraceJudge.add` then :meth:`TraceJudge.advance` per step, the general path;
* ``live, no quiet``: ``judge`` with ``LoopEngine.fast = False`` (the engine's full decision order every call);
* ``live, neither``: both tricks off;
* ``audit``: ``add`` every step, ``finish``, ``report`` (the baseline of the audit ratio);
* ``audit, no quiet``: the same with ``LoopEngine.fast = False``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(1, str(Path(__file__).resolve().parent))

import judge as judge_bench  # tests/benchmarks/judge.py


def variants() -> dict[str, Callable[[list[Any]], int]]:
    """Every replay with and without each trick; each returns the number of stuck traces."""
    from otel_loopguard.conventions.nesting import CONVENTION_NESTING
    from otel_loopguard.core.engine import LoopEngine
    from otel_loopguard.core.judge import TraceJudge

    def live(traces: list[Any], lone: bool, quiet: bool) -> int:
        engine, stuck = LoopEngine(), 0
        engine.fast = quiet
        for steps in judge_bench.prepared(traces, "live"):
            judge = TraceJudge(engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)
            for step in steps:
                if lone:
                    judge.judge(step)
                else:
                    judge.add(step)
                    judge.advance()
            stuck += judge.verdict.kind == "stuck"
        return stuck

    def audit(traces: list[Any], quiet: bool) -> int:
        engine, stuck = LoopEngine(), 0
        engine.fast = quiet
        for steps, observed_at in traces:
            judge = TraceJudge(engine, nesting=CONVENTION_NESTING)
            for step in steps:
                judge.add(step)
            judge.finish(observed_at)
            stuck += judge.report("bench", None).verdict.kind == "stuck"
        return stuck

    return {
        "live": lambda traces: live(traces, True, True),
        "live, no lone step": lambda traces: live(traces, False, True),
        "live, no quiet": lambda traces: live(traces, True, False),
        "live, neither": lambda traces: live(traces, False, False),
        "audit": lambda traces: audit(traces, True),
        "audit, no quiet": lambda traces: audit(traces, False),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-spans", type=int, default=5_000, help="tool spans per file")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    files = judge_bench.collect(args.tool_spans)
    for traces in files.values():
        judge_bench.prepare(traces)
    calls = {name: sum(1 for steps in judge_bench.prepared(traces, "live") for s in steps if s.call is not None)
             for name, traces in files.items()}
    runs = variants()
    for name, traces in files.items():
        outcomes = {variant: run(traces) for variant, run in runs.items()}
        for kind in ("live", "audit"):
            if len({v for variant, v in outcomes.items() if variant.startswith(kind)}) != 1:
                raise SystemExit(f"{name}: the {kind} variants disagree: {outcomes}")
    gc.collect()
    gc.freeze()
    times = judge_bench.time_rounds(runs, files, calls, args.rounds, time.process_time_ns)
    print(f"python {sys.version.split()[0]}, {args.rounds} rounds; µs per tool call (whole-process CPU), median "
          "(range); ratio: median of per-round ratios, every trick / the variant [range]")
    for file in files:
        print(f"{file}: {len(files[file])} traces, {calls[file]} tool calls")
        for variant in runs:
            v = times[(file, variant)]
            base = times[(file, variant.split(",")[0])]
            ratios = [b / a for a, b in zip(v, base)]
            print(f"  {variant:<20}{statistics.median(v):>7.2f}  ({min(v):.2f}-{max(v):.2f})  "
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
