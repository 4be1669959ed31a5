"""AutoGen group chats under AutoGen's native tracing: each agent turn is a trace of its own with no message text,
so nothing is judged and every path says so with the ``agent_turns_without_content`` note instead of guessing.

tests/fixtures/generate/autogen_group_chat_runs.py records a ``RoundRobinGroupChat`` of nine messages: the task and
eight agent turns (writer, critic, four each). By hand: eight traces hold one ``invoke_agent`` span each (the turn),
which carries the agent's name, id and description only; the runtime's other messaging traces hold no GenAI span.
So eight traces get the note, for one span each, and no trace gets a verdict other than ``working``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.unread import AGENT_TURNS_WITHOUT_CONTENT
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness
from tests.support.agent_step_fixtures import AGENT_FIXTURES
from tests.support.span_replay import replay_spans

SCENARIOS = ("group_repeat", "group_healthy")
TURNS = 8
KEYS = ["gen_ai.agent.description", "gen_ai.agent.id", "gen_ai.agent.name", "gen_ai.operation.name", "gen_ai.system"]


def _native(scenario: str) -> Path:
    return AGENT_FIXTURES / f"autogen_group_native__{scenario}.json"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_audit_notes_each_turn_trace_and_judges_nothing(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    """audit: eight traces carry one agent_turns_without_content note for one span, naming the agent keys and the
    instrumentation that records messages; every trace stays working with no transition."""
    capsys.readouterr()
    assert cli.main(["audit", "--json", str(_native(scenario))]) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    notes = [n for r in reports for n in (r.get("unread") or ())]
    assert [(n["reason"], n["spans"], n["keys"]) for n in notes] == [(AGENT_TURNS_WITHOUT_CONTENT, 1, KEYS)] * TURNS
    assert "openinference-instrumentation-autogen-agentchat" in notes[0]["message"]
    assert {(r["verdict"], len(r["transitions"])) for r in reports} == {("working", 0)}


def test_processor_counts_the_turns_as_unread_and_warns_once(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """The live processor counts the eight turn spans under the new reason, logs the cause once, and tells no
    verdict event."""
    caplog.set_level(logging.WARNING, logger="otel_loopguard.sdk.processor")
    replay_spans(harness.provider, list(read_spans(str(_native("group_repeat")))), ids=harness.ids)
    metric = harness.metrics().get("loopguard.spans.unread", {"points": []})
    assert {p["attributes"]["loopguard.unread.reason"]: p["value"] for p in metric["points"]} == {
        AGENT_TURNS_WITHOUT_CONTENT: TURNS}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "agent turn span(s) with no message text" in w]) == 1
    assert harness.events == []
    assert harness.processor.errors == 0
