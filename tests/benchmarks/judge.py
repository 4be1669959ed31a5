"""Benchmark: per-call cost of the trace judge and the engine, replayed in-process on the audit benchmark's traces.

Run it as a script (pytest does not collect it):

    .venv/bin/python tests/benchmarks/judge.py [--tool-spans 20000] [--rounds 7] [--profile MODE]

The traces are those of ``tests/benchmarks/audit.py`` (both files: mixed tools, and one tool with many arguments),
read once into the judge's steps exactly as ``audit`` reads them (the conventions layer's collector), then replayed
without any reading or decoding, so only ``core/`` is timed:

* ``audit``: a :class:`TraceJudge` per trace as ``audit`` makes it (steps kept, step audit on): every step added,
  then ``finish`` and ``report``;
* ``live``: a :class:`TraceJudge` per trace as the processor makes it (no kept steps, no step audit): ``judge`` of
  each step in end order;
* ``engine``: ``LoopEngine.observe`` of each tool call alone, per trace in start order.

Rounds alternate the modes (rotating order) on the thread's CPU time; each mode's figure is the median per tool call
over the rounds. ``--save FILE`` stores the steps (pickle) and ``--load FILE`` replays them, so another checkout of
the code (``--code DIR``: import the package from DIR) can be timed on the very same steps, e.g. alternately in one
shell loop, or under ``valgrind --tool=callgrind`` with ``--once MODE`` (one replay, no timing; subtract a run with
``--once none`` for the loading).
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]


def _setup_path(code: str | None) -> None:
    sys.path.insert(0, code or str(_ROOT))
    sys.path.insert(1, str(_ROOT / "tests" / "benchmarks"))


def collect(tool_spans: int) -> dict[str, list[tuple[list[Any], float | None]]]:
    """Per audit benchmark file: every trace's steps (as ``audit`` adds them to its judge) and its observation time."""
    import audit as audit_bench  # tests/benchmarks/audit.py

    from otel_loopguard.conventions.traces import TraceCollector
    from otel_loopguard.core import judge as judge_module
    from otel_loopguard.core.engine import LoopEngine
    from otel_loopguard.otlp.read import read_spans

    out: dict[str, list[tuple[list[Any], float | None]]] = {}
    original_add = judge_module.TraceJudge.add
    original_finish = judge_module.TraceJudge.finish
    steps_of: dict[int, list[Any]] = {}
    finished: list[tuple[list[Any], float | None]] = []

    def add(self: Any, step: Any, **kwargs: Any) -> bool:
        steps_of.setdefault(id(self), []).append(step)
        return original_add(self, step, **kwargs)

    def finish(self: Any, observed_at: float | None = None) -> Any:
        finished.append((steps_of.pop(id(self), []), observed_at))
        return original_finish(self, observed_at)

    judge_module.TraceJudge.add = add  # type: ignore[method-assign]
    judge_module.TraceJudge.finish = finish  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, one_tool in (("mixed tools", False), ("one tool, many arguments", True)):
                path = os.path.join(tmp, "spans.jsonl")
                audit_bench.generate(path, tool_spans, one_tool)
                collector = TraceCollector(LoopEngine())
                finished.clear()
                list(collector.add_all(read_spans(path), path))
                collector.finish()
                out[name] = list(finished)
    finally:
        judge_module.TraceJudge.add = original_add  # type: ignore[method-assign]
        judge_module.TraceJudge.finish = original_finish  # type: ignore[method-assign]
    return out


def make_modes() -> dict[str, Any]:
    from otel_loopguard.conventions.nesting import CONVENTION_NESTING
    from otel_loopguard.core.engine import LoopEngine
    from otel_loopguard.core.judge import TraceJudge

    def audit(traces: list[tuple[list[Any], float | None]]) -> int:
        engine = LoopEngine()
        stuck = 0
        for steps, observed_at in traces:
            judge = TraceJudge(engine, nesting=CONVENTION_NESTING)
            for step in steps:
                judge.add(step)
            judge.finish(observed_at)
            report = judge.report("bench", None)
            stuck += report.verdict.kind == "stuck"
        return stuck

    def live(traces: list[tuple[list[Any], float | None]]) -> int:
        engine = LoopEngine()
        stuck = 0
        for steps in prepared(traces, "live"):
            judge = TraceJudge(engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)
            for step in steps:
                judge.judge(step)
            stuck += judge.verdict.kind == "stuck"
        return stuck

    def engine_only(traces: list[tuple[list[Any], float | None]]) -> int:
        engine = LoopEngine()
        stuck = 0
        for calls in prepared(traces, "engine"):
            state = engine.new_state()
            for call in calls:
                engine.observe(state, call)
            stuck += state.verdict.kind == "stuck"
        return stuck

    return {"audit": audit, "live": live, "engine": engine_only}


_PREPARED: dict[tuple[int, str], list[list[Any]]] = {}


def prepared(traces: list[tuple[list[Any], float | None]], mode: str) -> list[list[Any]]:
    """The input of a mode, made once per file outside the timing (see :func:`prepare`)."""
    return _PREPARED[(id(traces), mode)]


def prepare(traces: list[tuple[list[Any], float | None]]) -> None:
    """The processor's steps (in end order, no nesting origin: their parent tool span is not open) and the engine's
    calls (in start order) of every trace."""
    live, engine = [], []
    for steps, _ in traces:
        live.append([s.__class__(s.span_id, s.parent_span_id, s.start_ns, s.end_ns, s.call, s.model, s.usage,
                                 s.agent, s.conversation, "") for s in sorted(steps, key=lambda s: s.end_ns)])
        engine.append([s.call for s in sorted(steps, key=lambda s: (s.start_ns, s.end_ns, s.span_id))
                       if s.call is not None])
    _PREPARED[(id(traces), "live")] = live
    _PREPARED[(id(traces), "engine")] = engine


def time_rounds(modes: dict[str, Any], files: dict[str, Any], calls: dict[str, int], rounds: int,
                clock: Any) -> dict[tuple[str, str], list[float]]:
    """µs per tool call of every mode on every file, per round; the modes' order rotates every round."""
    times: dict[tuple[str, str], list[float]] = {}
    names = list(modes)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for file, traces in files.items():
            for mode in order:
                gc.disable()
                t0 = clock()
                modes[mode](traces)
                elapsed = clock() - t0
                gc.enable()
                times.setdefault((file, mode), []).append(elapsed / calls[file] / 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-spans", type=int, default=20_000, help="tool spans per file")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--code", help="import otel_loopguard from this directory instead of this checkout")
    parser.add_argument("--save", help="store the steps in this file and stop")
    parser.add_argument("--load", help="replay the steps stored in this file")
    parser.add_argument("--once", help="replay once with this mode (or 'none'), untimed: for valgrind")
    parser.add_argument("--profile", help="cProfile one replay with this mode")
    parser.add_argument("--file", help="only the file whose name starts with this (mixed, one)")
    args = parser.parse_args(argv)
    _setup_path(args.code)

    if args.load:
        with open(args.load, "rb") as fh:
            files = pickle.load(fh)
    else:
        files = collect(args.tool_spans)
    if args.file:
        files = {name: traces for name, traces in files.items() if name.startswith(args.file)}
    if args.save:
        with open(args.save, "wb") as fh:
            pickle.dump(files, fh)
        return 0
    modes = make_modes()
    for traces in files.values():
        prepare(traces)
    calls = {name: sum(1 for steps, _ in traces for s in steps if s.call is not None) for name, traces in files.items()}
    gc.collect()
    gc.freeze()
    if args.once:
        if args.once != "none":
            for traces in files.values():
                modes[args.once](traces)
        return 0
    if args.profile:
        import cProfile
        import pstats

        for name, traces in files.items():
            print(f"profile of {args.profile}, {name}:")
            profiler = cProfile.Profile()
            profiler.runcall(modes[args.profile], traces)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return 0
    names = list(modes)
    times = time_rounds(modes, files, calls, args.rounds, time.thread_time_ns)
    print(f"python {sys.version.split()[0]}, code from {args.code or _ROOT}, {args.rounds} rounds; "
          f"µs per tool call (thread CPU), median (range)")
    for file, traces in files.items():
        print(f"{file}: {len(traces)} traces, {calls[file]} tool calls")
        for mode in names:
            v = times[(file, mode)]
            print(f"  {mode:<8}{statistics.median(v):>8.2f}  ({min(v):.2f}-{max(v):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
