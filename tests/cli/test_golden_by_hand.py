"""The pinned audit output (``tests/golden/audit_equivalence.json``) checked against reports derived by hand.

The golden file was written by the code it guards, so on its own it only proves that the output did not change.
For a handful of its traces the expected report is worked out here from the spans and the README's rules, and both
the golden file and a fresh ``audit --json`` run must agree with it. Among them are the only checks of three
extraction behaviours: an exception event's type as the error class (it makes the timeout retryable), a lease read
from ``loopguard.wait.*`` on OpenInference spans, and Traceloop's ``{"inputs": ...}`` envelope unwrapped.

The output numbers each transition and intervention twice: ``step``, the 0-based index of the call, and ``call``,
its number from 1 (as ``loopguard.steps`` counts); a transition's ``period`` is given only when it enters ``stuck``
(an uncertain, retrying or working repetition reports none).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli import main
from tests.cli.test_audit_equivalence import _mixed_lines

TESTS = Path(__file__).parent.parent
GOLDEN = TESTS / "golden" / "audit_equivalence.json"
FIXTURE = TESTS / "fixtures" / "otlp" / "langgraph_openinference__same_call_loop.json"

NUDGE_3 = "You have made the same {tool} call 3 times with the same result. Try a different approach."
AFTER_NUDGE = "loopguard stopped the run: made the same {tool} call {n} times with the same result, and it went on after a nudge"


def _t(step: int, frm: str, to: str, rule: str, period: int | None) -> dict[str, Any]:
    return {"step": step, "call": step + 1, "from": frm, "to": to, "rule": rule, "period": period}


def _i(step: int, action: str, rule: str, message: str) -> dict[str, Any]:
    return {"step": step, "call": step + 1, "action": action, "message": message, "rule": rule}


# --- the "mixed" input: five OTLP requests as JSON Lines (tests/cli/test_audit_equivalence.py, _mixed_lines) -----

# Trace 0af7...: under an invoke_agent root, six `search {"q": "same"}` tool spans one second apart (T0 + i s), each
# returning "nothing" except the fourth (i = 3), which has status ERROR and an exception event of type TimeoutError
# and no result; an MCP client span for the same call under the second search span (the same call seen twice:
# counted once); `other {}` starting and ending with the third search (ties in start time are ordered by end
# time, then span id: ...0003 before ...00a3); an MCP `fetch {"u": 1}` directly under the root (a call of its own) at T0 + 7 s; a chat span of model "m"
# with 1200 input and 30 output tokens; a plain HTTP span (ignored). Calls in order:
#   0 search, 1 search, 2 search, 3 other, 4 search (failed: TimeoutError), 5 search, 6 search, 7 fetch.
# - call 2: the third equal call with the same result, a period-1 cycle of 3 -> stuck (period 1); first nudge.
# - call 3: another tool, whose result "x" no other call in the window had -> working again (rule recovered).
# - call 4: search is now 4 times in the window (frequency limit 3), but this call failed with a retryable error
#   ("timeout" matches TimeoutError: the exception event's type is the error class) and a retry run starts -> retrying.
# - call 5: success ends the retry run; search 5 times in the window, every result "nothing" (the failure is never
#   progress) -> stuck by frequency, repetitions 5; the trace was nudged once already (max_nudges 1): stop.
# - call 6: search after search (period 1, cycle of 3 from call 4), but call 4 failed and call 5 did not, so the
#   evidence changed within the cycle: the decision order says working (progress); but the trace is stuck and its
#   result "nothing" is already in the window: no new evidence, so it stays stuck (no new intervention: stopped).
# - call 7: fetch, whose result "page" is new to the window -> working (rule recovered).
# The final verdict (working) has no period, so the report's period is null.
# Step audit: runs of 3 identical calls at 0 (calls 0-2) and at 4 (calls 4-6).
# Cost: no prices configured, so 0 USD and 1200 + 30 = 1230 unpriced tokens of model "m".
MIXED_AGENT = {
    "trace_id": "0af7651916cd43dd8448eb211c80319c", "verdict": "working", "rule": "recovered", "period": None,
    "steps_used": 8, "ok": False,
    "violations": ["repeat_loop:search|q=same@0", "repeat_loop:search|q=same@4"],
    "transitions": [_t(2, "working", "stuck", "period", 1), _t(3, "stuck", "working", "recovered", None),
                    _t(4, "working", "retrying", "retry", None), _t(5, "retrying", "stuck", "frequency", None),
                    _t(7, "stuck", "working", "recovered", None)],
    "interventions": [
        _i(2, "nudge", "period", NUDGE_3.format(tool="search")),
        _i(5, "stop", "frequency",
           "loopguard stopped the run: made the same search call 5 times with the same result, again after 1 nudge(s)"),
    ],
    "cost_usd": 0.0, "unpriced_tokens": 1230, "unpriced_models": ["m"],
}

# Trace 1AF7... (upper-case hex, snake_case fields; reported in lower case): five OpenInference `poll` tool spans
# with input '{"job": 7}', output "pending" and a lease (owner "ci", deadline T0 + 1000 s as a double), then four
# Traceloop `grep` spans whose input is the envelope {"inputs": {"p": "x"}, "tags": []} and whose status is ERROR
# without a message; no root span. Calls: 0-4 poll, 5-8 grep.
# - call 0: a lease with an owner and a deadline ahead of the call -> waiting (rule lease), from the first call.
# - calls 1-4: the same lease (not renewed: same deadline) -> still waiting.
# - call 5: another call resumes work, the lease is over -> working (rule none). The failed grep has error class
#   "error" (no error.type, no exception event, no status message), which is not retryable.
# - call 7: the third grep, failures are equal evidence (never progress) -> stuck (period 1); nudge.
# - call 8: still stuck after the nudge (stop_after 1) -> stop, rule period, 4 equal calls.
# Step audit: poll|job=7 five times from 0; grep|p=x four times from 5 (the envelope's inputs are the arguments).
# No model span: no cost fields.
MIXED_SNAKE = {
    "trace_id": "1af7651916cd43dd8448eb211c80319c", "verdict": "stuck", "rule": "period", "period": 1,
    "steps_used": 9, "ok": False,
    "violations": ["repeat_loop:grep|p=x@5", "repeat_loop:poll|job=7@0"],
    "transitions": [_t(0, "working", "waiting", "lease", None), _t(5, "waiting", "working", "none", None),
                    _t(7, "working", "stuck", "period", 1)],
    "interventions": [_i(7, "nudge", "period", NUDGE_3.format(tool="grep")),
                      _i(8, "stop", "period", AFTER_NUDGE.format(tool="grep", n=4))],
}

# Trace 2af7...: only a plain HTTP span: a report with no tool call, working, nothing else.
MIXED_NO_TOOLS = {
    "trace_id": "2af7651916cd43dd8448eb211c80319c", "verdict": "working", "rule": "none", "period": None,
    "steps_used": 0, "ok": True, "violations": [], "transitions": [], "interventions": [],
}

# Trace 3af7...: the root span comes first, its four children `same {}` -> "r" later in the same request; one
# trace all the same (the whole input is read before a trace is judged): stuck after the third call (period 1,
# nudge), stopped after the fourth. Step audit: four identical calls with empty arguments, "same|" from 0.
MIXED_LATE_CHILDREN = {
    "trace_id": "3af7651916cd43dd8448eb211c80319c", "verdict": "stuck", "rule": "period", "period": 1,
    "steps_used": 4, "ok": False, "violations": ["repeat_loop:same|@0"],
    "transitions": [_t(2, "working", "stuck", "period", 1)],
    "interventions": [_i(2, "nudge", "period", NUDGE_3.format(tool="same")),
                      _i(3, "stop", "period", AFTER_NUDGE.format(tool="same", n=4))],
}

# Every trace is judged once the input has been read, and reported in order of first appearance: 0af7 (first
# request), 1af7 (third), 2af7 (fourth), 3af7 (fifth). None was cut short by the buffer limit: "partial" false.
MIXED = [MIXED_AGENT, MIXED_SNAKE, MIXED_NO_TOOLS, MIXED_LATE_CHILDREN]
for _report in MIXED:
    _report["partial"] = False

# --- a recorded fixture: LangGraph's ReAct agent under OpenInference, the model asking for one search 5 times ---------

# Five TOOL spans `search` with the bare-string input "weather in Paris" and the same ToolMessage output (content
# "Paris: 18 C, light rain ..."); six LLM spans of "scripted-tool-model" with 120, 160, ..., 320 prompt tokens
# and 18 completion tokens each. Stuck after the third search (nudge), stopped after the fourth (stop_after 1);
# the fifth changes nothing (a stop stays). A bare-string argument is audited as {"input": ...}. Tokens:
# 120 + 160 + 200 + 240 + 280 + 320 = 1320 prompt + 6 * 18 = 108 completion = 1428, unpriced.
FIXTURE_REPORT = {
    "trace_id": "22c5ba885e31860d923ba48fc9328690", "verdict": "stuck", "rule": "period", "period": 1,
    "steps_used": 5, "ok": False, "violations": ["repeat_loop:search|input=weather in Paris@0"],
    "transitions": [_t(2, "working", "stuck", "period", 1)],
    "interventions": [_i(2, "nudge", "period", NUDGE_3.format(tool="search")),
                      _i(3, "stop", "period", AFTER_NUDGE.format(tool="search", n=4))],
    "partial": False, "cost_usd": 0.0, "unpriced_tokens": 1428, "unpriced_models": ["scripted-tool-model"],
}


def _reports(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        report = json.loads(line)
        report.pop("source")
        out.append(report)
    return out


def _audit(path: Path) -> list[dict[str, Any]]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        status = main(["audit", "--json", str(path)])
    # Both inputs hold a stuck trace, and --fail-on defaults to stuck.
    assert status == 1
    return _reports(stdout.getvalue())


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def test_golden_mixed_case_is_the_hand_derived_reports(golden: dict[str, Any]) -> None:
    # --fail-on defaults to stuck, and traces 0af7, 1af7 and 3af7 were stuck: exit status 1, nothing on stderr.
    assert (golden["mixed"]["status"], golden["mixed"]["stderr"]) == (1, "")
    assert _reports(golden["mixed"]["stdout"]) == MIXED


def test_audit_of_the_mixed_input_gives_the_hand_derived_reports(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in _mixed_lines()))
    assert _audit(path) == MIXED


def test_golden_fixture_case_is_the_hand_derived_report(golden: dict[str, Any]) -> None:
    assert _reports(golden[f"fixture {FIXTURE.name}"]["stdout"]) == [FIXTURE_REPORT]


def test_audit_of_the_fixture_gives_the_hand_derived_report() -> None:
    assert _audit(FIXTURE) == [FIXTURE_REPORT]
