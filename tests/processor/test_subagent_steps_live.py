"""Sub-agent invocations judged live: an ``invoke_agent`` span ending under an open agent span is an agent step.

Expected figures by hand (default configuration: min_repetitions 3): a coordinator invoking its researcher four
times, each answer the same text with no input recorded, repeats one step (coordinator → researcher, same input,
same evidence) with period 1: stuck at the third invocation (index 2), stopped at the fourth (index 3).
"""

from __future__ import annotations

import json

from otel_loopguard import LoopGuardConfig
from tests.processor.conftest import Harness, HarnessFactory

SAME_ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Nothing found."}]}])


def _answer(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def _invoke(harness: Harness, parent: object, name: str, output: str, **extra: str) -> None:
    """A sub-agent span started bare and given its GenAI attributes after start (as ADK and strands do)."""
    span = harness.start(f"invoke_agent {name}", None, parent)  # type: ignore[arg-type]
    span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                         "gen_ai.output.messages": output, **extra})
    span.end(end_time=harness.clock.tick())


def test_repeated_subagent_invocation_is_stuck_as_an_agent_step(harness: Harness) -> None:
    """Four same-answer invocations: stuck at index 2 and stopped at 3, kind agent, both agents named; the model
    spans named like agent spans (OpenInference kind LLM, new text each time) are not agent steps."""
    coordinator = harness.start("invoke_agent coordinator", None)
    coordinator.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coordinator"})
    for turn in range(4):
        _invoke(harness, coordinator, "researcher", SAME_ANSWER)
        # Were these read as sub-agent steps, every other step's evidence would differ (no period-1 repetition).
        _invoke(harness, coordinator, "researcher", _answer(f"Model answer {turn}"),
                **{"openinference.span.kind": "LLM"})
    coordinator.end(end_time=harness.clock.tick())
    events = harness.events
    assert harness.processor.errors == 0
    told = [(e.transition.step if e.transition else None, e.verdict.kind, e.verdict.step_kind,
             e.intervention.action if e.intervention else None) for e in events]
    assert told[0] == (2, "stuck", "agent", "nudge")
    assert (3, "stuck", "agent", "stop") in [(e.intervention.step if e.intervention else None, e.verdict.kind,
                                             e.verdict.step_kind, e.intervention.action if e.intervention else None)
                                            for e in events]
    final = harness.processor.verdict(events[0].trace_id)
    assert final is not None and (final.kind, final.period, final.step_kind) == ("stuck", 1, "agent")
    assert final.agents == ("coordinator", "researcher")
    kinds = {r.attributes.get("loopguard.step.kind") for r in harness.verdict_records()}
    assert kinds == {"agent"}


def test_new_answers_keep_the_subagent_working(harness: Harness) -> None:
    """Four invocations with four different answers: progress every time, nothing told."""
    coordinator = harness.agent("coordinator")
    for turn in range(4):
        _invoke(harness, coordinator, "researcher", _answer(f"Found source {turn}."))
    coordinator.end(end_time=harness.clock.tick())
    assert harness.events == []
    assert harness.processor.errors == 0


def test_switched_off_subagent_steps_tell_nothing(make_harness: HarnessFactory) -> None:
    """With agent_steps = false the same four repeated invocations are not judged."""
    harness = make_harness(config=LoopGuardConfig(agent_steps=False))
    coordinator = harness.agent("coordinator")
    for _ in range(4):
        _invoke(harness, coordinator, "researcher", SAME_ANSWER)
    coordinator.end(end_time=harness.clock.tick())
    assert harness.events == []
