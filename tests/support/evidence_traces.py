"""Hand-made span lists (for :func:`tests.support.chat_traces.model_span_trace`) of agents whose tool calls cannot be
read: model spans with content off that still show tool activity, a framework's structure spans only, and tool spans
whose content sits in keys no convention reads. Each case says the evidence key its note must name."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "EVIDENCE_CASES",
    "TOOL_MARKERS",
    "chain_only",
    "chat_without_tools",
    "openllmetry_task_only",
    "tool_spans_with_unknown_keys",
]

Spans = list[tuple[str, dict[str, Any]]]
TURNS = 7  # six turns that follow a tool call (or ask for one), then the answer
USAGE = {"gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 8, "gen_ai.request.model": "scripted-model"}
SCHEMA = json.dumps({"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}})


def _counted() -> Spans:
    """GenAI chat spans that count the tool calls asked for (1 on six turns, 0 on the answer), nothing else."""
    return [("chat scripted-model", {"gen_ai.operation.name": "chat", **USAGE,
                                     "gen_ai.response.tool_calls.count": 1 if turn < TURNS - 1 else 0})
            for turn in range(TURNS)]


def _flat_roles(name: str, base: dict[str, Any], role: str) -> Spans:
    """Model spans in a flattened message convention (``role`` formats the role key of message K): turn k has k
    ``tool`` messages without content, after the user's."""
    spans = []
    for turn in range(TURNS):
        attrs = {**base, role.format(0): "user"}
        for call in range(turn):
            attrs[role.format(2 * call + 1)] = "assistant"
            attrs[role.format(2 * call + 2)] = "tool"
        spans.append((name, attrs))
    return spans


def _openinference_roles() -> Spans:
    """OpenInference LLM spans, tools offered, input text hidden."""
    return _flat_roles("ChatCompletion", {"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": SCHEMA,
                                          "llm.token_count.prompt": 40, "llm.token_count.completion": 8},
                       "llm.input_messages.{}.message.role")


def _openllmetry_roles() -> Spans:
    """OpenLLMetry chat spans, functions offered, content off."""
    return _flat_roles("openai.chat", {"llm.request.type": "chat", **USAGE, "llm.request.functions.0.name": "search"},
                       "gen_ai.prompt.{}.role")


def _genai_roles() -> Spans:
    """GenAI chat spans with tool definitions and input messages whose ``tool`` messages have no part."""
    spans = []
    for turn in range(TURNS):
        messages = [{"role": "user", "parts": []}]
        for _ in range(turn):
            messages += [{"role": "assistant", "parts": []}, {"role": "tool", "parts": []}]
        spans.append(("chat scripted-model", {"gen_ai.operation.name": "chat", **USAGE,
                                              "gen_ai.tool.definitions": f"[{SCHEMA}]",
                                              "gen_ai.input.messages": json.dumps(messages)}))
    return spans


#: case: (spans, the evidence key its note names).
EVIDENCE_CASES: dict[str, tuple[Spans, str]] = {
    "tool_call_count": (_counted(), "gen_ai.response.tool_calls.count"),
    "openinference_tool_role": (_openinference_roles(), "llm.input_messages.2.message.role"),
    "openllmetry_tool_role": (_openllmetry_roles(), "gen_ai.prompt.2.role"),
    "genai_tool_role": (_genai_roles(), "gen_ai.input.messages"),
}


def chat_without_tools() -> Spans:
    """Three GenAI chat turns that end with finish reason ``stop``, no tool offered, no content."""
    return [("chat scripted-model", {"gen_ai.operation.name": "chat", **USAGE,
                                     "gen_ai.response.finish_reasons": ("stop",)}) for _ in range(3)]


def chain_only() -> tuple[Spans, list[str]]:
    """Haystack 3 under OpenInference: two CHAIN spans (the pipeline and one component), nothing else."""
    attrs = {"openinference.span.kind": "CHAIN", "input.value": "{}", "output.value": "{}",
             "input.mime_type": "application/json"}
    return [("haystack.component.run", dict(attrs)), ("haystack.pipeline.run", dict(attrs))], [
        "openinference.span.kind"]


def openllmetry_task_only() -> tuple[Spans, list[str]]:
    """Haystack 2 under OpenLLMetry: a task span whose completion content is the output's name, and its workflow."""
    return [("OpenAIGenerator.task", {"traceloop.span.kind": "task", "traceloop.entity.name": "OpenAIGenerator",
                                      "gen_ai.completion.0.content": "replies"}),
            ("haystack_pipeline.workflow", {"traceloop.span.kind": "workflow",
                                            "traceloop.entity.name": "haystack_pipeline"})], [
        "gen_ai.completion.0.content", "traceloop.span.kind"]


#: The attributes that mark a tool span in each known convention.
TOOL_MARKERS: dict[str, dict[str, Any]] = {
    "openinference": {"openinference.span.kind": "TOOL", "tool.name": "search"},
    "langfuse": {"langfuse.observation.type": "tool"},
    "mlflow": {"mlflow.spanType": '"TOOL"'},
    "traceloop": {"traceloop.span.kind": "tool", "traceloop.entity.name": "search"},
    "execute_tool": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
}


def tool_spans_with_unknown_keys(marker: str) -> Spans:
    """Five tool spans of one marker whose arguments and result are in ``acme.tool_input`` / ``acme.tool_output``."""
    return [("search", {**TOOL_MARKERS[marker], "acme.tool_input": '{"query": "weather"}',
                        "acme.tool_output": "rain"}) for _ in range(5)]
