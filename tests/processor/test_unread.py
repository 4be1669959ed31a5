"""Unread input through the live processor: the counter ``loopguard.spans.unread{reason}`` and one WARNING per cause.

The recorded traces are replayed through a real ``TracerProvider`` (tests/support/span_replay.py); the expected
counts come from the generator's scenario, not from the code: ``same_call_loop`` is five scripted tool calls and a
final answer, so six model calls (one chat span each) and five tool spans.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from otel_loopguard.conventions.unread import CONVENTIONS_PAGE, NO_TOOL_CALLS, UNKNOWN_ATTRIBUTES
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.support.recorded_fixtures import FIXTURES
from tests.support.span_replay import replay_spans

LOGGER = "otel_loopguard.sdk.processor"


def _points(harness: Harness) -> dict[str, float]:
    metric = harness.metrics().get("loopguard.spans.unread", {"points": []})
    return {p["attributes"]["loopguard.unread.reason"]: p["value"] for p in metric["points"]}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def _renamed(tmp_path: Path, names: dict[str, str]) -> Path:
    """pydantic-ai's same-call loop with its tool spans' content under keys no convention knows."""
    doc = json.loads((FIXTURES / "pydantic_ai__same_call_loop.json").read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for attr in span.get("attributes", []):
                    attr["key"] = names.get(attr["key"], attr["key"])
    path = tmp_path / "myfw__same_call_loop.json"
    path.write_text(json.dumps(doc))
    return path


def test_model_spans_without_readable_calls_are_counted_and_logged_once(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """The anthropic SDK's own spans with content off: no message and no finish reason, so none of the six model
    spans yields a call. Two runs (fresh trace ids): the counter holds 12 spans, the cause is logged once."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    records = list(read_spans(str(FIXTURES / "model_spans" / "anthropic_sdk__no_content.json")))
    replay_spans(harness.provider, records)
    replay_spans(harness.provider, records)
    assert _points(harness) == {NO_TOOL_CALLS: 12}
    assert harness.events == []
    [warning] = _warnings(caplog)
    assert "6 GenAI span(s) but no tool call could be read" in warning
    assert "SPAN_ONLY" in warning and CONVENTIONS_PAGE in warning
    assert "gen_ai.usage.input_tokens" in warning
    assert harness.processor.errors == 0


def test_unknown_content_attributes_are_counted_and_named(harness: Harness, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Five execute_tool spans whose arguments and result sit in attributes no convention reads: counted as five
    unread spans, the warning names both keys (never their values), and the loop reads as uncertain, not stuck."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    path = _renamed(tmp_path, {"gen_ai.tool.call.arguments": "myfw.tool_input",
                               "gen_ai.tool.call.result": "myfw.output"})
    replay_spans(harness.provider, list(read_spans(str(path))))
    assert _points(harness) == {UNKNOWN_ATTRIBUTES: 5}
    [warning] = _warnings(caplog)
    assert "5 tool span(s)" in warning and "myfw.output, myfw.tool_input" in warning
    assert "[conventions.NAME]" in warning
    assert "weather in Paris" not in warning  # the recorded argument value never leaves
    kinds = [e.verdict.kind for e in harness.events if e.transition]
    assert kinds == ["uncertain"]


def test_readable_trace_says_nothing(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A trace whose calls are read (here from the model spans alone, content on the spans) adds no unread point
    and no warning: only what cannot be read is reported."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    records = list(read_spans(str(FIXTURES / "model_spans" / "openai_v2_span__same_call_loop.json")))
    replay_spans(harness.provider, records)
    assert _points(harness) == {}
    assert _warnings(caplog) == []
    assert [e.verdict.kind for e in harness.events if e.transition] == ["stuck"]
