"""Traces of the LLM-observability SDKs (Langfuse, MLflow, Pydantic Logfire v1) replayed as live spans through a
real ``TracerProvider``: the processor says what the hand-derived scenario table says, and exactly what ``audit``
says; content off is uncertain with the evidence rule; calls known only from finish reasons give an unread note.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.unread import CALLS_WITHOUT_CONTENT
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.support.chat_traces import repeated_id_chat
from tests.support.recorded_fixtures import FIXTURES, obs_sdk_fixture_files
from tests.support.scenario_expectations import expected
from tests.support.span_replay import replay_spans

FILES = obs_sdk_fixture_files()


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return report


def _as_audit(harness: Harness, trace_id: int) -> dict[str, Any]:
    """The processor's verdict events of one trace, and its unread counter's reasons, in ``audit --json``'s shape."""
    events = [e for e in harness.events if e.trace_id == trace_id]
    transitions = [{"step": e.transition.step, "call": e.transition.step + 1, "from": e.transition.previous,
                    "to": e.verdict.kind, "rule": e.verdict.rule,
                    "period": e.verdict.period if e.verdict.kind == "stuck" else None}
                   for e in events if e.transition]
    interventions = [{**e.intervention.as_dict(), "call": e.intervention.step + 1} for e in events if e.intervention]
    steps = harness.metrics().get("loopguard.trace.steps", {"points": []})["points"]
    last = events[-1].verdict if events else None
    unread = harness.metrics().get("loopguard.spans.unread", {"points": []})["points"]
    return {"transitions": transitions, "interventions": interventions,
            "unread": [{"reason": p["attributes"]["loopguard.unread.reason"]} for p in unread],
            "verdict": last.kind if last is not None else "working",
            "period": last.period if last is not None and last.kind == "stuck" else None,
            "steps_used": steps[0]["sum"] if steps else 0}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_processor_says_what_the_scenario_says(path: Path, harness: Harness,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Each SDK's loops are stuck with their period, pagination and healthy runs working, content off uncertain,
    exactly as ``audit`` judges the same file; only what the scenario table says is reported unread, and nothing fails
    in the processor."""
    records = list(read_spans(str(path)))
    result = replay_spans(harness.provider, records, ids=harness.ids)
    [trace_id] = set(result.trace_ids.values())
    mine = _as_audit(harness, trace_id)
    audit = _audit(path, capsys)
    source, scenario = path.stem.split("__", 1)
    expected(source, scenario).check(mine)
    # (audit also names the kind and agents of model-turn steps: Haystack 2's; the processor's events carry them too.)
    audit["transitions"] = [{k: v for k, v in t.items() if k not in ("step_kind", "agents")}
                            for t in audit["transitions"]]
    for key in ("transitions", "interventions", "verdict", "steps_used"):
        assert mine[key] == audit[key], key
    assert mine["unread"] == [{"reason": u["reason"]} for u in audit.get("unread", [])]
    assert harness.processor.errors == 0


def test_calls_known_only_from_finish_reasons_are_uncertain_and_noted(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """openai-v2 with content off: five model spans end with finish reason tool_calls and record no message: five
    calls that cannot be compared, uncertain (rule evidence) at the third, never working; the unread counter holds the
    five spans under reason calls_without_content, logged once with the evidence key."""
    caplog.set_level(logging.WARNING, logger="otel_loopguard.sdk.processor")
    records = list(read_spans(str(FIXTURES / "model_spans" / "openai_v2_span__no_content.json")))
    replay_spans(harness.provider, records)
    transitions = [(e.transition.step, e.verdict.kind, e.verdict.rule) for e in harness.events if e.transition]
    assert transitions == [(2, "uncertain", "evidence")]
    assert [e.intervention for e in harness.events if e.intervention] == []
    points = harness.metrics()["loopguard.spans.unread"]["points"]
    assert [(p["attributes"]["loopguard.unread.reason"], p["value"]) for p in points] == [(CALLS_WITHOUT_CONTENT, 5)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "gen_ai.response.finish_reasons" in warnings[0]


def test_a_call_id_repeated_on_every_turn_does_not_merge_the_calls(harness: Harness, tmp_path: Path) -> None:
    """Gemini's chats: six turns ask for the same search as ``search_0`` (then one answers): the processor judges six
    calls, stuck with period 1 at the third (step 2) and stopped at the fourth, as ``audit`` does."""
    path = tmp_path / "chat.json"
    repeated_id_chat(path, 6)
    replay_spans(harness.provider, list(read_spans(str(path))))
    transitions = [(e.transition.step, e.verdict.kind, e.verdict.rule, e.verdict.period)
                   for e in harness.events if e.transition]
    assert transitions == [(2, "stuck", "period", 1)]
    assert [(e.intervention.step, e.intervention.action) for e in harness.events if e.intervention] == [
        (2, "nudge"), (3, "stop")]
