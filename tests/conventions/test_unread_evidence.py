"""Tool activity without readable calls is never ``working``, and a trace with GenAI spans but no readable call is
never silent: each cause through ``audit`` (the processor and serve: tests/processor/test_unread_evidence.py,
tests/serve/test_unread_evidence.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.unread import CALLS_WITHOUT_CONTENT, NO_TOOL_CALLS, UNKNOWN_ATTRIBUTES
from tests.support.chat_traces import model_span_trace
from tests.support.evidence_traces import (
    EVIDENCE_CASES,
    TOOL_MARKERS,
    chain_only,
    chat_without_tools,
    openllmetry_task_only,
    tool_spans_with_unknown_keys,
)


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return report


@pytest.mark.parametrize("case", sorted(EVIDENCE_CASES))
def test_evidence_without_readable_calls_is_uncertain(case: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Seven model turns with content off, six of which show that a tool ran (a tool-call count, or tools offered and
    a ``tool`` message without content): six calls that cannot be compared, uncertain (rule evidence) at the third,
    and one note naming the evidence key for the six spans."""
    spans, key = EVIDENCE_CASES[case]
    path = tmp_path / f"{case}.json"
    model_span_trace(path, spans)
    report = _audit(path, capsys)
    assert report["steps_used"] == 6
    assert report["verdict"] == "uncertain"
    assert [(t["step"], t["to"], t["rule"]) for t in report["transitions"]] == [(2, "uncertain", "evidence")]
    [unread] = report["unread"]
    assert (unread["reason"], unread["keys"], unread["spans"]) == (CALLS_WITHOUT_CONTENT, [key], 6)
    assert "cannot be compared" in unread["message"]


def test_a_chat_without_tools_stays_working(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three model turns ending with finish reason stop, no tool offered: no call is invented, working, and the only
    note is that no tool call could be read."""
    path = tmp_path / "chat.json"
    model_span_trace(path, chat_without_tools())
    report = _audit(path, capsys)
    assert (report["verdict"], report["steps_used"], report["transitions"]) == ("working", 0, [])
    assert [u["reason"] for u in report["unread"]] == [NO_TOOL_CALLS]


@pytest.mark.parametrize("build", [chain_only, openllmetry_task_only], ids=["openinference_chain", "openllmetry_task"])
def test_a_trace_of_structure_spans_only_is_named(build: Any, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Two spans of a framework's structure (OpenInference CHAIN; OpenLLMetry task with ``gen_ai.completion.0.content
    = "replies"``) and nothing else: working with no step, and a note naming the two spans and their keys."""
    spans, keys = build()
    path = tmp_path / "structure.json"
    model_span_trace(path, spans)
    report = _audit(path, capsys)
    assert (report["verdict"], report["steps_used"]) == ("working", 0)
    [unread] = report["unread"]
    assert (unread["reason"], unread["spans"]) == (NO_TOOL_CALLS, 2)
    assert set(keys) <= set(unread["keys"]), unread["keys"]
    assert "no tool call could be read" in unread["message"]


@pytest.mark.parametrize("marker", sorted(TOOL_MARKERS))
def test_a_tool_span_by_any_marker_with_content_in_unknown_keys_is_named(
        marker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five tool spans recognised by one known marker whose arguments and result sit in keys no convention reads:
    the note names those two keys for the five spans; never a silent skip."""
    path = tmp_path / "tools.json"
    model_span_trace(path, tool_spans_with_unknown_keys(marker))
    report = _audit(path, capsys)
    [unread] = report["unread"]
    assert (unread["reason"], unread["keys"], unread["spans"]) == (
        UNKNOWN_ATTRIBUTES, ["acme.tool_input", "acme.tool_output"], 5)
