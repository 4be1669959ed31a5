"""pydantic-ai: an agent stuck repeating one search, nudged and then stopped by loopguard.

pydantic-ai's own OpenTelemetry instrumentation emits the GenAI tool spans; a scripted model (pydantic-ai's
FunctionModel) asks for the same search again and again, so this runs offline in about a second.

    pip install otel-loopguard pydantic-ai-slim
    python examples/pydantic_ai_loop.py
"""

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_loopguard import LoopGuardSpanProcessor, LoopStopped, VerdictEvent
from otel_loopguard.harness import guard_tool

tracer_provider = TracerProvider()
guard = LoopGuardSpanProcessor()
tracer_provider.add_span_processor(guard)


def show(event: VerdictEvent) -> None:
    """Print every verdict change as one line (the events also leave through OTLP when providers are set)."""
    if event.transition is not None:
        print(f"loopguard: {event.tool}: {event.transition.previous} -> {event.verdict.kind} "
              f"(rule {event.verdict.rule}, call {event.steps})")


guard.add_listener(show)


@guard_tool(guard)  # stops the run once loopguard said stop; hands a nudge to the model in the tool result
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}: 18C, light rain"


def stubborn_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model that asks for the same search on every turn (at most 20)."""
    turn = sum(isinstance(message, ModelResponse) for message in messages)
    if turn >= 20:
        return ModelResponse(parts=[TextPart(content="giving up")])
    return ModelResponse(parts=[ToolCallPart("search", {"query": "weather in Paris"}, tool_call_id=f"call_{turn}")])


agent = Agent(
    FunctionModel(stubborn_model, model_name="scripted-model"),
    name="weather_agent",
    tools=[search],
    capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=tracer_provider))],
)
try:
    agent.run_sync("What is the weather in Paris?")
except LoopStopped as stop:
    print("run stopped:", stop)
tracer_provider.shutdown()
