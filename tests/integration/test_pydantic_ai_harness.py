"""A real pydantic-ai agent, traced by its own instrumentation, nudged and then stopped by loopguard.

This is the documentation's integration example (docs/harness.md), kept working by this test: the
model keeps asking for the same search; the nudge reaches the model inside the
next tool result, and the run ends with ``LoopStopped`` and a clear status.
"""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor, LoopStopped
from otel_loopguard.harness import guard_tool
from tests.support.external import require_module

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo, FunctionModel


@pytest.fixture
def pydantic_ai() -> ModuleType:
    """The real pydantic-ai package (a test dependency: skipped without it locally, a failure in CI).

    pydantic-ai is imported only after this fixture ran, inside the functions that use it.
    """
    return require_module("pydantic_ai", "pydantic-ai-slim")


def _stubborn_model(seen_results: list[str]) -> FunctionModel:
    """A scripted model that searches for the same thing forever, recording what the tools told it."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for message in messages[-1:]:
            for part in getattr(message, "parts", []):
                if isinstance(part, ToolReturnPart):
                    seen_results.append(str(part.content))
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn >= 20:
            return ModelResponse(parts=[TextPart(content="giving up")])
        return ModelResponse(parts=[ToolCallPart("search", {"query": "weather in Paris"}, tool_call_id=f"c{turn}")])

    return FunctionModel(respond, model_name="stubborn-model")


def test_pydantic_ai_agent_is_nudged_then_stopped(pydantic_ai: ModuleType) -> None:
    """The nudge arrives in the tool result after the third identical call; the fourth's aftermath stops the run."""
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer_provider = TracerProvider()
    guard = LoopGuardSpanProcessor(logger_provider=logger_provider, meter_provider=MeterProvider(
        metric_readers=[InMemoryMetricReader()]))
    tracer_provider.add_span_processor(guard)

    @guard_tool(guard)
    def search(query: str) -> str:
        """Search the web."""
        return f"results for {query}: 18C, light rain"

    seen: list[str] = []
    agent = pydantic_ai.Agent(
        _stubborn_model(seen),
        name="weather_agent",
        tools=[search],
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=tracer_provider, version=6))],
    )
    with pytest.raises(LoopStopped) as stopped:
        asyncio.run(agent.run("What is the weather in Paris?"))

    assert stopped.value.intervention.action == "stop"
    assert "went on after a nudge" in str(stopped.value)
    nudged = [r for r in seen if "[loopguard]" in r]
    assert len(nudged) == 1, seen
    assert "made the same search call 3 times" in nudged[0]
    # Calls 1-3 loop (nudge after the 3rd), call 4 still loops (stop), call 5 never runs the tool.
    assert len(seen) == 4
    events = [r.log_record for r in logs.get_finished_logs()]
    assert [e.attributes["loopguard.intervention"] for e in events] == ["nudge", "stop"]
    assert all(e.attributes["gen_ai.agent.name"] == "weather_agent" for e in events)
