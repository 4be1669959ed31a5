"""Every judged fixture read at the extraction level: the tool calls read equal the calls the model was scripted to make.

The scripts (``tests/fixtures/generate``) play one scenario table through each framework's own tool loop; the
manifest of each family lists the tool names recorded. So, for every file: the calls the extractor reads are, in
start order, the manifest's tool names; with content captured, each call's arguments are the scripted arguments
(as JSON: key order and spacing are the framework's) and each successful call's result holds what the scripted
tool returned; with content off, no argument is read as recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.conventions.intake import StepReader
from otel_loopguard.conventions.model_calls import ORIGIN_DERIVED, Turn, TurnJudge
from otel_loopguard.conventions.names import UNREAD_TOOL
from otel_loopguard.conventions.nesting import CONVENTION_NESTING
from otel_loopguard.core.judge import join_nested
from otel_loopguard.core.model import ToolCall
from otel_loopguard.otlp.read import read_spans
from tests.support.scenario_expectations import (
    CLOSING_CALL_SOURCES,
    NO_CONTENT_SOURCES,
    Row,
    expected,
    manifest_rows,
    opaque_calls,
    scripted_table,
)

scripted = scripted_table()  # the scenario table and tools shared by every non-LangGraph generator

SCENARIOS = {s.name: s for s in scripted.SCENARIOS}
ROWS = manifest_rows()
# LangGraph plays its own table (langgraph_runs.py), checked by tests/otlp; ADK's parallel_calls is not in the table.
TABLE_ROWS = [r for r in ROWS if not r.source.startswith("langgraph_") or r.source == "langgraph_js_traceloop"]


def _calls(path: Path) -> list[ToolCall]:
    """The calls read from a file, in start order, nested spans of one call joined as the judge joins them; without
    a tool span, the calls derived from the model spans (in end order, as audit derives them)."""
    reader = StepReader()
    steps, turns = [], []
    for item in map(reader.read, read_spans(str(path))):
        if isinstance(item, Turn):
            turns.append(item)
        elif item is not None and item.call is not None:
            steps.append(item)
    if not steps:
        derive = TurnJudge()
        for turn in sorted(turns, key=lambda t: (t.end_ns, t.start_ns, t.span_id)):
            steps += [s for s in derive.add(turn) if s.call is not None]
        steps += derive.finish()
        assert all(s.origin == ORIGIN_DERIVED for s in steps)
    steps.sort(key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    return [s.call for s in join_nested(steps, CONVENTION_NESTING) if s.call is not None]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _holds(result: Any, want: str) -> bool:
    """Whether a result holds the tool's return text, directly or inside the framework's JSON wrapping."""
    if result == want:
        return True
    try:  # JSON text re-serialised by the framework (Mastra compacts it)
        if not isinstance(result, str) and result == json.loads(want):
            return True
    except ValueError:
        pass
    if isinstance(result, str):
        try:
            return _holds(json.loads(result), want)
        except ValueError:
            return False
    if isinstance(result, dict):
        return any(_holds(v, want) for v in result.values())
    if isinstance(result, list):
        return any(_holds(v, want) for v in result)
    return False


def _scripted_results(scenario: str) -> list[str | None]:
    """What each scripted call returned (None: it raised)."""
    box = scripted.ToolBox()
    out: list[str | None] = []
    for tool, args in SCENARIOS[scenario].calls:
        try:
            out.append(box.functions[tool](**json.loads(args)))
        except scripted.RateLimitError:
            out.append(None)
    return out


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_tool_names_are_the_recorded_calls(row: Row) -> None:
    """The calls read, in start order, name the tools the manifest lists (and nothing else is read as a call)."""
    # Nothing readable (content off or in log records): no call, and the trace says so (test_fixture_verdicts).
    want = list(row.tool_calls) if expected(row.source, row.scenario).steps else []
    if opaque_calls(row.source, row.scenario):
        # Known only from finish reasons: one call per tool-calling turn, its name not recorded.
        want = [UNREAD_TOOL] * len(want)
    assert [c.tool for c in _calls(row.path)] == want


@pytest.mark.parametrize("row", [r for r in TABLE_ROWS if r.scenario in SCENARIOS], ids=lambda r: r.id)
def test_arguments_and_results_are_the_scripted_ones(row: Row) -> None:
    """Content captured: scripted arguments and results; content off: no call read as wholly recorded.

    With content off a source may still keep one side: LlamaIndex's instrumentation writes ``tool.arguments``
    whatever the switch, Mastra 0.x's filter redacts arguments and keeps results (tests/fixtures/README.md).
    """
    scenario = SCENARIOS[row.scenario]
    calls = _calls(row.path)
    if not expected(row.source, row.scenario).steps:
        assert calls == []
        return
    if row.source in CLOSING_CALL_SOURCES:
        calls = calls[:-1]  # the framework's own final_answer / finish
    assert len(calls) == len(scenario.calls)
    if row.source in NO_CONTENT_SOURCES or not scenario.content_captured or opaque_calls(row.source, row.scenario):
        assert not any(c.arguments_captured and c.result_captured for c in calls), calls
        return
    for call, (_tool, args), want in zip(calls, scenario.calls, _scripted_results(row.scenario)):
        if not call.arguments_captured:
            # Only a call that raised may lose its content (ADK for JS records nothing but the span's name then).
            assert want is None and row.source == "adk_js", call
            continue
        assert _json(call.arguments) == json.loads(args), (call, args)
        if want is not None:
            assert call.result_captured and _holds(call.result, want), (call.result, want)
            assert call.error is None, call


def test_every_judged_source_has_rows() -> None:
    """The manifest rows cover the sources judged (so the parametrisations above are not empty by mistake)."""
    sources = {r.source for r in ROWS}
    assert len(sources) >= 25 and len(ROWS) >= 7 * 25
