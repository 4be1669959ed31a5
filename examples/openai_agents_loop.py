"""OpenAI Agents SDK: an agent stuck repeating one lookup, nudged and then stopped by loopguard.

The OpenTelemetry contrib instrumentation (opentelemetry-instrumentation-openai-agents-v2) turns the SDK's traces
into GenAI spans; a scripted model (a subclass of the SDK's Model interface) asks for the same lookup on every
turn, so this runs offline with no API key.

    pip install otel-loopguard openai-agents opentelemetry-instrumentation-openai-agents-v2
    python examples/openai_agents_loop.py
"""

import asyncio
import os
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, UserError, function_tool, set_trace_processors
from openai.types.responses import ResponseFunctionToolCall
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor, LoopStopped, VerdictEvent
from otel_loopguard.harness import guard_tool

# loopguard compares tool arguments and results: the instrumentation records them only when asked.
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

tracer_provider = TracerProvider()
guard = LoopGuardSpanProcessor()
tracer_provider.add_span_processor(guard)
set_trace_processors([])  # only the OpenTelemetry bridge below receives the SDK's traces (nothing leaves)
OpenAIAgentsInstrumentor().instrument(tracer_provider=tracer_provider)


def show(event: VerdictEvent) -> None:
    """Print every verdict change as one line (the events also leave through OTLP when providers are set)."""
    if event.transition is not None:
        print(f"loopguard: {event.tool}: {event.transition.previous} -> {event.verdict.kind} "
              f"(rule {event.verdict.rule}, call {event.steps})")


guard.add_listener(show)


@function_tool(failure_error_function=None)  # let LoopStopped end the run instead of becoming a tool error
@guard_tool(guard)
def get_order_status(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: processing"


class StubbornModel(Model):
    """A scripted model that asks for the same lookup on every turn."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.turn = getattr(self, "turn", 0) + 1
        call = ResponseFunctionToolCall(type="function_call", call_id=f"call_{self.turn}", name="get_order_status",
                                        arguments='{"order_id": "A-1042"}', status="completed")
        return ModelResponse(output=[call], usage=Usage(requests=1, input_tokens=120, output_tokens=18),
                             response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example runs without streaming")


agent = Agent(name="support_agent", instructions="Answer the customer.", tools=[get_order_status],
              model=StubbornModel())
try:
    asyncio.run(Runner.run(agent, "Where is my order A-1042?", max_turns=20))
except UserError as error:  # the SDK wraps what a tool raised
    if not isinstance(error.__cause__, LoopStopped):
        raise
    print("run stopped:", error.__cause__)
tracer_provider.shutdown()
