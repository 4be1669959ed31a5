"""Reading hand-off and model-turn steps from span attributes, one convention at a time (hand-built spans)."""

from __future__ import annotations

import json

from otel_loopguard.conventions.agent_steps import (
    ORIGIN_LANE_SPAN,
    handoff_of_span,
    handoff_of_tool,
    is_handoff_tool,
    lane_step_of_span,
    model_step,
)
from otel_loopguard.core.agent_steps import LANE_SPAN_BIT, NEWS_ONLY, text_digest
from otel_loopguard.core.judge import Step
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000


def tool_step(tool: str, arguments: object, result: object = None, agent: str | None = None) -> Step:
    """A tool span's step as the tool conventions read it."""
    call = ToolCall(tool=tool, arguments=arguments, result=result, result_captured=result is not None)
    return Step(span_id=7, parent_span_id=3, start_ns=S, end_ns=2 * S, call=call, agent=agent)


def test_openinference_handoff_span_names_both_agents() -> None:
    """OpenInference's 'handoff to billing' TOOL span: from in input.value, to in output.value, no evidence."""
    attrs = {"input.value": "triage", "output.value": "billing", "openinference.span.kind": "TOOL"}
    step = handoff_of_tool(tool_step("handoff to billing", None), attrs, "handoff to billing")
    assert step is not None and step.kind == "handoff"
    assert step.call is not None and step.call.tool == "triage → billing"
    assert step.call.result_captured is False and step.span_id == 7


def test_logfire_handoff_span() -> None:
    """Logfire's 'Handoff: A → B' span with from_agent and to_agent is a hand-off; without them it is not."""
    attrs = {"from_agent": "a", "to_agent": "b", "gen_ai.system": "openai"}
    step = handoff_of_span(attrs, "Handoff: {from_agent} → {to_agent}", 9, 1, S, 2 * S)
    assert step is not None and step.call is not None and step.call.tool == "a → b"
    assert handoff_of_span({"gen_ai.system": "openai"}, "Handoff: x", 9, 1, S, 2 * S) is None
    assert lane_step_of_span(attrs, "Handoff: {from_agent} → {to_agent}", 9, 1, S, 2 * S).origin == ORIGIN_LANE_SPAN


def test_transfer_tools_name_the_target() -> None:
    """LangGraph's transfer_to_<worker> names its target; ADK's transfer_to_agent takes it from agent_name; the
    volatile output (a Command with the call id, a fresh adk- id) is never evidence."""
    lg = handoff_of_tool(tool_step("transfer_to_researcher", "{}", '{"goto": "researcher", "id": "call_1"}',
                                   agent="supervisor"), {}, "transfer_to_researcher")
    assert lg is not None and lg.call is not None and lg.call.tool == "supervisor → researcher"
    assert lg.call.result_captured is False
    adk = handoff_of_tool(tool_step("transfer_to_agent", '{"agent_name": "billing"}', "adk-1f2e", agent="root"),
                          {}, "execute_tool transfer_to_agent")
    assert adk is not None and adk.call is not None and adk.call.tool == "root → billing"


def test_crewai_delegation_keeps_the_task_and_the_answer() -> None:
    """CrewAI's delegation: the coworker is the target, task and context the input, the answer the evidence."""
    args = json.dumps({"task": "write the report", "context": "Q3", "coworker": "Writer"})
    step = handoff_of_tool(tool_step("Delegate work to coworker", args, "draft 1", agent="Manager"), {},
                           "Delegate work to coworker")
    assert step is not None and step.call is not None
    assert (step.call.tool, step.call.arguments, step.call.result) == (
        "Manager → Writer", {"task": "write the report", "context": "Q3"}, "draft 1")


def test_ordinary_tools_are_not_handoffs() -> None:
    """A search tool is no hand-off, and the cheap test says so before anything is read."""
    assert not is_handoff_tool("search", "execute_tool search")
    assert handoff_of_tool(tool_step("search", "{}"), {}, "execute_tool search") is None


def _genai(output: list[dict], inputs: list[dict] | None = None) -> dict[str, str]:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(output)}
    if inputs is not None:
        attrs["gen_ai.input.messages"] = json.dumps(inputs)
    return attrs


def test_genai_text_answer_is_a_model_step_with_news() -> None:
    """A text answer: signature the normalised text's digest, evidence what follows the last assistant message."""
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "Hello  World"}]}]
    history = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]},
               {"role": "assistant", "parts": [{"type": "text", "content": "Hello world"}]},
               {"role": "user", "parts": [{"type": "text", "content": "again"}]}]
    step = model_step(_genai(answer, history), 5, 1, S, 2 * S, "helper")
    again = model_step(_genai(answer, [history[2]]), 6, 1, 3 * S, 4 * S, "helper")
    assert step is not None and step.call is not None and again is not None and again.call is not None
    assert step.kind == "model" and step.span_id == 5 | LANE_SPAN_BIT
    assert step.call.arguments == text_digest("hello world")
    assert step.call.result == again.call.result  # the same news: "again" after the last answer


def test_model_step_without_input_has_missing_evidence() -> None:
    """Output recorded, input not: the step's evidence is missing (repetition becomes uncertain, never stuck)."""
    step = model_step(_genai([{"role": "assistant", "parts": [{"type": "text", "content": "x"}]}]), 5, 1, S, S, None)
    assert step is not None and step.call is not None and step.call.result_captured is False


def test_tool_calls_are_news_only_and_only_when_asked() -> None:
    """A model call asking for a tool is no model turn: news for hand-offs when asked for, else nothing."""
    asks = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}]}]
    inputs = [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
    assert model_step(_genai(asks, inputs), 5, 1, S, S, None, with_news=False) is None
    news = model_step(_genai(asks, inputs), 5, 1, S, S, None)
    assert news is not None and news.call is not None and news.call.tool == NEWS_ONLY


def test_news_ignores_ids_that_change_every_call() -> None:
    """Two inputs that differ only in tool-call ids carry the same news."""
    def attrs(call_id: str) -> dict[str, str]:
        return {"llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "done",
                "llm.input_messages.0.message.role": "tool",
                "llm.input_messages.0.message.tool_call_id": call_id,
                "llm.input_messages.0.message.content": '{"assistant": "billing"}'}
    first, second = model_step(attrs("call_1"), 5, 1, S, S, None), model_step(attrs("call_2"), 6, 1, S, S, None)
    assert first is not None and second is not None and first.call is not None and second.call is not None
    assert first.call.result == second.call.result


def test_degenerate_answer_carries_its_chunk() -> None:
    """A text answer ending in a repeated sentence carries (chunk length, count) for the judge."""
    text = "Start. " + "Checking again. " * 12
    step = model_step(_genai([{"role": "assistant", "parts": [{"type": "text", "content": text}]}]), 5, 1, S, S, None)
    assert step is not None and step.chunk == (16, 12)
