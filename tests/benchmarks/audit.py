"""Benchmark: the whole ``otel-loopguard audit`` against plain ``json.loads`` of the same OTLP/JSON Lines file.

Run: ``.venv/bin/python tests/benchmarks/audit.py [tool_spans] [--profile]`` (default 200,000 tool spans).

Generates an OTLP/JSON Lines file like the Collector's file exporter writes (one export request per line, each
holding several whole traces of a service), with realistic GenAI spans: an ``invoke_agent`` root, ``chat`` spans with
token usage and 20 ``execute_tool`` spans per trace carrying a ~200-byte JSON argument string, a result, a call id
and now and then ``error.type``; one trace in ten loops on one call. Then times, interleaved over a few rounds:

* ``parse``: read the file and ``json.loads`` every line (the baseline the target is stated against; audit itself
  parses with msgspec, which is faster);
* ``audit``: ``otel_loopguard.cli.main(["audit", "--json", FILE])`` with standard output sent to /dev/null;
* ``read``: ``read_spans`` of the file alone (reading, parsing and OTLP decoding, no judging), to show how the
  audit's time splits between reading the file and judging the traces.

Times are CPU seconds of the process (``time.process_time``), medians of the rounds (``AUDIT_BENCH_ROUNDS``,
default 3); the ratio is also given as the median of each round's own parse/audit ratio. It prints ``speed(audit) / speed(parse) = t(parse) / t(audit)``; the target is >= 0.5.
``--profile`` also prints the top functions of one audit under cProfile.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import time

from otel_loopguard.cli import main

TOOLS_PER_TRACE = 20
CHATS_PER_TRACE = 5
TRACES_PER_LINE = 8
ROUNDS = int(os.environ.get("AUDIT_BENCH_ROUNDS", "3"))
T0 = 1_767_225_600 * 10**9

_TOOLS = ("search_docs", "read_file", "run_query", "http_get", "list_issues", "edit_file")


def _kv(key: str, value: object) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}  # OTLP/JSON writes int64 as a string
    return {"key": key, "value": {"stringValue": str(value)}}


def _span(rng: random.Random, trace_id: str, parent: str | None, name: str, start: int, end: int,
          attrs: dict, error: bool = False) -> dict:
    span = {
        "traceId": trace_id,
        "spanId": f"{rng.getrandbits(64):016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [_kv(k, v) for k, v in attrs.items()],
        "status": {"code": 2, "message": "RateLimitError"} if error else {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _args(rng: random.Random, i: int) -> str:
    text = json.dumps({
        "query": f"status of order {rng.randrange(10**6)} placed by customer {rng.randrange(10**5)}",
        "filters": {"region": rng.choice(("eu-west-1", "us-east-1", "ap-south-1")), "since": "2025-12-01",
                    "include_archived": False},
        "limit": 25, "page": i % 4 + 1, "fields": ["id", "status", "total", "updated_at"],
    }, separators=(",", ":"))
    return text


def _trace(rng: random.Random, n: int) -> list[dict]:
    trace_id = f"{rng.getrandbits(128):032x}"
    root_id = f"{rng.getrandbits(64):016x}"
    loops = n % 10 == 0
    spans = []
    t = T0 + n * 60 * 10**9
    start = t
    agent = f"agent-{n % 7}"
    loop_args = _args(rng, 0)
    for i in range(TOOLS_PER_TRACE):
        if i % (TOOLS_PER_TRACE // CHATS_PER_TRACE) == 0:
            spans.append(_span(rng, trace_id, root_id, "chat gpt-4.1-mini", t, t + 900_000_000, {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini",
                "gen_ai.response.model": "gpt-4.1-mini", "gen_ai.usage.input_tokens": 2000 + 150 * i,
                "gen_ai.usage.output_tokens": 120, "gen_ai.agent.name": agent,
            }))
            t += 10**9
        looping = loops and i >= 10
        failed = not looping and rng.random() < 0.03
        tool = "search_docs" if looping else rng.choice(_TOOLS)
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": f"call_{rng.getrandbits(64):016x}",
            "gen_ai.tool.call.arguments": loop_args if looping else _args(rng, i),
            "gen_ai.agent.name": agent,
        }
        if failed:
            attrs["error.type"] = "RateLimitError"
        else:
            attrs["gen_ai.tool.call.result"] = (
                "no results" if looping else f'{{"rows": {rng.randrange(50)}, "next": "c{rng.getrandbits(40):x}"}}'
            )
        spans.append(_span(rng, trace_id, root_id, f"execute_tool {tool}", t, t + 300_000_000, attrs, failed))
        t += 500_000_000
    root = _span(rng, trace_id, None, f"invoke_agent {agent}", start, t, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "app.prompt.version": "v3",
    })
    root["spanId"] = root_id
    spans.append(root)  # a root ends last, so exporters send it last
    return spans


def generate(path: str, tool_spans: int) -> tuple[int, int]:
    """Write the benchmark file; returns (traces, spans)."""
    rng = random.Random(42)
    traces = -(-tool_spans // TOOLS_PER_TRACE)
    resource = {"attributes": [_kv("service.name", "support-agent"), _kv("service.version", "2.3.1"),
                               _kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.name", "opentelemetry"),
                               _kv("telemetry.sdk.version", "1.39.0")]}
    scope = {"name": "opentelemetry.instrumentation.openai_agents", "version": "0.1.0"}
    total = 0
    with open(path, "w", encoding="utf-8") as fh:
        for first in range(0, traces, TRACES_PER_LINE):
            spans: list[dict] = []
            for n in range(first, min(first + TRACES_PER_LINE, traces)):
                spans.extend(_trace(rng, n))
            total += len(spans)
            request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}]}
            fh.write(json.dumps(request, separators=(",", ":")) + "\n")
    return traces, total


# CPU time of this process: on a shared machine wall time mostly measures the neighbours.
_clock = time.process_time


def time_parse(path: str) -> float:
    """CPU seconds to read the file and ``json.loads`` every line."""
    started = _clock()
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
    return _clock() - started


def time_read(path: str) -> float:
    """CPU seconds to read, parse and decode every span of the file (no judging)."""
    from otel_loopguard.otlp.read import read_spans

    started = _clock()
    for _ in read_spans(path):
        pass
    return _clock() - started


def time_audit(path: str) -> float:
    """CPU seconds for the whole ``audit --json`` command, output discarded."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        started = _clock()
        status = main(["audit", "--json", path])
        elapsed = _clock() - started
    assert status in (0, 1), status
    return elapsed


def check_output(path: str, traces: int) -> None:
    """Make sure the audit judged every trace and found the looping ones."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["audit", "--json", path])
    reports = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(reports) == traces, (len(reports), traces)
    stuck = sum(1 for r in reports if any(t["to"] == "stuck" for t in r["transitions"]))
    assert stuck == -(-traces // 10), stuck


def main_bench(argv: list[str]) -> None:
    tool_spans = int(next((a for a in argv if a.isdigit()), 200_000))
    profile = "--profile" in argv
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.jsonl")
        started = time.perf_counter()
        traces, spans = generate(path, tool_spans)
        size = os.path.getsize(path)
        print(f"generated {traces} traces, {spans} spans ({traces * TOOLS_PER_TRACE} tool spans), "
              f"{size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
        check_output(path, traces)
        parse, read, audit = [], [], []
        for _ in range(ROUNDS):
            parse.append(time_parse(path))
            read.append(time_read(path))
            audit.append(time_audit(path))
        p, r, a = statistics.median(parse), statistics.median(read), statistics.median(audit)
        print(f"parse (json.loads per line): median {p:.2f} s  {spans / p / 1e3:.0f}k spans/s  "
              f"runs {[round(x, 2) for x in parse]}")
        print(f"read_spans (read + parse + decode): median {r:.2f} s  {spans / r / 1e3:.0f}k spans/s  "
              f"runs {[round(x, 2) for x in read]}")
        print(f"audit --json (whole command): median {a:.2f} s  {spans / a / 1e3:.0f}k spans/s  "
              f"runs {[round(x, 2) for x in audit]}")
        ratio = p / a
        # On a shared machine the load drifts between rounds; the parse and audit of one round ran seconds apart,
        # so the median of the per-round ratios is steadier than the ratio of the medians.
        paired = statistics.median(pr / ar for pr, ar in zip(parse, audit))
        print(f"shares of the audit: reading the file {r / a:.0%}, judging the traces and output {(a - r) / a:.0%}")
        print(f"speed(audit) / speed(parse) = {ratio:.2f}  (target >= 0.5: {'met' if ratio >= 0.5 else 'MISSED'}); "
              f"median of per-round ratios {paired:.2f}")
        if profile:
            profiler = cProfile.Profile()
            with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                profiler.runcall(main, ["audit", "--json", path])
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main_bench(sys.argv[1:])
