"""Benchmark: ``otel-loopguard calibrate`` over 10 000 generated traces and a grid of 50 settings.

Run: ``.venv/bin/python tests/benchmarks/calibrate.py [--traces N] [--jobs 1,2] [--profile]``
     ``.venv/bin/python tests/benchmarks/calibrate.py --generate DIR [--traces N]`` (only write the traces: the
     README's worked example uses ``--generate runs --traces 400``).

Generates labelled agent runs as OTLP/JSON Lines (one export request per line, several traces each) in
``incidents/`` and ``healthy/``, with GenAI spans (an ``invoke_agent`` root, a ``chat`` span with token usage before
every ``execute_tool`` span) and realistic shapes, chosen so that settings disagree:

* healthy (60%): distinct calls; a job polled until done (2-6 polls, the same "running" result until the last);
  pagination; a rate-limited call retried with backoff; edit/test cycles where the tests sometimes fail the same
  way several times in a row while the edits differ (the frequency rule can take that for a loop);
* incidents (40%): the same call with the same result 4-12 times; a ping-pong of two calls; a cycle of three; a
  "noisy" loop (one call every other call, varying calls between: only the frequency rule sees it); a slow loop
  (one call every third call); the same failing call again and again.

Then times, in wall-clock seconds and CPU seconds (this process's, plus its worker processes' once they have
exited): reading and decoding every file once into judge steps, and the sweep of 50 settings
(frequency_limit 2..6 x min_repetitions 2..6 x hysteresis 1,2, window 20) with 1 and 2 worker processes. It
prints the time per trace per setting.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import resource
import sys
import tempfile
import time

T0 = 1_767_225_600 * 10**9
TRACES_PER_LINE = 10
LINES_PER_FILE = 100
MODEL = "gpt-4.1-mini"
#: Prices for the generated model (USD per million tokens), for the example's dollars.
PRICES_TOML = f'[prices."{MODEL}"]\ninput = 0.40\noutput = 1.60\ncache_read = 0.10\n'
GRID = ["--grid", "window=20", "--grid", "max_period=3", "--grid", "frequency_limit=2,3,4,5,6",
        "--grid", "min_repetitions=2,3,4,5,6", "--grid", "hysteresis=1,2"]


def _kv(key: str, value: object) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


class _Run:
    """One agent run being written: a chat span, then a tool span, per call."""

    def __init__(self, rng: random.Random, n: int) -> None:
        self.rng = rng
        self.trace_id = f"{rng.getrandbits(128):032x}"
        self.root_id = f"{rng.getrandbits(64):016x}"
        self.start = self.t = T0 + n * 3600 * 10**9
        self.spans: list[dict] = []
        self.calls = 0

    def _span(self, name: str, start: int, end: int, attrs: dict, error: str | None = None) -> None:
        span = {"traceId": self.trace_id, "spanId": f"{self.rng.getrandbits(64):016x}", "parentSpanId": self.root_id,
                "name": name, "kind": 1, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
                "attributes": [_kv(k, v) for k, v in attrs.items()]}
        if error:
            span["status"] = {"code": 2, "message": error}
        self.spans.append(span)

    def call(self, tool: str, args: dict, result: str | None, error: str | None = None,
             gap: float | None = None) -> None:
        rng = self.rng
        if gap is not None:
            self.t += int(gap * 1e9)
        chat = int(rng.uniform(0.5, 2.5) * 1e9)
        self._span(f"chat {MODEL}", self.t, self.t + chat, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL, "gen_ai.response.model": MODEL,
            "gen_ai.usage.input_tokens": 1500 + 220 * self.calls, "gen_ai.usage.output_tokens": rng.randrange(60, 300),
        })
        self.t += chat + int(0.05e9)
        run = int(rng.uniform(0.2, 3.0) * 1e9)
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                 "gen_ai.tool.call.id": f"call_{rng.getrandbits(48):012x}",
                 "gen_ai.tool.call.arguments": json.dumps(args, separators=(",", ":"))}
        if error:
            attrs["error.type"] = error
        elif result is not None:
            attrs["gen_ai.tool.call.result"] = result
        self._span(f"execute_tool {tool}", self.t, self.t + run, attrs, error)
        self.t += run + int(0.05e9)
        self.calls += 1

    def distinct(self, count: int) -> None:
        rng = self.rng
        for _ in range(count):
            tool = rng.choice(("search_docs", "read_file", "run_query", "http_get", "list_issues"))
            self.call(tool, {"q": f"{tool} {rng.getrandbits(32):x}"}, f"{rng.randrange(1, 90)} rows, id {rng.getrandbits(24)}")

    def finish(self, label: str) -> list[dict]:
        self.spans.append({"traceId": self.trace_id, "spanId": self.root_id, "name": "invoke_agent support-bot",
                           "kind": 1, "startTimeUnixNano": str(self.start), "endTimeUnixNano": str(self.t),
                           "attributes": [_kv("gen_ai.operation.name", "invoke_agent"),
                                          _kv("gen_ai.agent.name", "support-bot"), _kv("app.run.label", label)]})
        return self.spans


def healthy_run(rng: random.Random, n: int) -> list[dict]:
    run = _Run(rng, n)
    kind = rng.choices(("distinct", "polling", "pagination", "retry", "edit_test"), (25, 15, 20, 15, 25))[0]
    run.distinct(rng.randrange(2, 6))
    if kind == "distinct":
        run.distinct(rng.randrange(5, 20))
    elif kind == "polling":
        job = f"job-{rng.getrandbits(20)}"
        polls = rng.randrange(2, 7)
        for i in range(polls):
            run.call("get_job_status", {"job_id": job}, '{"state": "done"}' if i == polls - 1 else '{"state": "running"}',
                     gap=rng.uniform(2, 10))
    elif kind == "pagination":
        for page in range(rng.randrange(3, 10)):
            run.call("fetch_page", {"cursor": f"p{page}"}, f'{{"rows": [{page * 50}], "next": "p{page + 1}"}}')
    elif kind == "retry":
        for attempt, gap in enumerate((0.0, 1.2, 2.5)):
            run.call("send_email", {"to": "ops@example.com"}, None if attempt < 2 else "sent",
                     error="RateLimitError" if attempt < 2 else None, gap=gap)
    else:
        failing = 0
        for i in range(rng.randrange(3, 7)):
            run.call("edit_file", {"path": "app.py", "patch": f"fix {i} {rng.getrandbits(16):x}"}, "ok")
            if failing == 0 and rng.random() < 0.35:
                failing = rng.randrange(2, 5)
            result = "1 failed: test_login" if failing else f"{5 - min(i, 4)} failed"
            failing = max(0, failing - 1)
            run.call("run_tests", {"path": "tests/"}, result)
        run.call("run_tests", {"path": "tests/"}, "all passed")
    run.distinct(rng.randrange(1, 4))
    return run.finish("healthy")


def incident_run(rng: random.Random, n: int) -> list[dict]:
    run = _Run(rng, n)
    kind = rng.choices(("same", "ping_pong", "cycle3", "noisy", "slow", "failing"), (30, 20, 10, 20, 15, 5))[0]
    run.distinct(rng.randrange(2, 8))
    if kind == "same":
        for _ in range(rng.randrange(4, 13)):
            run.call("search_kb", {"query": "2FA code rejected"}, "No matching articles.")
    elif kind == "ping_pong":
        for _ in range(rng.randrange(3, 7)):
            run.call("web_search", {"q": "ACME Q3 revenue"}, "1. acme.example/ir/q3")
            run.call("read_page", {"url": "https://acme.example/ir/q3"}, "This page has moved.")
    elif kind == "cycle3":
        for _ in range(rng.randrange(2, 5)):
            run.call("list_files", {"dir": "src"}, "main.py util.py")
            run.call("read_file", {"path": "src/main.py"}, "import util")
            run.call("grep", {"pattern": "def login"}, "no match")
    elif kind == "noisy":
        for i in range(rng.randrange(4, 9)):
            run.call("lookup_order", {"order_id": 4182}, "status: unknown")
            run.call("note", {"text": f"thinking {i} {rng.getrandbits(16):x}"}, "ok")
    elif kind == "slow":
        for i in range(rng.randrange(4, 8)):
            run.call("get_invoice", {"invoice": "INV-77"}, "not found")
            run.call("search_docs", {"q": f"invoice {i} {rng.getrandbits(16):x}"}, f"{i} hits")
            run.call("read_file", {"path": f"docs/{rng.getrandbits(16):x}.md"}, "...")
    else:
        for _ in range(rng.randrange(4, 9)):
            run.call("deploy", {"env": "prod"}, None, error="PermissionDenied")
    return run.finish("incident")


def generate(directory: str, traces: int, incident_share: float = 0.4, variant: int = 7) -> dict[str, int]:
    """Write ``traces`` labelled runs under ``directory``/incidents and ``directory``/healthy; returns counts."""
    rng = random.Random(variant)  # one variant, one set of runs
    resource = {"attributes": [_kv("service.name", "support-agent"), _kv("service.version", "2.3.1")]}
    scope = {"name": "calibrate-benchmark", "version": "1"}
    runs: dict[str, list[list[dict]]] = {"incidents": [], "healthy": []}
    for n in range(traces):
        label = "incidents" if rng.random() < incident_share else "healthy"
        runs[label].append(incident_run(rng, n) if label == "incidents" else healthy_run(rng, n))
    for label, spans_of_runs in runs.items():
        os.makedirs(os.path.join(directory, label), exist_ok=True)
        per_file = TRACES_PER_LINE * LINES_PER_FILE
        for f, first in enumerate(range(0, len(spans_of_runs), per_file)):
            with open(os.path.join(directory, label, f"runs-{f:04d}.jsonl"), "w", encoding="utf-8") as fh:
                chunk = spans_of_runs[first:first + per_file]
                for line in range(0, len(chunk), TRACES_PER_LINE):
                    spans = [span for run in chunk[line:line + TRACES_PER_LINE] for span in run]
                    request = {"resourceSpans": [{"resource": resource,
                                                  "scopeSpans": [{"scope": scope, "spans": spans}]}]}
                    fh.write(json.dumps(request, separators=(",", ":")) + "\n")
    with open(os.path.join(directory, "prices.toml"), "w", encoding="utf-8") as fh:
        fh.write(PRICES_TOML)
    return {label: len(r) for label, r in runs.items()}


def _bench(directory: str, jobs_list: list[int], profile: bool) -> None:
    from otel_loopguard.cli.calibrate import LabelRules, read_traces
    from otel_loopguard.core.calibrate import Grid, calibrate, parse_axis_text
    from otel_loopguard.core.config import LoopGuardConfig

    config = LoopGuardConfig.load(os.path.join(directory, "prices.toml"))
    cpu, wall = time.process_time(), time.perf_counter()
    reading = read_traces([(os.path.join(directory, "incidents"), "incident"),
                           (os.path.join(directory, "healthy"), "healthy")], config, rules=LabelRules())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    traces = reading.traces
    calls = sum(t.calls for t in traces)
    print(f"read once: {len(traces)} traces, {calls} tool calls in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({1e6 * cpu / len(traces):.0f} µs per trace)")
    axes = dict(parse_axis_text(GRID[i + 1]) for i in range(0, len(GRID), 2))
    grid = Grid.build(None, axes)
    settings, _ = grid.settings(config)
    print(f"grid: {len(settings)} settings")
    for jobs in jobs_list:
        if profile and jobs == 1:
            prof = cProfile.Profile()
            prof.enable()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu, wall = time.process_time(), time.perf_counter()
        result = calibrate(traces, grid, config, jobs=jobs)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        workers = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        if profile and jobs == 1:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)
        replays = len(traces) * len(settings)
        rec = result.recommendation
        assert rec is not None
        print(f"sweep, {jobs} process(es): {wall:.1f} s wall, CPU {cpu:.1f} s in this process + {workers:.1f} s in "
              f"workers = {1e6 * (cpu + workers) / replays:.1f} µs CPU per trace per setting "
              f"({1e6 * (cpu + workers) / replays / (calls / len(traces)):.2f} µs per call); wall "
              f"{1e6 * wall / replays:.1f} µs per trace per setting; recommended {rec.setting.label()}: "
              f"caught {len(rec.caught)}/{rec.incidents}, false stops {len(rec.false_stops)}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--jobs", default="1,2", help="comma-separated process counts to time")
    parser.add_argument("--generate", metavar="DIR", help="only write the traces (and prices.toml) to DIR")
    parser.add_argument("--profile", action="store_true", help="profile the one-process sweep")
    args = parser.parse_args(argv)
    if args.generate:
        counts = generate(args.generate, args.traces)
        print(f"wrote {counts['incidents']} incident and {counts['healthy']} healthy runs to {args.generate}/")
        return
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        counts = generate(tmp, args.traces)
        size = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(tmp) for f in files)
        print(f"generated {counts['incidents']} incident and {counts['healthy']} healthy runs, {size / 1e6:.0f} MB, "
              f"in {time.perf_counter() - started:.1f} s")
        _bench(tmp, [int(j) for j in args.jobs.split(",")], args.profile)


if __name__ == "__main__":
    main(sys.argv[1:])
