"""Versions, refusals, turns and tool errors through a real TracerProvider, LoggerProvider and MeterProvider."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource

from otel_loopguard import LoopGuardConfig
from tests.processor.conftest import Harness, HarnessFactory

OUTCOME = "loopguard.outcome"
#: The versions of the trace in the first test, by hand: the resource's release, the agent span's version and the
#: configured prompt attribute, the model span's requested model.
VERSIONS = {"service.version": "2.3.1", "gen_ai.agent.version": "a-9", "langfuse.prompt.version": "prompt-4",
            "gen_ai.request.model": "gpt-x"}


def _chat(h: Harness, parent: Any, model: str, *, usage: bool = True, **extra: Any) -> None:
    """One model call on ``model`` (with 10 input and 5 output tokens when ``usage``)."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, **extra}
    if usage:
        attrs.update({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5})
    h.end(h.start(f"chat {model}", attrs, parent=parent))


def _task_points(h: Harness, name: str) -> list[dict[str, Any]]:
    """The points of one task metric."""
    return h.metrics().get(name, {"points": []})["points"]


def test_versions_on_every_verdict_event_and_task_metric(make_harness: HarnessFactory) -> None:
    """A looping trace: each verdict event and the stopped task carry the resource's, the agent's, the model's and
    the configured prompt version."""
    h = make_harness(LoopGuardConfig(version_attributes=("langfuse.prompt.version",)),
                     resource=Resource.create({"service.name": "agent", "service.version": "2.3.1"}))
    agent = h.agent(**{"gen_ai.agent.version": "a-9", "langfuse.prompt.version": "prompt-4"})
    _chat(h, agent, "gpt-x")
    for _ in range(4):
        h.tool(agent)
    h.end(agent)
    records = h.verdict_records()
    assert [r.attributes["loopguard.intervention"] for r in records] == ["nudge", "stop"]
    for record in records:
        assert {key: record.attributes.get(key) for key in VERSIONS} == VERSIONS
    [outcome] = _task_points(h, "loopguard.task.outcomes")
    assert outcome["attributes"] == {OUTCOME: "stopped", "gen_ai.agent.name": "research_agent", **VERSIONS}


def test_earliest_span_gives_the_version(harness: Harness) -> None:
    """Two model calls on m1 then m2: the task's model is the first call's, m1."""
    h = harness
    agent = h.agent()
    _chat(h, agent, "m1")
    _chat(h, agent, "m2")
    h.end(agent)
    [outcome] = _task_points(h, "loopguard.task.outcomes")
    assert outcome["attributes"]["gen_ai.request.model"] == "m1"


def test_version_values_bounded_escaped_and_capped(make_harness: HarnessFactory) -> None:
    """A 300-character version with a newline is escaped and cut to 128 characters; with ``max_tool_names=2`` a
    third distinct model becomes ``_OTHER`` on the task metrics."""
    h = make_harness(LoopGuardConfig(max_tool_names=2))
    for model in ("m1", "m2", "m3"):
        agent = h.agent(**{"gen_ai.agent.version": "v\n" + "x" * 298})
        _chat(h, agent, model)
        h.end(agent)
    points = _task_points(h, "loopguard.task.outcomes")
    assert sorted(p["attributes"]["gen_ai.request.model"] for p in points) == ["_OTHER", "m1", "m2"]
    version = points[0]["attributes"]["gen_ai.agent.version"]
    # 115 characters of escaped prefix (v, \x0a, 109 x, an ellipsis), "~" and 12 hex digits.
    assert len(version) == 128
    assert version.startswith("v\\x0a" + "x" * 109 + "\u2026~")
    assert "\n" not in version


def test_turns_count_model_calls_without_usage(harness: Harness) -> None:
    """Three model calls, one reporting token usage: three turns (every model call counts)."""
    h = harness
    agent = h.agent()
    _chat(h, agent, "m1", usage=False)
    _chat(h, agent, "m1")
    _chat(h, agent, "m1", usage=False)
    h.end(agent)
    [turns] = _task_points(h, "loopguard.task.turns")
    assert (turns["count"], turns["sum"]) == (1, 3)


def test_tool_errors_per_task(harness: Harness) -> None:
    """Three different tool calls, one failed: 3 tool calls and 1 tool error for the task."""
    h = harness
    agent = h.agent()
    h.tool(agent, "search")
    h.tool(agent, "fetch", error="TimeoutError")
    h.tool(agent, "read")
    h.end(agent)
    [errors] = _task_points(h, "loopguard.task.tool_errors")
    [calls] = _task_points(h, "loopguard.task.tool_calls")
    assert (errors["count"], errors["sum"], calls["sum"]) == (1, 1, 3)
    assert errors["attributes"][OUTCOME] == "success"
    assert h.metrics()["loopguard.task.tool_errors"]["unit"] == "{tool_call}"


def test_openllmetry_refusal_attribute(harness: Harness) -> None:
    """A model span with OpenLLMetry's ``gen_ai.completion.0.refusal`` text and finish reason ``stop`` makes a
    ``refused`` task."""
    h = harness
    agent = h.agent()
    _chat(h, agent, "m1", **{"gen_ai.completion.0.refusal": "I can't help with that.",
                             "gen_ai.response.finish_reasons": ("stop",)})
    h.end(agent)
    [outcome] = _task_points(h, "loopguard.task.outcomes")
    assert outcome["attributes"][OUTCOME] == "refused"
