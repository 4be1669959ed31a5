"""The recorded multi-agent and model-turn fixtures replayed as live spans: the processor judges each kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.support.agent_step_fixtures import AGENT_FIXTURES, Expected, cases
from tests.support.span_replay import replay_spans


@pytest.mark.parametrize(("path", "want"), cases(), ids=lambda c: c.stem if isinstance(c, Path) else "")
def test_replay_judges_each_kind_of_step(path: Path, want: Expected, harness: Harness) -> None:
    """Replayed through a real TracerProvider, loops are stuck with their kind, period and agents; healthy runs
    tell nothing; the verdict events carry loopguard.step.kind and never a tool name."""
    records = list(read_spans(str(path)))
    replay_spans(harness.provider, records, ids=harness.ids)
    events = harness.events
    assert harness.processor.errors == 0
    if want.verdict == "working":
        assert events == []
        return
    stuck = [e for e in events if e.transition is not None and e.verdict.kind == "stuck"]
    assert [e.transition.step for e in stuck][:1] == ([want.stuck_at] if want.stuck_at is not None else [])
    final = harness.processor.verdict(events[0].trace_id)  # the trace's: its worst sequence, not the last event's
    assert final is not None
    assert (final.kind, final.rule) == (want.verdict, want.rule)
    if want.verdict == "stuck":  # (an uncertain verdict keeps its repetition's period; reports show none)
        assert (final.period, final.step_kind) == (want.period, want.step_kind)
    if want.step_kind in ("handoff", "agent"):
        # The live path knows the agents from the hand-off spans and the open agent spans themselves.
        assert final.agents == want.agents
    if want.chunk is not None:
        assert (final.chunk_length, final.repetitions) == want.chunk
    if want.transitions is not None:
        told = tuple((e.transition.step, e.verdict.kind, e.verdict.step_kind) for e in events if e.transition)
        assert told == want.transitions
    # Events of tool calls (under Logfire: calls seen only in the model's responses) carry no step kind.
    records = [dict(r.attributes) for r in harness.verdict_records() if "loopguard.step.kind" in r.attributes]
    if want.step_kind is not None:
        assert want.step_kind in {attributes["loopguard.step.kind"] for attributes in records}
    assert not any("gen_ai.tool.name" in attributes for attributes in records)
    # No tool call was judged: the tool-call metric counts none of these steps.
    counted = harness.metrics().get("loopguard.tool_calls", {"points": []})["points"]
    assert sum(p["value"] for p in counted) == want.tool_calls


def test_verdict_and_intervention_counters_carry_the_step_kind(harness: Harness) -> None:
    """The OpenInference hand-off ping-pong counts its one stuck transition (index 6) and its nudge (6) and stop (7)
    under loopguard.step.kind="handoff" and nothing under "tool" (the script makes no tool call)."""
    path = AGENT_FIXTURES / "openai_agents_openinference__handoff_ping_pong.json"
    replay_spans(harness.provider, list(read_spans(str(path))), ids=harness.ids)
    metrics = harness.metrics()
    verdicts = {(p["attributes"]["loopguard.verdict.previous"], p["attributes"]["loopguard.verdict"],
                 p["attributes"]["loopguard.step.kind"]): p["value"] for p in metrics["loopguard.verdicts"]["points"]}
    assert verdicts == {("working", "stuck", "handoff"): 1}
    interventions = {(p["attributes"]["loopguard.intervention"], p["attributes"]["loopguard.step.kind"]): p["value"]
                     for p in metrics["loopguard.interventions"]["points"]}
    assert interventions == {("nudge", "handoff"): 1, ("stop", "handoff"): 1}
