"""``calibrate`` judges and reports hand-offs and model turns as ``audit`` does, each kind counted in its own sequence.

Expected values come from the scripts of tests/fixtures/generate/agent_handoff_runs.py as written out in
tests/support/agent_step_fixtures.py (default configuration, stop_after 1):
* handoff_ping_pong (OpenInference): eight hand-offs alternating triage/billing, the signatures periodic from the
  first one (so the loop's onset is hand-off 0); stuck at hand-off 6 (delay 6), stopped after hand-off 7 (delay 7),
  the last one, so the stop saves no later hand-off; no tool call.
* chat_repeat (OpenInference): four turns with the same answer, periodic from turn 0: stuck at turn 3 (delay 3),
  the last turn, so nothing is left to stop.
* handoff_healthy (OpenInference): eight hand-offs, each after a new invoice: never stuck.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli import main
from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.calibrate import replay_judge
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from tests.support.agent_step_fixtures import AGENT_FIXTURES

FILES = sorted(AGENT_FIXTURES.glob("*__*.json"))
PING_PONG = AGENT_FIXTURES / "openai_agents_openinference__handoff_ping_pong.json"
CHAT = AGENT_FIXTURES / "openai_agents_openinference__chat_repeat.json"
HEALTHY = AGENT_FIXTURES / "openai_agents_openinference__handoff_healthy.json"
DEFAULTS = ("--grid", "window=10", "--grid", "max_period=3", "--grid", "min_repetitions=3", "--grid",
            "frequency_limit=3", "--grid", "hysteresis=1")


def _told(transitions: Any, interventions: Any) -> list[tuple[Any, ...]]:
    out = [("t", t.step, t.previous, t.verdict.kind, t.verdict.rule, t.verdict.step_kind) for t in transitions]
    return out + [("i", i.step, i.action, i.rule) for i in interventions]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_calibrate_replays_each_kind_as_audit(path: Path) -> None:
    """Every multi-agent and model-turn fixture replayed by calibrate decides audit's transitions (with their step
    kind) and interventions at the same steps."""
    config = LoopGuardConfig()
    collector = TraceCollector(LoopEngine(config))
    list(collector.add_all(read_spans(str(path)), str(path)))
    audited = {r.trace_id: _told(r.transitions, r.interventions) for r in collector.finish() if r.trace_id}
    engine = LoopEngine(config)
    replayed = {}
    for trace in read_traces([(str(path), None)], config).traces:
        judge = replay_judge(trace, engine)
        replayed[trace.trace_id] = _told(judge.transitions, judge.interventions)
    assert audited and replayed == audited


def test_hand_off_and_model_turn_loops_are_caught_with_their_delays(capsys: pytest.CaptureFixture[str]) -> None:
    """The ping-pong and the repeated answer are caught 6 hand-offs and 3 model turns after their onsets (mean 4.5),
    the ping-pong stopped 7 hand-offs after it; the healthy hand-offs are never stuck; the JSON says the kinds."""
    capsys.readouterr()
    status = main(["calibrate", "--json", "--jobs", "1", "--incidents", str(PING_PONG), "--incidents", str(CHAT),
                   "--healthy", str(HEALTHY), *DEFAULTS])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    doc = json.loads(captured.out)
    rec = doc["recommendation"]
    assert (rec["caught"], rec["stopped"], rec["false_stuck"], rec["false_stops"]) == (2, 1, 0, 0)
    assert (rec["delay_to_stuck"]["calls_mean"], rec["delay_to_stuck"]["calls_max"]) == (4.5, 6)
    assert rec["delay_to_stop"]["calls_mean"] == 7
    assert rec["saved_by_stops"]["calls"] == 0
    by_source = {Path(i["source"]).name: i for i in doc["incidents"]}
    ping, chat = by_source[PING_PONG.name], by_source[CHAT.name]
    assert (ping["calls"], ping["onset"], ping["onset_kind"], ping["steps"]["handoff"]) == (0, 0, "handoff", 8)
    assert (chat["onset"], chat["onset_kind"], chat["steps"]["model"]) == (0, "model", 4)


def test_a_false_hand_off_loop_is_named_by_its_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """The ping-pong labelled healthy is a false stuck verdict after hand-off 6 and a false stop after hand-off 7,
    listed as such (not as tool calls) and left out of the per-tool hints."""
    capsys.readouterr()
    status = main(["calibrate", "--jobs", "1", "--healthy", str(PING_PONG), "--incidents", str(CHAT), *DEFAULTS])
    out = capsys.readouterr().out
    assert status == 0
    assert "stuck after hand-off 6 (billing_agent → triage_agent, rule period)" in out
    assert "stopped after hand-off 7 (triage_agent → billing_agent, rule period)" in out
    assert "hint:" not in out
