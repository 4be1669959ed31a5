"""Traces of the LLM-observability SDKs (Langfuse, MLflow, Pydantic Logfire v1), recorded from the real packages:
``audit`` reads the scripted calls and says what the scenario table says (``tests/support/scenario_expectations.py``,
derived by hand: loops stuck with their period, pagination and healthy working, content off uncertain).

Before these conventions, every one of these traces read as zero tool calls and ``working``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.intake import StepReader
from otel_loopguard.otlp.read import read_spans
from tests.support.recorded_fixtures import (
    OBS_MODEL_SPAN_SOURCES,
    OBS_SDK_FIXTURES,
    OBS_SDK_SOURCES,
    obs_sdk_fixture_files,
)
from tests.support.scenario_expectations import expected, scripted_table

FILES = obs_sdk_fixture_files()
#: Haystack under OpenInference and OpenLLMetry: no readable call at all.
HAYSTACK = ("haystack_openinference", "haystack_openllmetry")
#: Sources recorded without a content switch.
NO_SWITCH = ("mlflow", "logfire_v1", *HAYSTACK)
MANIFEST = {row["file"]: row for row in json.loads((OBS_SDK_FIXTURES / "MANIFEST-obs-sdk.json").read_text())}
scripted = scripted_table()  # the scenario table and tools shared by every non-LangGraph generator
SCENARIOS = {s.name: s for s in scripted.SCENARIOS}
# BeeAI with its cycle checker on: the same-call loop's first call runs, the repeat is withdrawn (then the answer).
SCENARIOS["same_call_guarded"] = dataclasses.replace(SCENARIOS["same_call_loop"], name="same_call_guarded",
                                                     calls=SCENARIOS["same_call_loop"].calls[:1])


def _parts(path: Path) -> tuple[str, str]:
    source, scenario = path.stem.split("__", 1)
    return source, scenario


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return report


def test_every_sdk_and_scenario_is_recorded() -> None:
    """Nine sources, four scenarios each, those with a content switch (all but MLflow, Logfire v1 and Haystack) also
    with content off, and BeeAI also with its own cycle checker on."""
    seen = {_parts(p) for p in FILES}
    base = {"same_call_loop", "ping_pong", "pagination", "healthy"}
    assert {s for s, _ in seen} == set(OBS_SDK_SOURCES)
    for source in OBS_SDK_SOURCES:
        want = base | ({"no_content"} if source not in NO_SWITCH else set())
        want |= {"same_call_guarded"} if source == "beeai" else set()
        assert {scenario for s, scenario in seen if s == source} == want, source
    assert set(MANIFEST) == {p.name for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_audit_says_what_the_scenario_says(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Loops stuck with the right period (nudge, then stop), pagination and healthy working, content off uncertain
    (google-genai with content off: nothing says a tool was called, a no_tool_calls note); no other unread note."""
    source, scenario = _parts(path)
    want = expected(source, scenario)
    recorded = 0 if want.unread == ("no_tool_calls",) else len(MANIFEST[path.name]["tool_calls"])
    assert want.steps == recorded, "the hand-derived count disagrees with the recording"
    want.check(_audit(path, capsys))


def _calls(path: Path) -> list[Any]:
    reader = StepReader(context=False)
    steps = [reader.read(span) for span in read_spans(str(path))]
    return [s.call for s in sorted((s for s in steps if getattr(s, "call", None) is not None),
                                   key=lambda s: s.start_ns)]


@pytest.mark.parametrize("path", [p for p in FILES if _parts(p)[0] not in (*OBS_MODEL_SPAN_SOURCES, *HAYSTACK)],
                         ids=lambda p: p.stem)
def test_tool_spans_hold_the_scripted_calls(path: Path) -> None:
    """Langfuse, MLflow and BeeAI tool spans: the tool names, the arguments as the model sent them (Langfuse's
    ``{"args": [], "kwargs": {...}}`` and BeeAI's ``{"input": {...}, "options": null}`` envelopes peeled off) and
    the tools' results; with content off, neither. BeeAI's closing ``final_answer`` span is no call."""
    _source, scenario_name = _parts(path)
    scenario = SCENARIOS[scenario_name]
    calls = _calls(path)
    assert [c.tool for c in calls] == [name for name, _ in scenario.calls]
    box = scripted.ToolBox()
    for call, (name, args) in zip(calls, scenario.calls):
        if not scenario.content_captured:
            assert not call.arguments_captured and not call.result_captured
            continue
        assert json.loads(call.arguments) == json.loads(args)
        assert call.result == box.functions[name](**json.loads(args))


def _rewritten(tmp_path: Path, name: str, keys: dict[str, str], drop: frozenset[str] = frozenset()) -> Path:
    """A recorded SDK trace with attribute keys renamed (``keys``) and spans of the observation types in ``drop``
    removed."""
    doc = json.loads((OBS_SDK_FIXTURES / name).read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            kept = []
            for span in ss["spans"]:
                attrs = span.get("attributes", [])
                if any(a["key"] == "langfuse.observation.type" and a["value"].get("stringValue") in drop
                       for a in attrs):
                    continue
                for attr in attrs:
                    attr["key"] = keys.get(attr["key"], attr["key"])
                kept.append(span)
            ss["spans"] = kept
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_tool_spans_with_content_where_no_convention_reads_it_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MLflow TOOL spans whose arguments and result sit under keys no convention reads: five unread tool spans named
    with those keys (never their values), and the loop is uncertain, not stuck and not working."""
    path = _rewritten(tmp_path, "mlflow__same_call_loop.json",
                      {"mlflow.spanInputs": "mlflow.toolInput", "mlflow.spanOutputs": "mlflow.toolOutput"})
    report = _audit(path, capsys)
    [unread] = report["unread"]
    assert (unread["reason"], unread["keys"], unread["spans"]) == (
        "unknown_attributes", ["mlflow.toolInput", "mlflow.toolOutput"], 5)
    assert "weather in Paris" not in unread["message"]
    assert report["verdict"] == "uncertain"
    assert [(t["step"], t["to"], t["rule"]) for t in report["transitions"]] == [(2, "uncertain", "evidence")]


def test_generations_without_readable_calls_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Langfuse trace of generations only (no tool observation) whose output is not recorded: six model spans, no
    call, and the note names the Langfuse keys seen."""
    path = _rewritten(tmp_path, "langfuse__same_call_loop.json", {"langfuse.observation.output": "app.hidden"},
                      drop=frozenset({"tool"}))
    report = _audit(path, capsys)
    assert report["steps_used"] == 0
    [unread] = report["unread"]
    assert unread["reason"] == "no_tool_calls" and unread["spans"] == 7  # six generations and the agent observation
    assert "langfuse.observation.type" in unread["keys"] and "langfuse.observation.input" in unread["keys"]


def _ordered_spans(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, attributes) of a recorded file's spans in start order."""
    doc = json.loads(path.read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return [(s["name"], {a["key"]: next(iter(a["value"].values())) for a in s.get("attributes", [])})
            for s in sorted(spans, key=lambda s: int(s["startTimeUnixNano"]))]


@pytest.mark.parametrize("path", [p for p in FILES if _parts(p)[0] == "beeai"], ids=lambda p: p.stem)
def test_beeai_recordings_have_the_shape_the_convention_reads(path: Path) -> None:
    """BeeAI as recorded: tool input in a ``{"input": {...}, "options": null}`` envelope, one ``final_answer`` tool
    span closing the run, and with the cycle checker on a repeated call asked for, then the model asked again."""
    spans = _ordered_spans(path)
    tools = [(name, attrs) for name, attrs in spans if attrs.get("openinference.span.kind") == "TOOL"]
    assert [name for name, _ in tools][-1] == "final_answer"
    assert sum(1 for name, _ in tools if name == "final_answer") == 1
    scenario = SCENARIOS[_parts(path)[1]]
    for (name, attrs), (tool, args) in zip(tools, scenario.calls):
        assert name == tool
        if scenario.content_captured:
            assert json.loads(attrs["input.value"]) == {"input": json.loads(args), "options": None}
    kinds = ["L" if attrs.get("openinference.span.kind") == "LLM" else name for name, attrs in spans
             if attrs.get("openinference.span.kind") in ("LLM", "TOOL")]
    if scenario.name == "same_call_guarded":
        # The repeat is asked for, withdrawn by the checker, and the model asked again: two model calls, no call.
        assert kinds == ["L", "search", "L", "L", "final_answer"]
    else:
        assert kinds == [k for name, _ in scenario.calls for k in ("L", name)] + ["L", "final_answer"]
