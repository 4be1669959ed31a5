"""Tool activity without readable calls, and traces of a framework's structure spans only, replayed as live spans
through a real ``TracerProvider``: the processor judges them as ``audit`` does, counts the unread spans under the
right reason and logs the cause once with its keys."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.conventions.unread import CALLS_WITHOUT_CONTENT, NO_TOOL_CALLS
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.support.chat_traces import model_span_trace
from tests.support.evidence_traces import EVIDENCE_CASES, chain_only, openllmetry_task_only
from tests.support.span_replay import replay_spans


def _unread(harness: Harness) -> list[tuple[str, int]]:
    points = harness.metrics().get("loopguard.spans.unread", {"points": []})["points"]
    return [(p["attributes"]["loopguard.unread.reason"], p["value"]) for p in points]


@pytest.mark.parametrize("case", sorted(EVIDENCE_CASES))
def test_evidence_without_readable_calls_is_uncertain(case: str, harness: Harness, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Six model spans that show a tool ran, content off: uncertain (rule evidence) at the third call, never stopped;
    the six spans counted under calls_without_content and logged once naming the evidence key."""
    caplog.set_level(logging.WARNING, logger="otel_loopguard.sdk.processor")
    spans, key = EVIDENCE_CASES[case]
    path = tmp_path / f"{case}.json"
    model_span_trace(path, spans)
    replay_spans(harness.provider, list(read_spans(str(path))))
    assert [(e.transition.step, e.verdict.kind, e.verdict.rule) for e in harness.events if e.transition] == [
        (2, "uncertain", "evidence")]
    assert [e.intervention for e in harness.events if e.intervention] == []
    assert _unread(harness) == [(CALLS_WITHOUT_CONTENT, 6)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and key in warnings[0]
    assert harness.processor.errors == 0


@pytest.mark.parametrize("build", [chain_only, openllmetry_task_only], ids=["openinference_chain", "openllmetry_task"])
def test_a_trace_of_structure_spans_only_is_named(build: Any, harness: Harness, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Two structure spans and nothing else: no verdict event, the two spans counted under no_tool_calls, and one
    warning naming their keys."""
    caplog.set_level(logging.WARNING, logger="otel_loopguard.sdk.processor")
    spans, keys = build()
    path = tmp_path / "structure.json"
    model_span_trace(path, spans)
    replay_spans(harness.provider, list(read_spans(str(path))))
    assert harness.events == []
    assert _unread(harness) == [(NO_TOOL_CALLS, 2)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and all(key in warnings[0] for key in keys), warnings
    assert harness.processor.errors == 0
