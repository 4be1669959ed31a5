"""A chat traced only at the model client whose every call id is ``search_0`` (Gemini's synthesised ids), written as
an OTLP/JSON file through a real SDK ``TracerProvider`` (for the call-identity tests of every path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard.testing import write_otlp_json

__all__ = ["model_span_trace", "repeated_id_chat"]

MS = 1_000_000
ARGS = {"query": "weather in Paris"}
RESULT = "Paris: 18C, light rain."


def _messages(turn: int, last: bool) -> tuple[str, str]:
    """(input, output) messages of model turn ``turn`` in the GenAI conventions, every call id ``search_0``; the
    ``last`` turn answers in text."""
    history: list[dict] = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    for _ in range(turn):
        history.append({"role": "assistant", "parts": [
            {"type": "tool_call", "id": "search_0", "name": "search", "arguments": ARGS}]})
        history.append({"role": "user", "parts": [
            {"type": "tool_call_response", "id": "search_0", "response": RESULT}]})
    part = ({"type": "text", "content": "Light rain."} if last else
            {"type": "tool_call", "id": "search_0", "name": "search", "arguments": ARGS})
    return json.dumps(history), json.dumps([{"role": "assistant", "finish_reason": "stop", "parts": [part]}])


def repeated_id_chat(path: Path, calls: int) -> None:
    """A chat whose model spans (no tool span) ask for the same call ``calls`` times, one turn after another, and
    then answer."""
    spans = []
    for turn in range(calls + 1):
        inputs, outputs = _messages(turn, turn == calls)
        spans.append(("generate_content gemini", {"gen_ai.operation.name": "generate_content",
                                                  "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs}))
    model_span_trace(path, spans, root="chat session")


def model_span_trace(path: Path, spans: list[tuple[str, dict[str, Any]]], root: str = "agent run") -> None:
    """A trace of the given (name, attributes) spans, one after another under a plain root span, written as an
    OTLP/JSON file through a real SDK ``TracerProvider`` (content-off model spans, a framework's structure spans)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("chat")
    parent = tracer.start_span(root, start_time=1 * MS)
    context = trace.set_span_in_context(parent)
    for index, (name, attributes) in enumerate(spans):
        start = (10 + 20 * index) * MS
        span = tracer.start_span(name, context=context, start_time=start, attributes=attributes)
        span.end(end_time=start + 10 * MS)
    parent.end(end_time=(10 + 20 * len(spans)) * MS)
    write_otlp_json(exporter.get_finished_spans(), str(path))
