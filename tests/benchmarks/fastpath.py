"""Benchmark: each speed trick of the package against the plain code it replaces, interleaved in one run.

Run: ``.venv/bin/python tests/benchmarks/fastpath.py [--tool-spans 5000] [--rounds 15]``.

The steps are those of ``tests/benchmarks/judge.py`` (the audit benchmark's traces, both files), replayed as the
processor judges them (no kept steps, no step audit). Per round, every variant replays every file once, in an
order that rotates each round; each replay is timed on the whole process's CPU (``time.process_time_ns``, every
thread), with the garbage collector off. Printed per file: µs per tool call (median over rounds) and the median of
the per-round ratios trick/plain, with their range (min-max over rounds). Both variants must reach the same
verdicts, or the script stops.

Variants:

* ``judge``: :meth:`TraceJudge.judge`, one call per step: the live path, which judges a lone step without the
  general machinery (no span ids kept, nothing waits, no nesting rule applies);
* ``add+advance``: :meth:`TraceJudge.add` then :meth:`TraceJudge.advance` per step, the general path, which gives
  the same verdicts.
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


def variants() -> dict[str, Callable[[list[list[Any]]], int]]:
    """The live replay through the fast path and through the general one; each returns the stuck traces."""
    from otel_loopguard.conventions.nesting import CONVENTION_NESTING
    from otel_loopguard.core.engine import LoopEngine
    from otel_loopguard.core.judge import TraceJudge

    def replay(traces: list[list[Any]], general: bool) -> int:
        engine, stuck = LoopEngine(), 0
        for steps in traces:
            judge = TraceJudge(engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)
            for step in steps:
                if general:
                    judge.add(step)
                    judge.advance()
                else:
                    judge.judge(step)
            stuck += judge.verdict.kind == "stuck"
        return stuck

    return {"judge": lambda traces: replay(traces, False), "add+advance": lambda traces: replay(traces, True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-spans", type=int, default=5_000, help="tool spans per file")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    files = judge_bench.collect(args.tool_spans)
    live: dict[str, list[list[Any]]] = {}
    for name, traces in files.items():
        judge_bench.prepare(traces)
        live[name] = judge_bench.prepared(traces, "live")
    calls = {name: sum(1 for steps in traces for s in steps if s.call is not None) for name, traces in live.items()}
    runs = variants()
    names = list(runs)
    for name, traces in live.items():
        outcomes = {variant: run(traces) for variant, run in runs.items()}
        if len(set(outcomes.values())) != 1:
            raise SystemExit(f"{name}: the variants disagree: {outcomes}")
    gc.collect()
    gc.freeze()
    times = judge_bench.time_rounds(runs, live, calls, args.rounds, time.process_time_ns)
    print(f"python {sys.version.split()[0]}, {args.rounds} rounds; µs per tool call (whole-process CPU), median "
          f"(range); ratio: median of per-round ratios against {names[-1]} [range]")
    for file in live:
        print(f"{file}: {len(live[file])} traces, {calls[file]} tool calls")
        base = times[(file, names[-1])]
        for variant in names:
            v = times[(file, variant)]
            ratios = [a / b for a, b in zip(v, base)]
            print(f"  {variant:<12}{statistics.median(v):>7.2f}  ({min(v):.2f}-{max(v):.2f})  "
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
