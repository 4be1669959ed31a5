"""The golden outputs that are not one trace's JSON report, derived without the code that wrote them.

``tests/cli/_golden_checks.py`` checks every JSON report against a hand-derived table; this module checks the rest
against those checked reports, the documented output formats (``docs/audit.md``) and the inputs themselves:

* the text forms (``mixed readable``, ``all fixtures jsonl readable``) say, trace by trace, what the checked JSON
  reports say, in the words ``docs/audit.md`` documents;
* the ``report`` aggregates (``mixed report``, ``all fixtures report``, ``benchmark slice report``) are sums,
  shares, medians and 90th percentiles over the checked reports, grouped by the ``service.name`` read straight from
  the input files, with the failed calls counted by hand and each task's outcome and turns read from its raw spans
  by the rule docs/operating-agents.md documents (the quantiles: the standard library's, the documented definition);
* ``all fixtures at`` judges the same spans later: only a lease compares a deadline with the observation time
  (decision order, rule 1), and no recorded fixture declares one, so its reports are those of ``all fixtures jsonl``;
* ``benchmark slice`` is worked out from the benchmark generator's design (every tenth trace loops on one call);
* ``bad lines``: each malformed line's location and complaint follows from how the line was broken.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
SEVERITY = ("working", "waiting", "retrying", "uncertain", "stuck")  # docs/audit.md: the worst verdict reached


def _reports(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _episodes(report: dict[str, Any], kind: str) -> list[tuple[int, int]]:
    """Calls (from 1) during which the verdict was ``kind``: from the call that entered it to the call before the
    one that left it, or to the last call."""
    out, start = [], None
    for t in report["transitions"]:
        if t["to"] == kind and start is None:
            start = t["call"]
        elif t["to"] != kind and start is not None:
            out.append((start, max(start, t["call"] - 1)))
            start = None
    if start is not None:
        out.append((start, max(start, report["steps_used"])))
    return out


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _headline(report: dict[str, Any]) -> str:
    """The first line of a trace in ``audit``'s text form, as docs/audit.md describes it."""
    verdict, rule = report["verdict"], report["rule"]
    rules = list(dict.fromkeys([*[t["rule"] for t in report["transitions"] if t["to"] == verdict][-1:], rule]))
    named = f"rule {rule}" if len(rules) == 1 else f"rules {' then '.join(rules)}"
    period = f", period {report['period']}" if report["period"] else ""
    detail = "" if rule == "none" else f" ({named}{period})"
    n = report["steps_used"]
    parts = []
    reached = {t["to"] for t in report["transitions"]} - {"working"}
    if reached:
        worst = max(reached, key=SEVERITY.index)
        episodes = _episodes(report, worst)
        single = episodes[0][0] == episodes[0][1]  # 'call 3 and 6-7', 'calls 3-5'
        where = " and ".join(_span(*e) for e in episodes)
        parts.append(f"{worst} at call{'' if single else 's'} {where}")
    for action, word in (("nudge", "nudged"), ("stop", "stopped")):
        calls = [str(i["call"]) for i in report["interventions"] if i["action"] == action]
        if calls:
            parts.append(f"{word} at call{'s' if len(calls) > 1 else ''} {', '.join(calls)}")
    return f"{verdict}{detail} after {n} tool call{'' if n == 1 else 's'}" + ("; " + ", ".join(parts) if parts else "")


def _timeline(report: dict[str, Any]) -> list[str]:
    """Verdict changes and interventions in call order (a change before the intervention it caused)."""
    lines = []
    for t in report["transitions"]:
        period = f", period {t['period']}" if t["period"] else ""
        lines.append((t["call"], 0, f"  call {t['call']}: {t['from']} -> {t['to']} (rule {t['rule']}{period})"))
    for i in report["interventions"]:
        lines.append((i["call"], 1, f"  call {i['call']}: {i['action']}: {i['message']}"))
    return [text for _, _, text in sorted(lines, key=lambda x: x[:2])]


def _step_audit(report: dict[str, Any]) -> str:
    """The step audit in words: ``ok``, or each run of identical consecutive calls (numbered from 1); runs that the
    verdict explained as progress (working, rule progress) are said to be so after an ``ok``."""
    if report["ok"]:
        return "  step audit: ok"
    runs = []
    for violation in report["violations"]:
        signature, _, index = violation.removeprefix("repeat_loop:").rpartition("@")
        runs.append(f"identical consecutive calls from call {int(index) + 1}: {signature}")
    if (report["verdict"], report["rule"]) == ("working", "progress"):
        runs = [run.partition(":")[0] + " made progress" for run in runs]
        return f"  step audit: ok ({'; '.join(runs)})"
    return "  step audit: " + "; ".join(runs)


def readable(report: dict[str, Any], source: str) -> list[str]:
    """The text form of one checked JSON report (for the reports these inputs give: no budget, no price): the
    headline, the cost, the step audit, the timeline, then what could not be read."""
    lines = [f"{source} trace {report['trace_id']}: {_headline(report)}"]
    if report.get("unpriced_tokens"):
        models = ", ".join(report["unpriced_models"])
        lines.append(f"  cost: unknown: {report['unpriced_tokens']} tokens of models without a price ({models})")
    unread = [f"  unread: {u['message']}" for u in report.get("unread", [])]
    return [*lines, _step_audit(report), *_timeline(report), *unread]


def check_readable(name: str, text: dict[str, Any], json_form: dict[str, Any], source: str) -> list[str]:
    """The text output says what the (checked) JSON output of the same input says, trace by trace."""
    expected = [line for report in _reports(json_form["stdout"]) for line in readable(report, source)]
    got = text["stdout"].splitlines()
    if (text["status"], text["stderr"]) != (json_form["status"], json_form["stderr"]):
        return [f"{name}: exit status or stderr differ from the JSON form's"]
    wrong = [f"{name}: line {i + 1}: {g!r}, derived {e!r}" for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    if len(got) != len(expected):
        wrong.append(f"{name}: {len(got)} lines, derived {len(expected)}")
    return wrong[:5]


# --- the `report` aggregates ---------------------------------------------------------------------------------------

def _trace_spans(doc: dict[str, Any]) -> dict[str, tuple[str | None, list[dict[str, Any]]]]:
    """Trace id (lower case) -> the ``service.name`` of the resource its spans came under, and its spans, read from
    the input."""
    out: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}
    for rs in doc.get("resourceSpans", []):
        attrs = rs.get("resource", {}).get("attributes", [])
        name = next((a["value"]["stringValue"] for a in attrs if a["key"] == "service.name"), None)
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                out.setdefault(span["traceId"].lower(), (name, []))[1].append(span)
    return out


_LLAMAINDEX_FAILED = '"raw_output\\": \\"429 Too Many Requests: retry after 1s\\", \\"is_error\\": true'
# An Anthropic tool_result block marked failed, inside a model span's messages (JSON text in an attribute, so its
# quotes are escaped in the file): the id of the call it answers. Blocks repeat in every later request; the id, once.
_ANTHROPIC_FAILED = re.compile(r'\\"tool_use_id\\": \\"(\w+)\\"[^}]*?\\"is_error\\": true')


def failed_calls(scenario: str, text: str) -> int:
    """A fixture's failed tool calls, by hand: the scenario ``errors_then_success`` fails twice, which the trace shows
    when the framework gives its tool spans status ERROR, or (LlamaIndex under Traceloop) writes the tool output
    with ``"is_error": true``, or (agents traced only through model spans) keeps Anthropic's ``tool_result`` blocks
    with ``"is_error": true`` in the model's messages (OpenInference's request body, OpenLLMetry 0.53's prompts):
    one failed call per distinct ``tool_use_id`` so marked. A failure only returned as text in a message (OpenAI's
    tool messages, the GenAI ``tool_call_response`` part: neither has an error field) is not read as one (0)."""
    if scenario != "errors_then_success":
        return 0
    status = '"code": 2' in text or "STATUS_CODE_ERROR" in text
    if status or _LLAMAINDEX_FAILED in text:
        return 2
    return len(set(_ANTHROPIC_FAILED.findall(text)))


# A model call's token usage, in each convention the recorded sources write it (GenAI, OpenInference, OpenLLMetry,
# the Vercel AI SDK); an agent span in each (GenAI ``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``agent``).
_USAGE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
          "gen_ai.usage.completion_tokens", "llm.token_count.prompt", "llm.token_count.completion",
          "llm.usage.prompt_tokens", "llm.usage.completion_tokens", "ai.usage.promptTokens",
          "ai.usage.completionTokens", "ai.usage.inputTokens", "ai.usage.outputTokens")
_AGENT = {("gen_ai.operation.name", "invoke_agent"), ("openinference.span.kind", "AGENT"),
          ("traceloop.span.kind", "agent")}
_REFUSAL = ("gen_ai.response.finish_reasons", "llm.finish_reason")


def _values(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values()), None) for a in span.get("attributes", [])}


def _turns(spans: list[dict[str, Any]], attrs: dict[str, dict[str, Any]]) -> int:
    """Model calls with token usage, each once (docs/operating-agents.md): a span reporting usage around another
    one (the Vercel AI SDK's ``ai.generateText`` around each ``ai.generateText.doGenerate``, with their sum) is
    not a call of its own, and a second span with the same ``gen_ai.response.id`` is the same call."""
    parent = {s["spanId"]: s.get("parentSpanId") for s in spans}
    usage = {s["spanId"] for s in spans if any(k in attrs[s["spanId"]] for k in _USAGE)}
    around = set()
    for span_id in usage:
        up = parent.get(span_id)
        while up:
            around.add(up)
            up = parent.get(up)
    responses = [attrs[span_id].get("gen_ai.response.id") for span_id in usage - around]
    return sum(r is None for r in responses) + len({r for r in responses if r is not None})


def task_facts(spans: list[dict[str, Any]]) -> tuple[bool, bool, int]:
    """(ended in error, refused, turns) of one trace read from its raw spans, by the documented rule
    (docs/operating-agents.md, task outcomes): an agent span or the root span with status ERROR or an
    ``exception`` event; a finish reason ``content_filter`` or ``refusal``; model calls with usage, each once."""
    attrs = {s["spanId"]: _values(s) for s in spans}
    error = refused = False
    for span in spans:
        a = attrs[span["spanId"]]
        if not span.get("parentSpanId") or any(a.get(key) == kind for key, kind in _AGENT):
            error |= span.get("status", {}).get("code") in (2, "STATUS_CODE_ERROR")
            error |= any(e.get("name") == "exception" for e in span.get("events", []))
        refused |= any(word in str(a.get(key)) for key in _REFUSAL for word in ("content_filter", "refusal"))
    return error, refused, _turns(spans, attrs)


def _new_row() -> dict[str, Any]:
    return {"traces": 0, "tool_calls": 0, "stuck": 0, "nudged": 0, "failed_calls": 0, "success": 0, "error": 0,
            "refused": 0, "stopped": 0, "calls": [], "turns": [], "loops": []}


def _add(row: dict[str, Any], report: dict[str, Any], failed: int, facts: tuple[bool, bool, int]) -> None:
    """Count one checked report; its outcome (docs/operating-agents.md, first that holds): stopped by loopguard,
    error, refused, success."""
    error, refused, turns = facts
    stopped = any(i["action"] == "stop" for i in report["interventions"])
    loops = sum(t["to"] == "stuck" for t in report["transitions"])
    row["traces"] += 1
    row["tool_calls"] += report["steps_used"]
    row["stuck"] += loops > 0
    row["nudged"] += any(i["action"] == "nudge" for i in report["interventions"])
    row["failed_calls"] += failed
    row["stopped" if stopped else "error" if error else "refused" if refused else "success"] += 1
    row["calls"].append(report["steps_used"])
    row["turns"].append(turns)
    row["loops"].append(loops)


def _p50_p90(values: list[int]) -> tuple[float, float]:
    """Median and 90th percentile interpolated between order statistics (numpy's default, docs/operating-agents.md):
    the standard library's inclusive quantiles."""
    if len(values) == 1:
        return float(values[0]), float(values[0])
    return statistics.median(values), statistics.quantiles(values, n=10, method="inclusive")[8]


def _rows(attribute: str, groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One object per group, as docs/audit.md describes ``report --json`` (figures rounded to 6 places)."""
    out = []
    for group in sorted(groups):
        g = groups[group]
        n, calls = g["traces"], g["tool_calls"]
        row = {"attribute": attribute, "group": group, "traces": n, "tool_calls": calls,
               "tool_calls_per_trace": round(calls / n, 6), "failed_calls": g["failed_calls"],
               "error_rate": round(g["failed_calls"] / calls, 6) if calls else 0.0,
               "loop_verdicts_per_100": round(100 * sum(g["loops"]) / n, 6)}
        for count in ("stuck", "nudged", "stopped"):
            row[count], row[f"{count}_share"] = g[count], round(g[count] / n, 6)
        for outcome in ("success", "error", "refused"):
            row[f"{outcome}_share"] = round(g[outcome] / n, 6)
        for name, values in (("turns", g["turns"]), ("tool_calls", g["calls"])):
            row[f"{name}_median"], row[f"{name}_p90"] = (round(v, 6) for v in _p50_p90(values))
        out.append(row)
    return out


def fixtures_report(outputs: dict[str, Any], files: dict[str, Path]) -> list[dict[str, Any]]:
    """``report --by service.name --json`` of all fixtures, from each fixture's checked report and its raw spans."""
    groups: dict[str, dict[str, Any]] = defaultdict(_new_row)
    for name, output in outputs.items():
        if not name.startswith("fixture "):
            continue
        path = files[name.removeprefix("fixture ")]
        text = path.read_text()
        traces = _trace_spans(json.loads(text))
        scenario = path.stem.partition("__")[2]
        for report in _reports(output["stdout"]):
            service, spans = traces[report["trace_id"]]
            _add(groups[str(service)], report, failed_calls(scenario, text), task_facts(spans))
    return _rows("service.name", groups)


# `report --by service.name` of the mixed input, worked out from tests/cli/test_golden_by_hand.py's MIXED and the
# input (tests/cli/test_audit_equivalence.py, _mixed_lines). Trace 0af7 (service "mixed", the only request with a
# resource): 1 task, stopped at call 6 (the outcome: stopped, whatever else), so success, error and refused 0.0%,
# stopped 100.0%; stuck and nudged 100.0%; one failed call of 8 (12.5%); one chat span with token usage (1200 in,
# 30 out): 1 turn, p50 = p90 = 1.0; 8 calls: 8.0 and 8.0; two changes to stuck (calls 3 and 6): 200.0 per 100.
# Traces 1af7, 2af7, 3af7 (no service.name: "(none)", listed last): 1af7 (stopped at call 9) and 3af7 (stopped at
# call 4; its root "invoke_agent a" has status OK) are stopped, 2af7 (one GET span, no error status) is a success:
# success 1 of 3 (33.3%), error and refused 0.0%, stopped, stuck and nudged 2 of 3 (66.7%); the four failed grep
# calls of 9 + 0 + 4 = 13 (30.8%); no model span: turns 0, 0, 0 (0.0, 0.0); calls sorted 0, 4, 9: median 4.0, p90
# at position (3 - 1) * 0.9 = 1.8, 4 + 0.8 * (9 - 4) = 8.0; one change to stuck in 1af7 and one in 3af7: 2 per 3
# tasks, 66.7 per 100. Columns right-aligned to the wider of header and cells, two spaces apart (docs/audit.md).
MIXED_REPORT = (
    "service.name  tasks  success  error  refused  stopped   stuck  nudged  tool errors  turns p50  turns p90"
    "  calls p50  calls p90  loops/100\n"
    "mixed             1     0.0%   0.0%     0.0%   100.0%  100.0%  100.0%        12.5%        1.0        1.0"
    "        8.0        8.0      200.0\n"
    "(none)            3    33.3%   0.0%     0.0%    66.7%   66.7%   66.7%        30.8%        0.0        0.0"
    "        4.0        8.0       66.7\n"
)


# --- judged later: `audit --at` --------------------------------------------------------------------------------------

def check_later(outputs: dict[str, Any], files: Iterable[Path]) -> list[str]:
    """``all fixtures at`` against ``all fixtures jsonl``: the observation time enters the decision order only
    through a lease's deadline (rule 1), the default configuration declares no polled tool, and no recorded fixture
    carries a ``loopguard.wait.*`` attribute; so the same spans judged later give the same reports."""
    leases = [path.name for path in files if "loopguard.wait." in path.read_text()]
    if leases:
        return [f"all fixtures at: a fixture declares a lease, derive its expiry by hand: {leases[:3]}"]
    later, now = outputs["all fixtures at"], outputs["all fixtures jsonl"]
    if later != now:
        return ["all fixtures at: not the reports of 'all fixtures jsonl' (no lease can expire)"]
    return []


# --- the benchmark slice ---------------------------------------------------------------------------------------------

def _bench_traces(path: Path) -> list[list[dict[str, Any]]]:
    """The generated file's traces in the order they appear, each its spans (plain JSON, no product code)."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    traces.setdefault(span["traceId"], []).append(span)
    return list(traces.values())


def _attrs(span: dict[str, Any]) -> dict[str, str]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def _bench_report(spans: list[dict[str, Any]], nudge: str, after_nudge: str) -> dict[str, Any]:
    """One generated trace's report by hand. Default settings (window 10, period <= 3, 3 repetitions, stop after
    one nudge): twenty calls with arguments drawn afresh never repeat; a looping trace (every tenth) calls
    ``search_docs`` with one argument string and the result "no results" from call index 10, so index 12 is the
    third cycle of period 1 (stuck, nudge) and index 13 is still stuck (stop). Five chat spans of 2000 + 150 i input
    and 120 output tokens each, no price: unpriced."""
    calls = [_attrs(s) for s in spans if _attrs(s)["gen_ai.operation.name"] == "execute_tool"]
    tokens = sum(int(a["gen_ai.usage.input_tokens"]) + int(a["gen_ai.usage.output_tokens"])
                 for a in map(_attrs, spans) if a["gen_ai.operation.name"] == "chat")
    report: dict[str, Any] = {"trace_id": spans[0]["traceId"], "verdict": "working", "rule": "none", "period": None,
                              "steps_used": len(calls), "ok": True, "violations": [], "transitions": [],
                              "interventions": [], "partial": False, "cost_usd": 0.0, "unpriced_tokens": tokens,
                              "unpriced_models": ["gpt-4.1-mini"]}
    looping = [c for c in calls if c.get("gen_ai.tool.call.result") == "no results"]
    if not looping:
        return report
    args = json.loads(looping[0]["gen_ai.tool.call.arguments"])
    signature = ",".join(f"{key}={args[key]}" for key in sorted(args))
    tool = looping[0]["gen_ai.tool.name"]
    report.update(verdict="stuck", rule="period", period=1, ok=False,
                  violations=[f"repeat_loop:{tool}|{signature}@{len(calls) - len(looping)}"],
                  transitions=[{"step": 12, "call": 13, "from": "working", "to": "stuck", "rule": "period",
                                "period": 1}],
                  interventions=[{"step": 12, "call": 13, "action": "nudge", "message": nudge.format(tool=tool),
                                  "rule": "period"},
                                 {"step": 13, "call": 14, "action": "stop", "rule": "period",
                                  "message": after_nudge.format(tool=tool, n=4)}])
    return report


def check_benchmark(outputs: dict[str, Any], path: Path, nudge: str, after_nudge: str) -> list[str]:
    """``benchmark slice`` and its ``report --by app.prompt.version`` against the generated file read by hand."""
    traces = _bench_traces(path)
    problems = []
    for spans in traces:
        calls = [(a["gen_ai.tool.name"], a["gen_ai.tool.call.arguments"]) for a in map(_attrs, spans)
                 if a["gen_ai.operation.name"] == "execute_tool"]
        if len(set(calls)) not in (len(calls), len(calls) - 9):
            problems.append(f"benchmark slice: trace {spans[0]['traceId']} repeats a call the design does not")
    expected = [_bench_report(spans, nudge, after_nudge) for spans in traces]
    got = _reports(outputs["benchmark slice"]["stdout"])
    for report in got:
        report.pop("source", None)
    if got != expected:
        problems.append("benchmark slice: not the reports derived from the generated traces")
    groups: dict[str, dict[str, Any]] = defaultdict(_new_row)
    for spans, report in zip(traces, expected):
        failed = sum(s["status"].get("code") == 2 for s in spans)
        version = next(_attrs(s)["app.prompt.version"] for s in spans if "parentSpanId" not in s)
        _add(groups[version], report, failed, task_facts(spans))
    if _reports(outputs["benchmark slice report"]["stdout"]) != _rows("app.prompt.version", groups):
        problems.append("benchmark slice report: not the sums of the derived reports")
    return problems


# --- the malformed lines -----------------------------------------------------------------------------------------------

# ``_bad_lines`` (tests/cli/test_audit_equivalence.py): line 1 is the mixed input's first request, lines 2-22 copies
# of it with one field broken, 23-26 broken requests, 27 the mixed input's second request. The first request's spans
# are: 0 an HTTP span, 1 a chat span, 2-4 the first three `search` tool spans (four attributes each), 5 an MCP span,
# 6 `other`; a span appended is spans[7], an attribute appended attributes[4]. Each broken line is refused whole
# (its location and what was expected, the value shown as read), and the trace of lines 1 and 27 is judged as the
# mixed input's trace 0af7 (tests/cli/test_golden_by_hand.py, MIXED_AGENT): exit status 2 (input errors).
_S = "resourceSpans[0].scopeSpans[0].spans"
_U64 = "expected an unsigned 64-bit integer, got"
_CODE = "expected a status code 0, 1, 2 or its STATUS_CODE_* name, got"
BAD_LINES = (
    (2, f"{_S}[2].traceId", "expected 32 hex digits, got 'xyz'"),
    (3, f"{_S}[2].traceId", "expected 32 hex digits, got 'AAECAwQFBgcICQoLDA0ODw==' (this looks like base64; "
                            "OTLP/JSON ids are hex)"),
    (4, f"{_S}[3].spanId", "expected 16 hex digits, got '0123456789abcde '"),
    (5, f"{_S}[3].parentSpanId", "expected 16 hex digits, got 5"),
    (6, f"{_S}[2].startTimeUnixNano", f"{_U64} '-1'"),
    (7, f"{_S}[2].endTimeUnixNano", f"{_U64} '18446744073709551616'"),  # 2**64
    (8, f"{_S}[2].name", "expected a string, got a number"),
    (9, f"{_S}[2].attributes[4].key", "expected a string, got a number"),
    (10, f"{_S}[2].attributes[4].value.stringValue", "expected a string, got a number"),
    (11, f"{_S}[2].attributes[4].value.intValue", "expected a 64-bit integer, got '9223372036854775808'"),  # 2**63
    (12, f"{_S}[2].attributes[4].value.boolValue", "expected true or false, got 'true'"),
    (13, f"{_S}[2].attributes[4].value.arrayValue.values[0].doubleValue",
     'expected a number, "NaN", "Infinity" or "-Infinity", got \'x\''),
    (14, f"{_S}[2].attributes[4]", "expected a KeyValue object, got a string"),
    (15, f"{_S}[2].attributes", "expected an array, got an object"),
    (16, f"{_S}[2].status.code", f"{_CODE} 7"),
    (17, f"{_S}[2].status.code", f"{_CODE} True"),
    (18, f"{_S}[2].status.message", "expected a string, got a number"),
    (19, f"{_S}[2].status", "expected a Status object, got a string"),
    (20, f"{_S}[2].events[0].timeUnixNano", f"{_U64} 'x'"),
    (21, f"{_S}[2].events", "expected an array, got an object"),
    (22, f"{_S}[7]", "expected a Span object, got a number"),
    (23, None, "not valid JSON: Expecting value (column 1)"),  # '{"resourceSpans": [' ends before a value
    (24, "resourceSpans", "expected an array, got an object"),
    (25, "[0]", "expected an ExportTraceServiceRequest object, got a number"),
    (26, "resourceSpans[0].resource.attributes[0].value.intValue", "expected a 64-bit integer, got 1.5"),
)


def check_bad_lines(output: dict[str, Any], agent: dict[str, Any]) -> list[str]:
    """The malformed lines' messages, in line order, and the one trace the good lines make."""
    derived = [f"otel-loopguard: error: <tmp>/bad.jsonl:line {n}" + (f", {where}" if where else "") + f": {what}"
               for n, where, what in BAD_LINES]
    problems = []
    if output["stderr"].splitlines() != derived:
        problems.append("bad lines: the error messages are not the derived locations and complaints")
    reports = _reports(output["stdout"])
    if output["status"] != 2 or [{k: v for k, v in r.items() if k != "source"} for r in reports] != [agent]:
        problems.append("bad lines: not exit status 2 with the mixed input's trace 0af7")
    return problems


def check_derived(outputs: dict[str, Any]) -> tuple[list[str], set[str]]:
    """Problems with the outputs this module derives, and their names."""
    import sys
    import tempfile

    from tests.cli.test_golden_by_hand import AFTER_NUDGE, MIXED_AGENT, NUDGE_3
    from tests.support.recorded_fixtures import audited_fixture_files

    files = {path.name: path for path in audited_fixture_files()}
    problems = check_readable("mixed readable", outputs["mixed readable"], outputs["mixed"], "<tmp>/mixed.jsonl")
    problems += check_readable("all fixtures jsonl readable", outputs["all fixtures jsonl readable"],
                               outputs["all fixtures jsonl"], "<tmp>/all.jsonl")
    if outputs["mixed report"] != {"status": 0, "stdout": MIXED_REPORT, "stderr": ""}:
        problems.append("mixed report: not the table derived from the mixed input's reports")
    if _reports(outputs["all fixtures report"]["stdout"]) != fixtures_report(outputs, files):
        problems.append("all fixtures report: not the sums of the fixtures' checked reports")
    problems += check_later(outputs, files.values())
    problems += check_bad_lines(outputs["bad lines"], MIXED_AGENT)
    sys.path.insert(0, str(FIXTURES.parents[1] / "benchmarks"))
    try:
        import audit as bench
    finally:
        sys.path.pop(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        bench.generate(str(path), 1200)  # the slice the golden file pins (tests/cli/test_audit_equivalence.py)
        problems += check_benchmark(outputs, path, NUDGE_3, AFTER_NUDGE)
    return problems, set(DERIVED)


DERIVED = ("all fixtures at", "all fixtures jsonl readable", "all fixtures report", "benchmark slice",
           "benchmark slice report", "bad lines", "mixed readable", "mixed report")
