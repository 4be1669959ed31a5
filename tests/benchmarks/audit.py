"""Benchmark: the whole ``otel-loopguard audit --json`` command against plain ``json.loads`` of the same file.

Run: ``.venv/bin/python tests/benchmarks/audit.py [tool_spans] [--profile] [--against DIR]`` (default 200,000 tool
spans per file).

Generates two OTLP/JSON Lines files like the Collector's file exporter writes (one export request per line, each
holding eight whole traces of a service), with realistic GenAI spans: an ``invoke_agent`` root, ``chat`` spans with
token usage, and ``execute_tool`` spans carrying a ~200-byte JSON argument string, a result, a call id and now and
then ``error.type``; one trace in ten loops on one call. The files differ in their tool traffic:

* mixed tools: 20 tool spans per trace, each calling one of six tools;
* one tool, many arguments: 10 tool spans per trace, every one calling ``search_docs`` with a new query (``q1``,
  ``q2``, ...), the common shape of an agent's traffic (and the one where every call has earlier calls of its tool
  in the window to be told apart from).

Each round runs, in a fresh interpreter per run and in an order that rotates from round to round:

* ``parse``: read the file and ``json.loads`` every line (the baseline the target is stated against);
* ``audit``: ``python -m otel_loopguard.cli audit --json FILE``, standard output sent to /dev/null: the command as
  a user runs it, its imports included;
* ``read``: ``read_spans`` of the file alone (reading, parsing and OTLP decoding, no judging), to show how the
  audit's time splits between reading the file and judging the traces;

and the import of the command alone (``audit --help``). Times are the CPU seconds (user + system) each child used.
The figure is ``speed(audit) / speed(parse) = t(parse) / t(audit)`` per round, reported as the median of the rounds
(``AUDIT_BENCH_ROUNDS``, default 5) with its range; the target is >= 0.5 on both files.
``--profile`` also prints the top functions of one audit of each file under cProfile. ``--against DIR`` also times,
in the same rounds, the audit with the package imported from DIR (another checkout, e.g. a ``git worktree`` of main),
and prints its ratio and the per-round ratio of the two audits' times (this checkout's over DIR's).
"""

from __future__ import annotations

import compileall
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from otel_loopguard.cli import main

TOOLS_PER_TRACE = 20
ONE_TOOL_PER_TRACE = 10
CHATS_PER_TRACE = 5
TRACES_PER_LINE = 8
ROUNDS = int(os.environ.get("AUDIT_BENCH_ROUNDS", "5"))
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


def _one_tool_args(rng: random.Random, n: int, i: int) -> str:
    """The arguments of call ``i`` of trace ``n`` when one tool is called again and again: a new query each time."""
    return json.dumps({
        "query": f"q{i} status of order {rng.randrange(10**6)} for customer {n % 997}",
        "filters": {"region": ("eu-west-1", "us-east-1", "ap-south-1")[n % 3], "since": "2025-12-01",
                    "include_archived": False},
        "limit": 25, "fields": ["id", "status", "total", "updated_at"],
    }, separators=(",", ":"))


def _trace(rng: random.Random, n: int, one_tool: bool) -> list[dict]:
    """The spans of trace ``n``: mixed tools (20 tool spans), or one tool with new arguments each call (10)."""
    trace_id = f"{rng.getrandbits(128):032x}"
    root_id = f"{rng.getrandbits(64):016x}"
    loops = n % 10 == 0
    spans = []
    t = T0 + n * 60 * 10**9
    start = t
    agent = f"agent-{n % 7}"
    tools = ONE_TOOL_PER_TRACE if one_tool else TOOLS_PER_TRACE
    loop_from = tools // 2
    loop_args = _one_tool_args(rng, n, 0) if one_tool else _args(rng, 0)
    for i in range(tools):
        if i % (tools // CHATS_PER_TRACE) == 0:
            spans.append(_span(rng, trace_id, root_id, "chat gpt-4.1-mini", t, t + 900_000_000, {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini",
                "gen_ai.response.model": "gpt-4.1-mini", "gen_ai.usage.input_tokens": 2000 + 150 * i,
                "gen_ai.usage.output_tokens": 120, "gen_ai.agent.name": agent,
            }))
            t += 10**9
        looping = loops and i >= loop_from
        failed = not looping and rng.random() < 0.03
        tool = "search_docs" if looping or one_tool else rng.choice(_TOOLS)
        # The random draws keep their order (tool, call id, arguments): the mixed file is the one the audit
        # equivalence test pins.
        call_id = f"call_{rng.getrandbits(64):016x}"
        args = loop_args if looping else _one_tool_args(rng, n, i) if one_tool else _args(rng, i)
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": args,
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


def generate(path: str, tool_spans: int, one_tool: bool = False) -> tuple[int, int]:
    """Write a benchmark file; returns (traces, spans)."""
    rng = random.Random(42)
    traces = -(-tool_spans // (ONE_TOOL_PER_TRACE if one_tool else TOOLS_PER_TRACE))
    resource = {"attributes": [_kv("service.name", "support-agent"), _kv("service.version", "2.3.1"),
                               _kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.name", "opentelemetry"),
                               _kv("telemetry.sdk.version", "1.39.0")]}
    scope = {"name": "opentelemetry.instrumentation.openai_agents", "version": "0.1.0"}
    total = 0
    with open(path, "w", encoding="utf-8") as fh:
        for first in range(0, traces, TRACES_PER_LINE):
            spans: list[dict] = []
            for n in range(first, min(first + TRACES_PER_LINE, traces)):
                spans.extend(_trace(rng, n, one_tool))
            total += len(spans)
            request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}]}
            fh.write(json.dumps(request, separators=(",", ":")) + "\n")
    return traces, total


# The baseline and the command each run in a fresh interpreter, timed by the CPU time (user + system) the child used:
# the command's imports count, and so does the interpreter's start, which both pay.
_PARSE = """
import json, sys
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        json.loads(line)
"""
_READ = """
import sys
from otel_loopguard.otlp.read import read_spans
for _ in read_spans(sys.argv[1]):
    pass
"""


def _child_cpu(argv: list[str], ok: tuple[int, ...] = (0,), code: str | None = None) -> float:
    """CPU seconds (user + system) a child process used, its output discarded; ``ok``: the exit codes expected;
    ``code``: a directory to import the package from (first on the child's path, and its working directory, since
    ``-m`` puts the working directory first)."""
    env = None
    if code is not None:
        env = dict(os.environ, PYTHONPATH=code + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "wb") as devnull:
        status = subprocess.run(argv, stdout=devnull, check=False, cwd=code, env=env).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert status in ok, (argv, status)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_parse(path: str) -> float:
    """CPU seconds for a fresh interpreter to read the file and ``json.loads`` every line."""
    return _child_cpu([sys.executable, "-c", _PARSE, path])


def time_read(path: str) -> float:
    """CPU seconds for a fresh interpreter to read, parse and decode every span of the file (no judging)."""
    return _child_cpu([sys.executable, "-c", _READ, path])


def time_audit(path: str, code: str | None = None) -> float:
    """CPU seconds for the whole ``otel-loopguard audit --json`` command in a fresh interpreter, output discarded
    (with ``code``: the package imported from that directory)."""
    # audit exits 1 when a trace got stuck (one in ten does)
    return _child_cpu([sys.executable, "-m", "otel_loopguard.cli", "audit", "--json", path], ok=(0, 1), code=code)


def _imported_from(code: str) -> str:
    """Where a child started as :func:`time_audit` starts it with ``code`` imports the package from."""
    env = dict(os.environ, PYTHONPATH=code + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", "import otel_loopguard; print(otel_loopguard.__file__)"],
                          capture_output=True, text=True, check=True, cwd=code, env=env).stdout.strip()


def time_import() -> float:
    """CPU seconds for a fresh interpreter to import the audit command and parse its arguments, with no input."""
    return _child_cpu([sys.executable, "-m", "otel_loopguard.cli", "audit", "--help"])


def check_output(path: str, traces: int) -> None:
    """Make sure the audit judged every trace and found the looping ones (one in ten)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["audit", "--json", path])
    reports = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(reports) == traces, (len(reports), traces)
    stuck = sum(1 for r in reports if any(t["to"] == "stuck" for t in r["transitions"]))
    assert stuck == -(-traces // 10), stuck


def _summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (range {min(values):.2f}-{max(values):.2f}, {len(values)} runs)"


def main_bench(argv: list[str]) -> int:
    tool_spans = int(next((a for a in argv if a.isdigit()), 200_000))
    profile = "--profile" in argv
    against = os.path.abspath(argv[argv.index("--against") + 1]) if "--against" in argv else None
    if against is not None:
        where = _imported_from(against)
        assert where.startswith(against + os.sep), (against, where)
        print(f"against: the package from {os.path.dirname(where)}")
        # Both packages compiled to bytecode first: with PYTHONDONTWRITEBYTECODE set (or stale files), a checkout
        # without current bytecode would compile its modules in every run, and that would be timed.
        ours = os.path.dirname(os.path.dirname(os.path.abspath(main.__globals__["__file__"])))  # otel_loopguard/cli
        for package in (ours, os.path.dirname(where)):
            compileall.compile_dir(package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, one_tool in (("mixed tools", False), ("one tool, many arguments", True)):
            path = os.path.join(tmp, f"{'one_tool' if one_tool else 'mixed'}.jsonl")
            started = time.perf_counter()
            traces, spans = generate(path, tool_spans, one_tool)
            print(f"{name}: {traces} traces, {spans} spans ({tool_spans} tool spans), "
                  f"{os.path.getsize(path) / 1e6:.0f} MB, written in {time.perf_counter() - started:.1f} s")
            check_output(path, traces)
            files[name] = (path, spans)
        # Every round times every variant on every file; the order rotates from round to round, so drift in the
        # machine's speed falls on all of them alike, and each round's ratio compares runs made moments apart.
        times: dict[tuple[str, str], list[float]] = {}
        imports: list[float] = []
        kinds = ("parse", "audit", "read") + (("against",) if against is not None else ())
        jobs = [(name, kind) for name in files for kind in kinds]
        timer = {"parse": time_parse, "audit": time_audit, "read": time_read,
                 "against": lambda path: time_audit(path, against)}
        for r in range(ROUNDS):
            order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
            for name, kind in order:
                times.setdefault((name, kind), []).append(timer[kind](files[name][0]))
            imports.append(time_import())
        print(f"{ROUNDS} rounds; CPU seconds of a fresh interpreter per run (user + system, imports included)")
        print(f"import of the audit command (audit --help): {_summary(imports)} s")
        met = True
        for name, (_, spans) in files.items():
            parse, read, audit = times[(name, "parse")], times[(name, "read")], times[(name, "audit")]
            ratios = [p / a for p, a in zip(parse, audit)]
            print(f"{name}:")
            print(f"  parse (json.loads per line)       {_summary(parse)} s")
            print(f"  read_spans (read, parse, decode)  {_summary(read)} s")
            print(f"  audit --json (whole command)      {_summary(audit)} s  "
                  f"{spans / statistics.median(audit) / 1e3:.0f}k spans/s")
            ratio = statistics.median(ratios)
            met = met and ratio >= 0.5
            print(f"  speed(audit) / speed(parse) = t(parse) / t(audit): {_summary(ratios)}  "
                  f"target >= 0.5: {'met' if ratio >= 0.5 else 'MISSED'}")
            if against is not None:
                other = times[(name, "against")]
                print(f"  audit --json from {against}: {_summary(other)} s; t(parse) / t(audit) "
                      f"{_summary([p / a for p, a in zip(parse, other)])}")
                print(f"  t(audit) / t(audit from {against}), per round: "
                      f"{_summary([a / o for a, o in zip(audit, other)])}")
        if profile:
            for name, (path, _) in files.items():
                print(f"profile of one audit, {name}:")
                profiler = cProfile.Profile()
                with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                    profiler.runcall(main, ["audit", "--json", path])
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main_bench(sys.argv[1:]))
