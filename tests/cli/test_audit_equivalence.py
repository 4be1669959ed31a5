"""``audit`` and ``report`` on OTLP files give exactly the output pinned before the decode/evaluation speed-ups.

The golden file ``golden/audit_equivalence.json`` was written by the code before the audit was made faster;
regenerate it (only for an intended change of output) with
``.venv/bin/python tests/cli/test_audit_equivalence.py --regenerate``.

Inputs: every recorded framework fixture on its own, all of them as one JSON Lines file (also gzipped and as
protobuf), a slice of the audit benchmark's generated file, a hand-made JSON Lines file with the shapes the fast
paths must leave to the careful decoder (snake_case fields, numbers for int64, upper-case ids, every AnyValue kind,
MCP client spans, exception events, spans without a root, ties in start time) and a file of malformed lines whose
error messages and locations are pinned.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent.parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures" / "otlp"
GOLDEN = TESTS / "golden" / "audit_equivalence.json"
T0 = 1_767_225_600 * 10**9


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def _s(text: str) -> dict[str, Any]:
    return {"stringValue": text}


def _tool_span(trace: str, span: str, parent: str | None, start: int, tool: str, args: str, result: str | None,
               **extra: Any) -> dict[str, Any]:
    attrs = [_kv("gen_ai.operation.name", _s("execute_tool")), _kv("gen_ai.tool.name", _s(tool)),
             _kv("gen_ai.tool.call.arguments", _s(args))]
    if result is not None:
        attrs.append(_kv("gen_ai.tool.call.result", _s(result)))
    out: dict[str, Any] = {"traceId": trace, "spanId": span, "name": f"execute_tool {tool}",
                           "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10**8),
                           "attributes": attrs}
    if parent is not None:
        out["parentSpanId"] = parent
    out.update(extra)
    return out


def _mixed_lines() -> list[dict[str, Any]]:
    """Requests that take every branch of the span decoder and of the trace evaluation."""
    t1, r1 = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    spans: list[dict[str, Any]] = []
    for i in range(6):
        extra: dict[str, Any] = {}
        if i == 3:
            extra = {"status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                     "events": [{"name": "exception", "timeUnixNano": str(T0 + i),
                                 "attributes": [_kv("exception.type", _s("TimeoutError")),
                                                _kv("exception.message", _s("slow"))]}]}
        spans.append(_tool_span(t1, f"{i + 1:016x}", r1, T0 + i * 10**9, "search", '{"q": "same"}',
                                "nothing" if i != 3 else None, **extra))
    # An MCP client span under a tool span repeats its call; one under the root is a call of its own.
    mcp = _tool_span(t1, "00000000000000a1", "0000000000000002", T0 + 1 * 10**9 + 5, "search", '{"q": "same"}',
                     "nothing")
    mcp["attributes"].append(_kv("mcp.method.name", _s("tools/call")))
    mcp2 = _tool_span(t1, "00000000000000a2", r1, T0 + 7 * 10**9, "fetch", '{"u": 1}', "page")
    mcp2["attributes"].append(_kv("mcp.method.name", _s("tools/call")))
    # Same start as another span: the evaluation order of ties must not change.
    tie = _tool_span(t1, "00000000000000a3", r1, T0 + 2 * 10**9, "other", "{}", "x")
    plain = {"traceId": t1, "spanId": "00000000000000b1", "parentSpanId": r1, "name": "GET /",
             "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + 1),
             "attributes": [_kv("http.method", _s("GET")), _kv("http.status_code", {"intValue": 200})]}
    chat = {"traceId": t1, "spanId": "00000000000000c1", "parentSpanId": r1, "name": "chat m",
            "startTimeUnixNano": T0 + 10, "endTimeUnixNano": T0 + 20,
            "attributes": [_kv("gen_ai.operation.name", _s("chat")), _kv("gen_ai.request.model", _s("m")),
                           _kv("gen_ai.usage.input_tokens", {"intValue": "1200"}),
                           _kv("gen_ai.usage.output_tokens", {"intValue": 30}),
                           _kv("flag", {"boolValue": True}), _kv("ratio", {"doubleValue": 0.5}),
                           _kv("list", {"arrayValue": {"values": [_s("a"), {"intValue": "2"}]}}),
                           _kv("map", {"kvlistValue": {"values": [_kv("k", _s("v")), _kv("e", {})]}}),
                           _kv("raw", {"bytesValue": "AAEC"}), _kv("empty", {})]}
    root = {"traceId": t1, "spanId": r1, "parentSpanId": "", "name": "invoke_agent a",
            "startTimeUnixNano": str(T0 - 1), "endTimeUnixNano": str(T0 + 20 * 10**9),
            "attributes": [_kv("gen_ai.operation.name", _s("invoke_agent")), _kv("gen_ai.agent.name", _s("a"))],
            "status": {"code": 1}}
    first = {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", _s("mixed"))]},
                                "scopeSpans": [{"spans": [plain, chat, *spans[:3], mcp, tie]}]}]}
    second = {"resourceSpans": [{"scopeSpans": [{"spans": [*spans[3:], mcp2, root]}]}]}

    # Snake case fields, upper-case hex, numbers for times, OpenInference and Traceloop spans, a lease; no root.
    t2 = "1AF7651916CD43DD8448EB211C80319C"
    snake = []
    for i in range(5):
        snake.append({"trace_id": t2, "span_id": f"{i + 1:016X}", "parent_span_id": "C7AD6B7169203331",
                      "name": "tool", "start_time_unix_nano": T0 + i * 10**9,
                      "end_time_unix_nano": str(T0 + i * 10**9 + 5),
                      "attributes": [_kv("openinference.span.kind", {"string_value": "TOOL"}),
                                     _kv("tool.name", _s("poll")), _kv("input.value", _s('{"job": 7}')),
                                     _kv("output.value", _s("pending")),
                                     _kv("loopguard.wait.owner", _s("ci")),
                                     _kv("loopguard.wait.deadline", {"doubleValue": (T0 + 10**12) / 1e9})]})
    for i in range(4):
        snake.append({"traceId": t2, "spanId": f"{i + 17:016x}", "parentSpanId": "c7ad6b7169203331",
                      "name": "task", "startTimeUnixNano": str(T0 + (10 + i) * 10**9),
                      "endTimeUnixNano": str(T0 + (10 + i) * 10**9 + 5),
                      "attributes": [_kv("traceloop.span.kind", _s("tool")), _kv("traceloop.entity.name", _s("grep")),
                                     _kv("traceloop.entity.input", _s('{"inputs": {"p": "x"}, "tags": []}')),
                                     _kv("traceloop.entity.output", _s("no match"))],
                      "status": {"code": 2}})
    third = {"resourceSpans": [{"scope_spans": [{"spans": snake}]}]}
    # A list of requests on one line, the older field name, and a trace with only non-tool spans.
    t3 = "2af7651916cd43dd8448eb211c80319c"
    only = {"traceId": t3, "spanId": "00000000000000d1", "name": "GET /x", "startTimeUnixNano": "5",
            "endTimeUnixNano": "6", "attributes": []}
    fourth = [{"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [only]}]}]}, {"resourceSpans": []}]
    # A root that arrives before its children: still one trace, judged once when the input ends.
    t4, r4 = "3af7651916cd43dd8448eb211c80319c", "d7ad6b7169203331"
    late_root = dict(root, traceId=t4, spanId=r4)
    late = [_tool_span(t4, f"{i + 1:016x}", r4, T0 + i, "same", "{}", "r") for i in range(4)]
    fifth = {"resourceSpans": [{"scopeSpans": [{"spans": [late_root, *late]}]}]}
    return [first, second, third, fourth, fifth]  # type: ignore[list-item]


def _bad_lines() -> list[str]:
    """A JSON Lines file in which most lines are malformed in a different way; good lines must still count."""
    good = _mixed_lines()[0]
    lines = [json.dumps(good)]

    def mutate(fn: Any) -> None:
        doc = copy.deepcopy(good)
        fn(doc["resourceSpans"][0]["scopeSpans"][0]["spans"])
        lines.append(json.dumps(doc))

    mutate(lambda s: s[2].update(traceId="xyz"))
    mutate(lambda s: s[2].update(traceId="AAECAwQFBgcICQoLDA0ODw=="))
    mutate(lambda s: s[3].update(spanId="0123456789abcde "))
    mutate(lambda s: s[3].update(parentSpanId=5))
    mutate(lambda s: s[2].update(startTimeUnixNano="-1"))
    mutate(lambda s: s[2].update(endTimeUnixNano="18446744073709551616"))
    mutate(lambda s: s[2].update(name=3))
    mutate(lambda s: s[2]["attributes"].append(_kv(5, _s("x"))))
    mutate(lambda s: s[2]["attributes"].append({"key": "k", "value": {"stringValue": 5}}))
    mutate(lambda s: s[2]["attributes"].append({"key": "k", "value": {"intValue": "9223372036854775808"}}))
    mutate(lambda s: s[2]["attributes"].append({"key": "k", "value": {"boolValue": "true"}}))
    mutate(lambda s: s[2]["attributes"].append({"key": "k", "value": {"arrayValue": {"values": [{"doubleValue": "x"}]}}}))
    mutate(lambda s: s[2]["attributes"].append("kv"))
    mutate(lambda s: s[2].update(attributes={"k": "v"}))
    mutate(lambda s: s[2].update(status={"code": 7}))
    mutate(lambda s: s[2].update(status={"code": True}))
    mutate(lambda s: s[2].update(status={"message": 1}))
    mutate(lambda s: s[2].update(status="ERROR"))
    mutate(lambda s: s[2].update(events=[{"name": "e", "timeUnixNano": "x"}]))
    mutate(lambda s: s[2].update(events={"name": "e"}))
    mutate(lambda s: s.append(7))
    lines.append('{"resourceSpans": [')
    lines.append('{"resourceSpans": {}}')
    lines.append("[1]")
    lines.append('{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {"intValue": 1.5}}]}}]}')
    lines.append(json.dumps(_mixed_lines()[1]))
    return lines


def _write_inputs(tmp: Path) -> list[tuple[str, list[str]]]:
    """Write the input files; returns (case name, argv) pairs."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    sys.path.insert(0, str(TESTS / "benchmarks"))
    try:
        import audit as bench
    finally:
        sys.path.pop(0)
    cases: list[tuple[str, list[str]]] = []
    # The fixtures pinned in the golden file: those of the sources judged when it was written (the file also
    # runs as a script, hence the path for the `tests` package).
    sys.path.insert(0, str(ROOT))
    try:
        from tests.support.recorded_fixtures import audited_fixture_files
    finally:
        sys.path.pop(0)
    fixtures = audited_fixture_files()
    docs = []
    for path in fixtures:
        doc = json.loads(path.read_text())
        if "resourceSpans" not in doc:
            continue
        docs.append(doc)
        cases.append((f"fixture {path.name}", ["audit", "--json", str(path)]))
    all_lines = "".join(json.dumps(doc) + "\n" for doc in docs)
    (tmp / "all.jsonl").write_text(all_lines)
    (tmp / "all.jsonl.gz").write_bytes(gzip.compress(all_lines.encode()))
    request = ExportTraceServiceRequest()
    for doc in docs:
        part = copy.deepcopy(doc)
        for rs in part["resourceSpans"]:
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for name in ("traceId", "spanId", "parentSpanId"):
                        if span.get(name):
                            import base64

                            span[name] = base64.b64encode(bytes.fromhex(span[name])).decode()
        request.MergeFrom(ParseDict(part, ExportTraceServiceRequest()))
    (tmp / "all.pb").write_bytes(request.SerializeToString())
    cases.append(("all fixtures jsonl", ["audit", "--json", str(tmp / "all.jsonl")]))
    cases.append(("all fixtures jsonl readable", ["audit", str(tmp / "all.jsonl")]))
    cases.append(("all fixtures jsonl.gz", ["audit", "--json", str(tmp / "all.jsonl.gz")]))
    cases.append(("all fixtures protobuf", ["audit", "--json", str(tmp / "all.pb")]))
    cases.append(("all fixtures at", ["audit", "--json", "--at", "1796282900", str(tmp / "all.jsonl")]))
    cases.append(("all fixtures report", ["report", "--by", "service.name", "--json", str(tmp / "all.jsonl")]))
    bench.generate(str(tmp / "bench.jsonl"), 1200)
    cases.append(("benchmark slice", ["audit", "--json", str(tmp / "bench.jsonl")]))
    cases.append(("benchmark slice report", ["report", "--by", "app.prompt.version", "--json",
                                             str(tmp / "bench.jsonl")]))
    (tmp / "mixed.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in _mixed_lines()))
    cases.append(("mixed", ["audit", "--json", str(tmp / "mixed.jsonl")]))
    cases.append(("mixed readable", ["audit", str(tmp / "mixed.jsonl")]))
    cases.append(("mixed report", ["report", "--by", "service.name", str(tmp / "mixed.jsonl")]))
    merged = {"resourceSpans": [rs for doc in _mixed_lines()[:3] for rs in doc["resourceSpans"]]}  # type: ignore[index]
    (tmp / "mixed.json").write_text(json.dumps(merged, indent=2))
    cases.append(("mixed one document", ["audit", "--json", str(tmp / "mixed.json")]))
    (tmp / "bad.jsonl").write_text("\n".join(_bad_lines()) + "\n")
    cases.append(("bad lines", ["audit", "--json", str(tmp / "bad.jsonl")]))
    return cases


def _run(argv: list[str], tmp: Path) -> dict[str, Any]:
    from otel_loopguard.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)

    def clean(text: str) -> str:
        return text.replace(str(tmp), "<tmp>").replace(str(FIXTURES), "<fixtures>")

    return {"status": status, "stdout": clean(out.getvalue()), "stderr": clean(err.getvalue())}


def _outputs(tmp: Path) -> dict[str, Any]:
    return {name: _run(argv, tmp) for name, argv in _write_inputs(tmp)}


def test_audit_and_report_output_equals_the_pinned_output(tmp_path: Path) -> None:
    """Every pinned input gives byte-identical stdout, stderr and exit status to the output before the speed-ups."""
    golden = json.loads(GOLDEN.read_text())
    outputs = _outputs(tmp_path)
    assert sorted(outputs) == sorted(golden)
    for name, expected in golden.items():
        assert outputs[name] == expected, name


@pytest.mark.parametrize("case", ["mixed", "bad lines", "benchmark slice"])
def test_pinned_cases_are_not_trivial(case: str) -> None:
    """The pinned outputs hold real verdicts and errors, so the equivalence check above can fail."""
    golden = json.loads(GOLDEN.read_text())[case]
    if case == "bad lines":
        assert golden["status"] == 2 and golden["stderr"].count("otel-loopguard: error:") >= 20
    else:
        reports = [json.loads(line) for line in golden["stdout"].splitlines()]
        assert any(r["transitions"] for r in reports)
        assert any(r["verdict"] == "stuck" or any(t["to"] == "stuck" for t in r["transitions"]) for r in reports)


def test_every_pinned_output_agrees_with_what_was_derived_by_hand() -> None:
    """The golden file passes the checks --regenerate runs before it writes: fixtures against their scenario's
    expectation, the mixed input against the hand-derived reports, combined inputs against their parts."""
    from tests.cli._golden_checks import check_outputs

    problems, not_derived = check_outputs(json.loads(GOLDEN.read_text()))
    assert problems == []
    assert not_derived == []


def test_a_pinned_output_that_disagrees_stops_the_regeneration() -> None:
    """A same-call loop pinned as nudged one call late, and a combined input missing one trace, are both reported."""
    from tests.cli._golden_checks import check_outputs

    golden = json.loads(GOLDEN.read_text())
    name = "fixture pydantic_ai__same_call_loop.json"
    [report] = [json.loads(line) for line in golden[name]["stdout"].splitlines()]
    assert [(i["step"], i["action"]) for i in report["interventions"]] == [(2, "nudge"), (3, "stop")]
    report["interventions"][0]["step"] = 3
    golden[name]["stdout"] = json.dumps(report) + "\n"
    combined = golden["all fixtures protobuf"]["stdout"].splitlines()
    golden["all fixtures protobuf"]["stdout"] = "\n".join(combined[1:]) + "\n"
    problems, _ = check_outputs(golden)
    assert [p.split(":")[0] for p in problems] == [name, "all fixtures jsonl", "all fixtures jsonl.gz",
                                                   "all fixtures protobuf"]


def _swap(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


# Wrong details per output that is derived rather than a checked JSON report (tests/cli/_golden_derived.py): at
# least one each, and one of each kind of figure ``report`` derives (outcome share, quantile, loops per 100).
TAMPERED = {
    "mixed readable": [("call 6: retrying -> stuck", "call 7: retrying -> stuck")],
    "all fixtures jsonl readable": [("nudged at call 3", "nudged at call 4")],
    "mixed report": [("12.5%", "25.0%"), ("  200.0\n", "  100.0\n"), ("   33.3%", "   66.7%"),
                     ("        4.0        8.0", "        4.0        9.0")],
    "all fixtures report": [('"failed_calls": 28', '"failed_calls": 26'), ('"error_share": 0.020408', '"error_share": 0.0'),
                            ('"turns_p90": 6.4', '"turns_p90": 6.0'), ('"tool_calls_median": 4.0', '"tool_calls_median": 4.5')],
    "all fixtures at": [('"verdict": "stuck"', '"verdict": "waiting"')],
    "benchmark slice": [('"step": 13, "call": 14, "action": "stop"', '"step": 14, "call": 15, "action": "stop"')],
    "benchmark slice report": [('"failed_calls": 30', '"failed_calls": 29'), ('"turns_median": 5.0', '"turns_median": 6.0'),
                               ('"success_share": 0.9', '"success_share": 1.0'),
                               ('"loop_verdicts_per_100": 10.0', '"loop_verdicts_per_100": 20.0')],
    "bad lines": [("line 22, resourceSpans[0].scopeSpans[0].spans[7]", "line 22, resourceSpans[0].scopeSpans[0]")],
}


@pytest.mark.parametrize(("name", "old", "new"), [(name, old, new) for name, swaps in sorted(TAMPERED.items())
                                                  for old, new in swaps])
def test_a_derived_output_that_disagrees_stops_the_regeneration(name: str, old: str, new: str) -> None:
    """Each output derived from the checked reports, the inputs and the documented formats is checked: one wrong
    call number, share, count, quantile, verdict or location in it is reported (by its name) and nothing else is."""
    from tests.cli._golden_checks import check_outputs

    golden = json.loads(GOLDEN.read_text())
    field = "stderr" if name == "bad lines" else "stdout"
    golden[name][field] = _swap(golden[name][field], old, new)
    problems, _ = check_outputs(golden)
    assert problems and {p.split(":")[0] for p in problems} == {name}


def test_the_regeneration_command_exits_1_and_writes_nothing_on_a_disagreement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--regenerate with one derived output wrong (a stop one call late in the mixed text form): status 1, the
    output named on stderr, the golden file untouched; with the outputs as pinned it writes them back unchanged."""
    module = sys.modules[__name__]
    golden = json.loads(GOLDEN.read_text())
    target = tmp_path / "golden.json"
    target.write_text("unchanged")
    monkeypatch.setattr(module, "GOLDEN", target)
    wrong = copy.deepcopy(golden)
    wrong["mixed readable"]["stdout"] = _swap(wrong["mixed readable"]["stdout"], "call 6: stop", "call 7: stop")
    monkeypatch.setattr(module, "_outputs", lambda tmp: wrong)
    assert _regenerate() == 1
    assert "mixed readable: line" in capsys.readouterr().err
    assert target.read_text() == "unchanged"
    monkeypatch.setattr(module, "_outputs", lambda tmp: golden)
    assert _regenerate() == 0
    assert json.loads(target.read_text()) == golden


def _regenerate() -> int:
    """Write the golden file, only when every output agrees with its hand-derived check (exit status 1 if not)."""
    import tempfile

    sys.path.insert(0, str(ROOT))
    from tests.cli._golden_checks import NOT_DERIVED, check_outputs

    with tempfile.TemporaryDirectory() as tmp_dir:
        outputs = _outputs(Path(tmp_dir))
    problems, not_derived = check_outputs(outputs)
    for name in not_derived:
        print(f"not derived by hand: {name} ({NOT_DERIVED[name]})")
    if problems:
        print(f"{GOLDEN} not written: {len(problems)} output(s) disagree with what was derived by hand:",
              *problems, sep="\n  ", file=sys.stderr)
        return 1
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    if "--regenerate" in sys.argv:
        sys.exit(_regenerate())
