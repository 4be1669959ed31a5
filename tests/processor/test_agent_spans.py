"""Agent spans whose attributes are set after ``start_span`` (strands, ADK, OpenLLMetry do so): still recognised.

The agent's name goes on the verdict events, ``gen_ai.invoke_agent.tool_calls`` is recorded for it, and the span
events land on it (not on the trace's root); a tool span's own name is never taken for the agent's. Expected
figures by hand: five identical calls with the same result are stuck at the third (a nudge) and stopped at the
fourth (default configuration), so two verdict events; the agent made five calls.
"""

from __future__ import annotations

from typing import Any

from otel_loopguard import LoopGuardConfig
from tests.processor.conftest import Harness, HarnessFactory

AGENT = "research_agent"


def _late_agent(harness: Harness, name: str, attrs: dict[str, Any], parent: Any = None) -> Any:
    """An agent span started bare, its attributes set right after (as the frameworks do)."""
    span = harness.start(name, None, parent)
    span.set_attributes(attrs)
    return span


def _loop(harness: Harness, parent: Any, **extra: Any) -> None:
    for _ in range(5):
        harness.tool(parent, **extra)


def _agent_points(harness: Harness) -> list[tuple[Any, int, float]]:
    metric = harness.metrics().get("gen_ai.invoke_agent.tool_calls", {"points": []})
    return [(p["attributes"].get("gen_ai.agent.name"), p["count"], p["sum"]) for p in metric["points"]]


def test_root_agent_span_with_late_attributes(make_harness: HarnessFactory) -> None:
    """strands: the agent span is the root and gets ``gen_ai.operation.name``/``gen_ai.agent.name`` after start."""
    harness = make_harness(deferred=False)
    agent = _late_agent(harness, f"invoke_agent {AGENT}",
                        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT})
    _loop(harness, agent)
    harness.end(agent)
    events = harness.events
    assert [e.intervention.action for e in events if e.intervention] == ["nudge", "stop"]
    assert {e.agent for e in events} == {AGENT}
    assert _agent_points(harness) == [(AGENT, 1, 5)]
    [exported] = harness.finished(f"invoke_agent {AGENT}")
    assert sum(1 for e in exported.events if e.name == "loopguard.verdict") == 2


def test_nested_agent_span_with_late_attributes_carries_the_events(make_harness: HarnessFactory) -> None:
    """ADK: ``invoke_agent`` under an ``invoke_workflow`` root, attributes after start: the events go on the agent
    span, not on the root, and carry its name."""
    harness = make_harness(deferred=False)
    root = harness.start("invoke_workflow research_agent", None)
    agent = _late_agent(harness, f"invoke_agent {AGENT}",
                        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT}, root)
    _loop(harness, agent)
    harness.end(agent)
    harness.end(root)
    events = harness.events
    assert {e.agent for e in events} == {AGENT} and len(events) == 2
    [on_agent] = harness.finished(f"invoke_agent {AGENT}")
    [on_root] = harness.finished("invoke_workflow research_agent")
    assert sum(1 for e in on_agent.events if e.name == "loopguard.verdict") == 2
    assert [e for e in on_root.events if e.name == "loopguard.verdict"] == []
    assert _agent_points(harness) == [(AGENT, 1, 5)]


def test_openllmetry_tool_name_is_never_the_agent(make_harness: HarnessFactory) -> None:
    """OpenLLMetry: ``traceloop.entity.name`` on a tool span is the TOOL's name; the agent is the ``agent`` span's
    (set after start), never ``search``."""
    harness = make_harness(config=LoopGuardConfig(), deferred=False)
    agent = _late_agent(harness, f"{AGENT}.agent", {"traceloop.span.kind": "agent", "traceloop.entity.name": AGENT})
    for _ in range(5):
        span = harness.start("search.tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                                             "traceloop.entity.input": '{"query": "weather in Paris"}',
                                             "traceloop.entity.output": "sunny, 21C"}, agent)
        span.end(end_time=harness.clock.tick(0.5))
    harness.end(agent)
    events = harness.events
    assert len(events) == 2 and {e.tool for e in events} == {"search"}
    assert {e.agent for e in events} == {AGENT}
    assert _agent_points(harness) == [(AGENT, 1, 5)]
