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
* ``live, lone step wrapped`` and ``live, lone step compacting``: ``judge``, its lone-step path behind one more
  call which, in the second, has the judge compact every step first (as without the inline short-text check); the
  second is compared with the first, so the extra call counts in both;
* ``live, no quiet``: ``judge`` with ``LoopEngine.fast = False`` (the engine's full decision order every call);
* ``live, neither``: both tricks off;
* ``audit``: ``add`` every step, ``finish``, ``report`` (the baseline of the audit ratio);
* ``audit, no quiet``: the same with ``LoopEngine.fast = False``.

Then the tricks that live beside the readers they speed up (outside ``core/``; ``core/fastpath.py`` lists them),
on the spans of ``tests/benchmarks/otlp_decode.py`` (``--spans``, as OTLP/JSON requests of 100 spans) and on the
tool spans of the recorded fixtures (repeated to about 20 000), µs per span, ratio against the general code:

* ``typed``: ``otlp.read.decode_json_request`` (msgspec's typed decoder for a request in the common shape)
  against ``general``, the general decoder ``otlp.json_general.decode_json_request`` (the baseline);
* ``general, no inline attributes``: the general decoder with every attribute read by ``_key_value`` (its
  ``attributes`` without the inline reads of string and integer values);
* ``inline keys`` against ``no inline keys``: ``Extractor.tool_call`` with and without the inline reads of
  plain attribute keys (``_Row.tool_key``, ``error_keys``, ``_Part.keys`` set to None).
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


def wrapped(compact: bool) -> Callable[..., Any]:
    """``core.fastpath.judge_alone`` behind one more call that, with ``compact``, has the judge compact every step
    first (so the inline short-text check finds short text and the compaction is paid anyway)."""
    from otel_loopguard.core.fastpath import judge_alone

    def alone(judge: Any, step: Any, untimed_at: float | None, judged: list[Any] | None) -> list[Any]:
        if compact and step.call is not None:
            step = judge._compacted(step)
        return judge_alone(judge, step, untimed_at, judged)

    return alone


#: The variant each is compared with, when not the first word of its name (``live`` or ``audit``).
BASELINES = {"live, lone step compacting": "live, lone step wrapped"}


def variants() -> dict[str, Callable[[list[Any]], int]]:
    """Every replay with and without each trick; each returns the number of stuck traces."""
    from otel_loopguard.conventions.nesting import CONVENTION_NESTING
    from otel_loopguard.core import fastpath
    from otel_loopguard.core import judge as judge_module
    from otel_loopguard.core.engine import LoopEngine
    from otel_loopguard.core.judge import TraceJudge

    def live(traces: list[Any], lone: bool, quiet: bool, alone: Callable[..., Any] = fastpath.judge_alone) -> int:
        engine, stuck = LoopEngine(), 0
        engine.fast = quiet
        judge_module.judge_alone = alone  # type: ignore[assignment]  # the name TraceJudge.judge calls
        try:
            for steps in judge_bench.prepared(traces, "live"):
                judge = TraceJudge(engine, nesting=CONVENTION_NESTING, keep_steps=False, step_audit=False)
                for step in steps:
                    if lone:
                        judge.judge(step)
                    else:
                        judge.add(step)
                        judge.advance()
                stuck += judge.verdict.kind == "stuck"
        finally:
            judge_module.judge_alone = fastpath.judge_alone
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
        "live, lone step wrapped": lambda traces: live(traces, True, True, wrapped(False)),
        "live, lone step compacting": lambda traces: live(traces, True, True, wrapped(True)),
        "live, no quiet": lambda traces: live(traces, True, False),
        "live, neither": lambda traces: live(traces, False, False),
        "audit": lambda traces: audit(traces, True),
        "audit, no quiet": lambda traces: audit(traces, False),
    }


def interleaved(runs: dict[str, Callable[[], Any]], count: int, rounds: int) -> dict[str, list[float]]:
    """µs per item of every run, per round, on the whole process's CPU; the runs' order rotates every round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            gc.disable()
            t0 = time.process_time_ns()
            runs[name]()
            elapsed = time.process_time_ns() - t0
            gc.enable()
            times[name].append(elapsed / count / 1000)
    return times


def show(variant: str, v: list[float], base: list[float], trick_first: bool) -> None:
    """One line: the median and range of ``v``, and the per-round ratios trick / general."""
    ratios = [b / a for a, b in zip(v, base)] if trick_first else [a / b for a, b in zip(v, base)]
    print(f"  {variant:<32}{statistics.median(v):>7.2f}  ({min(v):.2f}-{max(v):.2f})  "
          f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")


def judging(tool_spans: int, rounds: int) -> None:
    """The judge's and the engine's tricks (``core/fastpath.py``)."""
    files = judge_bench.collect(tool_spans)
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
    times = judge_bench.time_rounds(runs, files, calls, rounds, time.process_time_ns)
    print(f"python {sys.version.split()[0]}, {rounds} rounds; µs per tool call (whole-process CPU), median "
          "(range); ratio: median of per-round ratios, every trick / the variant [range]")
    for file in files:
        print(f"{file}: {len(files[file])} traces, {calls[file]} tool calls")
        for variant in runs:
            base = BASELINES.get(variant, variant.split(",")[0])
            show(variant, times[(file, variant)], times[(file, base)], trick_first=True)


def decoding(spans: int, rounds: int) -> None:
    """The OTLP/JSON decoder's tricks (``otlp/json_typed.py``, ``otlp/json_general.py``)."""
    import json

    import otlp_decode  # tests/benchmarks/otlp_decode.py

    from otel_loopguard.otlp import json_general
    from otel_loopguard.otlp.read import decode_json_request
    from otel_loopguard.sdk.otlp_write import spans_to_otlp_dict

    made = otlp_decode._make_spans(spans)
    lines = [json.dumps(spans_to_otlp_dict(made[i:i + 100]), separators=(",", ":")).encode()
             for i in range(0, len(made), 100)]
    del made
    inline = json_general.attributes

    def plain(kvs: Any, depth: int = 0, *, keep_empty: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kv in kvs or ():
            json_general._key_value(out, kv, kvs, depth, keep_empty)
        return out

    def general(attributes: Callable[..., dict[str, Any]]) -> list[Any]:
        json_general.attributes = attributes  # type: ignore[assignment]
        try:
            return [json_general.decode_json_request(line) for line in lines]
        finally:
            json_general.attributes = inline

    runs: dict[str, Callable[[], Any]] = {
        "general": lambda: general(inline), "typed": lambda: [decode_json_request(line) for line in lines],
        "general, no inline attributes": lambda: general(plain)}
    if len({repr(run()) for run in runs.values()}) != 1:
        raise SystemExit("the decoders disagree")
    count = sum(len(spans) for spans in runs["general"]())
    gc.collect()
    gc.freeze()
    times = interleaved(runs, count, rounds)
    print(f"OTLP/JSON: {count} spans in {len(lines)} requests; µs per span; ratio: the variant / general")
    for variant in runs:
        show(variant, times[variant], times["general"], trick_first=False)


def reading(rounds: int) -> None:
    """The extractor's trick (``conventions/extract.py``): inline reads of plain attribute keys."""
    from otel_loopguard.conventions import extract
    from otel_loopguard.otlp.read import read_spans

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
    spans = [s for path in sorted(fixtures.rglob("*.json")) if not path.name.startswith("MANIFEST")
             and "logs" not in path.parts for s in read_spans(str(path))
             if extract.span_role(s.attributes, s.name) == "tool"]
    spans *= max(1, 20_000 // len(spans))
    extractor = extract.Extractor()
    rows = [(row, row.tool_key, row.error_keys, row.args.keys, row.result.keys)
            for row in extract._BUILTIN_ROWS]  # the built-in rows (no user rows here), the GenAI fallback among them

    def read(inline: bool) -> list[Any]:
        if not inline:
            for row, *_ in rows:
                row.tool_key = row.error_keys = row.args.keys = row.result.keys = None
        try:
            return [extractor.tool_call(s.attributes, s.name, s.start_ns, s.end_ns, s.status_error,
                                        s.status_message, [(e[0], e[2]) for e in s.events]) for s in spans]
        finally:
            for row, tool_key, error_keys, args_keys, result_keys in rows:
                row.tool_key, row.error_keys, row.args.keys, row.result.keys = (
                    tool_key, error_keys, args_keys, result_keys)

    runs: dict[str, Callable[[], Any]] = {"no inline keys": lambda: read(False), "inline keys": lambda: read(True)}
    if runs["inline keys"]() != runs["no inline keys"]():
        raise SystemExit("the extractor's two paths disagree")
    gc.collect()
    gc.freeze()
    times = interleaved(runs, len(spans), rounds)
    print(f"tool spans of the fixtures: {len(spans)} reads; µs per span; ratio: the variant / no inline keys")
    for variant in runs:
        show(variant, times[variant], times["no inline keys"], trick_first=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-spans", type=int, default=5_000, help="tool spans per file (judging)")
    parser.add_argument("--spans", type=int, default=20_000, help="spans decoded (OTLP/JSON)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    judging(args.tool_spans, args.rounds)
    decoding(args.spans, args.rounds)
    reading(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
