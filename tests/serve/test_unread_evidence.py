"""Tool activity without readable calls, and traces of a framework's structure spans only, sent to ``serve`` over
OTLP/HTTP: judged as ``audit`` judges them, and the sender is told why in a ``partial_success``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.conventions.unread import CALLS_WITHOUT_CONTENT, NO_TOOL_CALLS
from tests.serve._support import as_reference, audit_reports, served
from tests.support.chat_traces import model_span_trace
from tests.support.evidence_traces import EVIDENCE_CASES, chain_only, openllmetry_task_only


@pytest.mark.parametrize("case", sorted(EVIDENCE_CASES))
def test_evidence_without_readable_calls_is_told(case: str, tmp_path: Path) -> None:
    """Six model spans that show a tool ran, content off: uncertain (rule evidence) at the third call as audit says,
    and a partial success (no span rejected) naming the evidence key."""
    spans, key = EVIDENCE_CASES[case]
    path = tmp_path / f"{case}.json"
    model_span_trace(path, spans)
    partial, report = served(path)
    assert int(partial.get("rejectedSpans", 0)) == 0
    assert "say tool calls happened" in partial["errorMessage"] and key in partial["errorMessage"]
    doc = report.as_dict()
    assert (doc["steps_used"], doc["verdict"]) == (6, "uncertain")
    assert [u["reason"] for u in doc["unread"]] == [CALLS_WITHOUT_CONTENT]
    assert as_reference([report]) == audit_reports([path])


@pytest.mark.parametrize("build", [chain_only, openllmetry_task_only], ids=["openinference_chain", "openllmetry_task"])
def test_a_trace_of_structure_spans_only_is_told(build: Any, tmp_path: Path) -> None:
    """Two structure spans and nothing else: working with no step, and a partial success saying no tool call could
    be read, naming the spans' keys."""
    spans, keys = build()
    path = tmp_path / "structure.json"
    model_span_trace(path, spans)
    partial, report = served(path)
    assert int(partial.get("rejectedSpans", 0)) == 0
    assert "no tool call could be read" in partial["errorMessage"]
    assert all(key in partial["errorMessage"] for key in keys)
    doc = report.as_dict()
    assert (doc["steps_used"], doc["verdict"]) == (0, "working")
    assert [(u["reason"], u["spans"]) for u in doc["unread"]] == [(NO_TOOL_CALLS, 2)]
