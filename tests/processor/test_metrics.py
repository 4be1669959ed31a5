"""Loopguard's metrics through a real MeterProvider: names, units, attribute keys, caps, evictions and histograms."""

from __future__ import annotations

from otel_loopguard import LoopGuardConfig, Prices
from tests.processor.conftest import Harness, HarnessFactory

UNITS = {
    "loopguard.verdicts": "{transition}",
    "loopguard.interventions": "{intervention}",
    "loopguard.traces.active": "{trace}",
    "loopguard.tool_calls": "{tool_call}",
    "loopguard.trace.steps": "{step}",
    "loopguard.detection.delay": "{step}",
    "gen_ai.invoke_agent.tool_calls": "{tool_call}",
    "loopguard.task.outcomes": "{task}",
    "loopguard.task.turns": "{turn}",
    "loopguard.task.tool_calls": "{tool_call}",
    "loopguard.task.tool_errors": "{tool_call}",
    "loopguard.task.duration": "s",
}
_TASK_KEYS = {"loopguard.outcome", "gen_ai.agent.name"}
KEYS = {
    "loopguard.verdicts": {"loopguard.verdict", "loopguard.verdict.previous", "loopguard.rule", "gen_ai.agent.name",
                           "loopguard.step.kind"},
    "loopguard.interventions": {"loopguard.intervention", "loopguard.rule", "loopguard.step.kind"},
    "loopguard.traces.active": {"loopguard.verdict"},
    "loopguard.tool_calls": {"gen_ai.tool.name"},
    "loopguard.trace.steps": set(),
    "loopguard.detection.delay": set(),
    "gen_ai.invoke_agent.tool_calls": {"gen_ai.agent.name"},
    "loopguard.task.outcomes": _TASK_KEYS,
    "loopguard.task.turns": _TASK_KEYS,
    "loopguard.task.tool_calls": _TASK_KEYS,
    "loopguard.task.tool_errors": _TASK_KEYS,
    "loopguard.task.duration": _TASK_KEYS,
}


def _stuck_run(h: Harness, calls: int = 4) -> None:
    agent = h.agent()
    for _ in range(calls):
        h.tool(agent)
    h.end(agent)


def test_names_units_and_attribute_keys(harness: Harness) -> None:
    """After a stopped loop every metric has its exact name, unit and attribute keys."""
    _stuck_run(harness)
    metrics = harness.metrics()
    assert set(metrics) == set(UNITS)
    for name, metric in metrics.items():
        assert metric["unit"] == UNITS[name], name
        for point in metric["points"]:
            assert set(point["attributes"]) == KEYS[name], (name, point)


def test_counter_values_after_a_stopped_loop(harness: Harness) -> None:
    """One stuck transition, one nudge, one stop, four tool calls, one finished trace of four steps."""
    h = harness
    _stuck_run(h)
    assert h.metrics()["loopguard.verdicts"]["points"] == [{"attributes": {
        "loopguard.verdict": "stuck", "loopguard.verdict.previous": "working", "loopguard.rule": "period",
        "gen_ai.agent.name": "research_agent", "loopguard.step.kind": "tool"}, "value": 1}]
    assert h.total("loopguard.interventions", **{"loopguard.intervention": "nudge", "loopguard.rule": "period"}) == 1
    assert h.total("loopguard.interventions", **{"loopguard.intervention": "stop", "loopguard.rule": "period"}) == 1
    assert h.total("loopguard.tool_calls", **{"gen_ai.tool.name": "search"}) == 4
    [steps] = h.metrics()["loopguard.trace.steps"]["points"]
    assert (steps["count"], steps["sum"]) == (1, 4)


def test_tool_names_capped_with_other(make_harness: HarnessFactory) -> None:
    """Beyond ``max_tool_names`` distinct tools, calls are counted under ``_OTHER``."""
    h = make_harness(LoopGuardConfig(max_tool_names=2))
    agent = h.agent()
    for tool in ("t1", "t2", "t3", "t4", "t1", "t3"):
        h.tool(agent, tool=tool, args={"n": tool})
    h.end(agent)
    points = {p["attributes"]["gen_ai.tool.name"]: p["value"] for p in h.metrics()["loopguard.tool_calls"]["points"]}
    assert points == {"t1": 2, "t2": 1, "_OTHER": 3}


def test_active_traces_return_to_zero(harness: Harness) -> None:
    """``loopguard.traces.active`` counts open traces by verdict and sums to 0 once every root has ended."""
    h = harness
    agents = [h.agent() for _ in range(3)]
    for a in agents:
        h.tool(a)
    assert h.total("loopguard.traces.active") == 3
    for _ in range(2):
        h.tool(agents[0])
    assert h.total("loopguard.traces.active", **{"loopguard.verdict": "stuck"}) == 1
    assert h.total("loopguard.traces.active", **{"loopguard.verdict": "working"}) == 2
    for a in agents:
        h.end(a)
    assert h.total("loopguard.traces.active") == 0
    assert all(p["value"] == 0 for p in h.metrics()["loopguard.traces.active"]["points"])
    assert h.processor.tracked_traces == 0


def test_trace_steps_recorded_when_root_ends(harness: Harness) -> None:
    """``loopguard.trace.steps`` is recorded only when the root span ends, with the trace's tool-call count."""
    h = harness
    root = h.start("POST /chat")
    agent = h.agent(parent=root)
    for i in range(5):
        h.tool(agent, args={"page": i})
    h.end(agent)
    assert "loopguard.trace.steps" not in h.metrics()
    h.end(root)
    [point] = h.metrics()["loopguard.trace.steps"]["points"]
    assert (point["count"], point["sum"]) == (1, 5)


def test_agent_tool_calls_histogram(harness: Harness) -> None:
    """Each finished agent span records its own tool calls with buckets 1, 2, 4 … 128."""
    h = harness
    root = h.start("POST /chat")
    planner = h.agent("planner", parent=root)
    for i in range(3):
        h.tool(planner, args={"i": i})
    writer = h.agent("writer", parent=planner)
    h.tool(writer, args={"w": 1})
    h.end(writer)
    h.tool(planner, args={"i": 9})
    h.end(planner)
    h.end(root)
    points = {p["attributes"]["gen_ai.agent.name"]: p for p in h.metrics()["gen_ai.invoke_agent.tool_calls"]["points"]}
    assert set(points) == {"planner", "writer"}
    assert (points["planner"]["count"], points["planner"]["sum"]) == (1, 4)
    assert (points["writer"]["count"], points["writer"]["sum"]) == (1, 1)
    assert points["planner"]["explicit_bounds"] == [1, 2, 4, 8, 16, 32, 64, 128]


def test_detection_delay(harness: Harness) -> None:
    """``loopguard.detection.delay`` records the calls from the cycle's start to the stuck verdict."""
    h = harness
    agent = h.agent()
    h.tool(agent, tool="plan", args={"x": 1})
    for _ in range(3):
        h.tool(agent, tool="search", args={"q": "a"})
        h.tool(agent, tool="read", args={"d": "1"})
    h.end(agent)
    [stuck] = [e for e in h.events if e.transition and e.verdict.kind == "stuck"]
    # search repeats a third time at call 5 (first seen at call 1): the frequency rule fires before the period one.
    assert (stuck.verdict.rule, stuck.verdict.step, stuck.verdict.cycle_start) == ("frequency", 5, 1)
    [point] = h.metrics()["loopguard.detection.delay"]["points"]
    assert (point["count"], point["sum"]) == (1, 5)


def test_idle_eviction(make_harness: HarnessFactory) -> None:
    """A trace idle past ``trace_ttl_seconds`` (in span time) is evicted, counted with reason ``idle``."""
    h = make_harness(LoopGuardConfig(trace_ttl_seconds=10))
    old = h.agent()
    h.tool(old)
    h.clock.tick(3600)
    new = h.agent()
    h.tool(new)
    assert h.processor.verdict(old.get_span_context().trace_id) is None
    assert h.processor.tracked_traces == 1
    assert h.metrics()["loopguard.traces.evicted"]["points"] == [
        {"attributes": {"loopguard.eviction.reason": "idle"}, "value": 1}]
    assert h.metrics()["loopguard.traces.evicted"]["unit"] == "{trace}"
    h.end(new)
    h.end(old)
    assert h.total("loopguard.traces.active") == 0


def test_capacity_eviction(make_harness: HarnessFactory) -> None:
    """Beyond ``max_traces`` tracked traces the least recently used is evicted with reason ``capacity``."""
    h = make_harness(LoopGuardConfig(max_traces=2))
    agents = [h.agent() for _ in range(3)]
    for a in agents:
        h.tool(a)
    assert h.processor.tracked_traces == 2
    assert h.processor.verdict(agents[0].get_span_context().trace_id) is None
    assert h.total("loopguard.traces.evicted", **{"loopguard.eviction.reason": "capacity"}) == 1
    for a in agents:
        h.end(a)
    assert h.total("loopguard.traces.active") == 0


def test_trace_cost_from_llm_usage(make_harness: HarnessFactory) -> None:
    """Model usage on chat spans is priced from the config and recorded in USD when the root ends."""
    h = make_harness(LoopGuardConfig(prices={"m1": Prices(input=1.0, output=2.0)}))
    agent = h.agent()
    chat = h.start("chat m1", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1",
                               "gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 500_000},
                   parent=agent)
    h.end(chat)
    h.tool(agent)
    h.end(agent)
    metric = h.metrics()["loopguard.trace.cost"]
    assert metric["unit"] == "USD"
    [point] = metric["points"]
    assert (point["count"], point["sum"]) == (1, 2.0)
