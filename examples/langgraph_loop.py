"""LangGraph: a ReAct agent stuck alternating two tools (search, read, search, read, ...), caught by loopguard.

The OpenTelemetry contrib instrumentation for LangChain (opentelemetry-instrumentation-genai-langchain) emits the
GenAI tool spans; a scripted chat model (LangChain's FakeMessagesListChatModel) replays the same two tool calls,
so this runs offline. The harness asks loopguard after every tool call and ends the run when it says stop.

    pip install otel-loopguard langchain langgraph opentelemetry-instrumentation-genai-langchain
    python examples/langgraph_loop.py
"""

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor, LoopStopped, VerdictEvent
from otel_loopguard.harness import guard_tool

# loopguard compares tool arguments and results: the instrumentation records them only when asked.
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

tracer_provider = TracerProvider()
guard = LoopGuardSpanProcessor()
tracer_provider.add_span_processor(guard)
LangChainInstrumentor().instrument(tracer_provider=tracer_provider)


def show(event: VerdictEvent) -> None:
    """Print every verdict change as one line (the events also leave through OTLP when providers are set)."""
    if event.transition is not None:
        print(f"loopguard: {event.tool}: {event.transition.previous} -> {event.verdict.kind} "
              f"(rule {event.verdict.rule}, call {event.steps})")


guard.add_listener(show)


@tool
@guard_tool(guard)
def search(query: str) -> str:
    """Search the knowledge base."""
    return "1. ACME investor relations - acme.example/ir/q3"


@tool
@guard_tool(guard)
def read(url: str) -> str:
    """Read a page."""
    return "This page has moved. Search for it instead."


class ScriptedModel(FakeMessagesListChatModel):
    """Replays scripted tool calls; binding tools only has to keep the model usable."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self


def turn(index: int) -> AIMessage:
    """Even turns search, odd turns read the result: a ping-pong that never gets anywhere."""
    name, args = (("search", {"query": "ACME Q3 revenue"}) if index % 2 == 0
                  else ("read", {"url": "https://acme.example/ir/q3"}))
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{index}", "type": "tool_call"}])


agent = create_agent(ScriptedModel(responses=[turn(i) for i in range(20)]), [search, read])
try:
    agent.invoke({"messages": [("user", "What was ACME's Q3 revenue?")]}, {"recursion_limit": 50})
except LoopStopped as stop:
    print("run stopped:", stop)
tracer_provider.shutdown()
