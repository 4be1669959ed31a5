"""The OpenAI Agents SDK under Pydantic Logfire (``logfire.instrument_openai_agents()``): its ``Function: {name}``
spans are read as tool calls (convention ``logfire_agents``), so the processor, ``audit`` and ``serve`` judge its
loops from the calls themselves.

Recorded with openai-agents 0.24.0 and logfire 5.4.0 (tests/fixtures/generate/openai_agents_runs.py, source
``logfire``). Expected values derived by hand from the scripted scenarios and the default configuration (window 10,
max_period 3, min_repetitions 3, frequency_limit 3, stop_after 1):

* ``same_call_loop``: ``search(query="weather in Paris")`` five times, same result: the third call (step 2) closes
  three cycles of period 1: stuck (rule period), nudge; step 3 still stuck: stop. Final stuck, period 1.
* ``reordered_keys``: ``lookup(city, units)`` four times, keys alternating, same result: as above, stuck at 2.
* ``ping_pong``: ``search(x)``, ``read(d1)`` three times: the third ``search`` (step 4) is the third equal call in the
  window: stuck (rule frequency), nudge; step 5 closes three cycles of period 2: stop. Final stuck, period 2.
* ``pagination`` (four cursors) and ``healthy`` (four tools): nothing repeats, no transition.
* ``errors_then_success``: ``get_quote(ACME)`` fails twice (the SDK returns its error text to the model), then
  answers: the evidence changes, never stuck, no intervention.

Before this convention the calls were seen only in the model spans' responses (no results): at best uncertain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.intake import StepReader
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.serve._support import served
from tests.support.agent_step_fixtures import AGENT_FIXTURES
from tests.support.recorded_fixtures import FIXTURES
from tests.support.span_replay import replay_spans

#: scenario -> (tool calls, transitions (step, to, rule), interventions (step, action), final verdict, period).
EXPECTED: dict[str, tuple[int, list[tuple[int, str, str]], list[tuple[int, str]], str, int | None]] = {
    "same_call_loop": (5, [(2, "stuck", "period")], [(2, "nudge"), (3, "stop")], "stuck", 1),
    "reordered_keys": (4, [(2, "stuck", "period")], [(2, "nudge"), (3, "stop")], "stuck", 1),
    "ping_pong": (6, [(4, "stuck", "frequency")], [(4, "nudge"), (5, "stop")], "stuck", 2),
    "pagination": (4, [], [], "working", None),
    "healthy": (4, [], [], "working", None),
    "errors_then_success": (3, [], [], "working", None),
}
#: The SDK's SpanError for a tool that raised (``failure_error_function`` on, the default), as Logfire records it.
_ERROR = '{"message":"Error running tool (non-fatal)","data":{"tool_name":"get_quote","error":"boom"}}'


def _path(scenario: str) -> Path:
    return FIXTURES / f"openai_agents_logfire__{scenario}.json"


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return report


def _shape(report: dict[str, Any]) -> tuple[Any, ...]:
    """An ``audit --json`` or ``serve`` report as (calls, transitions, interventions, verdict, period)."""
    return (report["steps_used"], [(t["step"], t["to"], t["rule"]) for t in report["transitions"]],
            [(i["step"], i["action"]) for i in report["interventions"]], report["verdict"], report["period"])


def _processor(path: Path, harness: Harness) -> tuple[Any, ...]:
    """The processor's verdict events for the file's one trace, in :func:`_shape`'s form."""
    result = replay_spans(harness.provider, list(read_spans(str(path))), ids=harness.ids)
    [trace_id] = set(result.trace_ids.values())
    events = [e for e in harness.events if e.trace_id == trace_id]
    steps = harness.metrics()["loopguard.trace.steps"]["points"]
    last = events[-1].verdict if events else None
    return (steps[0]["sum"], [(e.transition.step, e.verdict.kind, e.verdict.rule) for e in events if e.transition],
            [(e.intervention.step, e.intervention.action) for e in events if e.intervention],
            last.kind if last is not None else "working",
            last.period if last is not None and last.kind == "stuck" else None)


def test_function_spans_are_read_as_calls_with_their_failures() -> None:
    """errors_then_success: three get_quote calls with the scripted arguments; the two that raised carry the SDK's
    error message as their class and its error text as result, the third the quote and no error."""
    reader = StepReader()
    steps = [s for s in map(reader.read, read_spans(str(_path("errors_then_success"))))
             if s is not None and getattr(s, "call", None) is not None]
    calls = [s.call for s in sorted(steps, key=lambda s: s.start_ns)]
    assert [c.tool for c in calls] == ["get_quote"] * 3
    assert [json.loads(c.arguments) for c in calls] == [{"symbol": "ACME"}] * 3
    assert [c.error for c in calls] == ["Error running tool (non-fatal)"] * 2 + [None]
    assert [c.result for c in calls] == ["An error occurred while running the tool. Please try again."] * 2 + [
        "ACME: 101.5 USD"]


def test_an_exception_event_names_the_error_class() -> None:
    """When Logfire also records the exception (the SDK's error text equals the exception's), its type is the class;
    a Function span without ``error`` is a success."""
    attrs = {"logfire.msg_template": "Function: {name}", "name": "get_quote", "input": '{"symbol": "ACME"}',
             "output": "An error occurred", "error": _ERROR}
    events = [("exception", {"exception.type": "RuntimeError", "exception.message": "boom"})]
    failed = Extractor().tool_call(attrs, "Function: {name}", 1, 2, True, None, events)
    assert (failed.tool, failed.error) == ("get_quote", "RuntimeError")
    ok = {k: v for k, v in attrs.items() if k != "error"}
    assert Extractor().tool_call(ok, "Function: {name}", 1, 2).error is None


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_processor_audit_and_serve_judge_the_scenario(scenario: str, harness: Harness,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Each recorded scenario: the processor, audit and serve read the scripted calls and decide the hand-derived
    transitions, interventions and final verdict."""
    path = _path(scenario)
    want = EXPECTED[scenario]
    assert _processor(path, harness) == want
    assert harness.processor.errors == 0
    assert _shape(_audit(path, capsys)) == want
    _, report = served(path)
    assert _shape(report.as_dict()) == want


def test_hand_offs_with_function_spans_count_each_call_once(capsys: pytest.CaptureFixture[str]) -> None:
    """handoff_healthy under Logfire: eight lookup_invoice function spans are the calls; the model spans' sixteen
    function calls (eight lookups, eight transfer_to_ hand-offs) are not derived again: eight calls, working."""
    report = _audit(AGENT_FIXTURES / "openai_agents_logfire__handoff_healthy.json", capsys)
    assert (report["steps_used"], report["verdict"], report["transitions"]) == (8, "working", [])
    assert not report.get("unread")
