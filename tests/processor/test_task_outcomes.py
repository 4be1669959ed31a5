"""Task outcomes through a real TracerProvider and MeterProvider: one trace per outcome, figures by hand."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Status, StatusCode

from otel_loopguard import LoopGuardConfig, Prices
from tests.processor.conftest import Harness, HarnessFactory

OUTCOME = "loopguard.outcome"
PRICES = {"m1": Prices(input=1.0, output=2.0)}


def _chat(h: Harness, parent: Any, model: str = "m1", **extra: Any) -> None:
    """One model call of 1M input and 0.5M output tokens (on m1: $1 + $1 = $2)."""
    chat = h.start(f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                                     "gen_ai.usage.input_tokens": 1_000_000,
                                     "gen_ai.usage.output_tokens": 500_000, **extra}, parent=parent)
    h.end(chat)


def _points(h: Harness, name: str) -> dict[str, dict[str, Any]]:
    """A task metric's points by outcome."""
    return {p["attributes"][OUTCOME]: p for p in h.metrics().get(name, {"points": []})["points"]}


def test_success_with_its_figures(make_harness: HarnessFactory) -> None:
    """A priced model call and two different tool calls: success, 1 turn, 2 tool calls, $2, 6 seconds."""
    h = make_harness(LoopGuardConfig(prices=PRICES))
    agent = h.agent()                      # starts at T0+1
    _chat(h, agent)                        # T0+2 .. T0+3
    h.tool(agent)                          # T0+4 .. T0+4.5
    h.tool(agent, "fetch", args='{"url": "a"}')  # T0+5.5 .. T0+6
    h.end(agent)                           # T0+7
    [outcome] = h.metrics()["loopguard.task.outcomes"]["points"]
    assert outcome == {"attributes": {OUTCOME: "success", "gen_ai.agent.name": "research_agent",
                                      "gen_ai.request.model": "m1"}, "value": 1}
    assert h.metrics()["loopguard.task.outcomes"]["unit"] == "{task}"
    for name, total in (("loopguard.task.turns", 1), ("loopguard.task.tool_calls", 2), ("loopguard.task.cost", 2.0),
                        ("loopguard.task.duration", 6.0)):
        point = _points(h, name)["success"]
        assert (point["count"], point["sum"]) == (1, total), name
    assert h.metrics()["loopguard.task.duration"]["unit"] == "s"


def test_error_status_on_the_agent_span(harness: Harness) -> None:
    """An agent span ended with error status is an ``error`` task, with its one tool call."""
    h = harness
    agent = h.agent()
    h.tool(agent)
    agent.set_status(Status(StatusCode.ERROR, "boom"))
    h.end(agent)
    assert h.total("loopguard.task.outcomes", **{OUTCOME: "error"}) == 1
    assert h.total("loopguard.task.outcomes", **{OUTCOME: "success"}) == 0
    assert _points(h, "loopguard.task.tool_calls")["error"]["sum"] == 1


def test_error_status_on_a_plain_root(harness: Harness) -> None:
    """A root span that is not a GenAI span, ended with error status, makes its trace an ``error`` task."""
    h = harness
    root = h.start("handle_request")
    agent = h.agent(parent=root)
    h.tool(agent)
    h.end(agent)
    root.set_status(Status(StatusCode.ERROR))
    h.end(root)
    [point] = h.metrics()["loopguard.task.outcomes"]["points"]
    assert point["attributes"][OUTCOME] == "error"
    assert point["value"] == 1


def test_refusal_finish_reason(make_harness: HarnessFactory) -> None:
    """A model call whose finish reasons hold ``content_filter`` makes a ``refused`` task of one turn."""
    h = make_harness(LoopGuardConfig(prices=PRICES))
    agent = h.agent()
    _chat(h, agent, **{"gen_ai.response.finish_reasons": ("content_filter",)})
    h.end(agent)
    assert h.total("loopguard.task.outcomes", **{OUTCOME: "refused"}) == 1
    assert _points(h, "loopguard.task.turns")["refused"]["sum"] == 1


def test_stopped_loop_comes_before_error(harness: Harness) -> None:
    """Four identical calls stop the run; its agent span's error status (the harness raised) still counts
    ``stopped``, with four tool calls and no turns."""
    h = harness
    agent = h.agent()
    for _ in range(4):
        h.tool(agent)
    agent.set_status(Status(StatusCode.ERROR, "stopped by loopguard"))
    h.end(agent)
    assert h.metrics()["loopguard.task.outcomes"]["points"] == [
        {"attributes": {OUTCOME: "stopped", "gen_ai.agent.name": "research_agent"}, "value": 1}]
    point = _points(h, "loopguard.task.tool_calls")["stopped"]
    assert (point["count"], point["sum"]) == (1, 4)
    assert _points(h, "loopguard.task.turns")["stopped"]["sum"] == 0


def test_unpriced_model_records_no_cost(make_harness: HarnessFactory) -> None:
    """A model call without a price records turns but no cost (never $0)."""
    h = make_harness(LoopGuardConfig(prices=PRICES))
    agent = h.agent()
    _chat(h, agent, model="unknown-model")
    h.end(agent)
    assert _points(h, "loopguard.task.turns")["success"]["sum"] == 1
    assert "loopguard.task.cost" not in h.metrics()


def test_versions_and_bounded_agent_name(make_harness: HarnessFactory) -> None:
    """The configured version stamps are attributes of every task metric; a 300-character agent name is bounded
    to 128 characters."""
    h = make_harness(LoopGuardConfig(versions={"prompt": "p7", "model": "m-2026"}))
    agent = h.agent("a" * 300)
    h.tool(agent)
    h.end(agent)
    for name in ("loopguard.task.outcomes", "loopguard.task.tool_calls", "loopguard.task.duration"):
        [point] = h.metrics()[name]["points"]
        attrs = point["attributes"]
        assert attrs["app.prompt.version"] == "p7", name
        assert attrs["app.model.version"] == "m-2026", name
        assert len(attrs["gen_ai.agent.name"]) == 128, name
        assert attrs["gen_ai.agent.name"].startswith("a" * 115 + "~"), name


def test_exception_event_without_error_status(harness: Harness) -> None:
    """An agent span that recorded an exception but kept an unset status is an ``error`` task."""
    h = harness
    agent = h.agent()
    h.tool(agent)
    agent.record_exception(RuntimeError("tool crashed"))
    h.end(agent)
    assert h.total("loopguard.task.outcomes", **{OUTCOME: "error"}) == 1
    assert h.total("loopguard.task.outcomes", **{OUTCOME: "success"}) == 0
