"""Reading sub-agent steps (an agent span under another agent's) from hand-built span attributes."""

from __future__ import annotations

import json

from otel_loopguard.conventions.agent_steps import SubAgents, handoff_of_tool, subagent_step
from otel_loopguard.core.agent_steps import text_digest
from otel_loopguard.core.judge import Step
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000


def _adk_output(text: str, prompt_tokens: int) -> str:
    """ADK's LlmResponse as OpenInference writes it in an agent span's output.value."""
    return json.dumps({"model_version": "m", "content": {"parts": [{"text": text}], "role": "model"},
                       "usage_metadata": {"prompt_token_count": prompt_tokens, "candidates_token_count": 20}})


def _oi_agent(name: str, output: str | None = None, given: str | None = None) -> dict[str, str]:
    attrs = {"openinference.span.kind": "AGENT", "agent.name": name}
    if output is not None:
        attrs["output.value"] = output
    if given is not None:
        attrs["input.value"] = given
    return attrs


def test_signature_is_both_agents_and_the_input_evidence_the_output_text() -> None:
    """The step belongs to the parent agent; its tool is 'parent → child', its input and output are digests."""
    attrs = _oi_agent("writer", _adk_output("Draft 1", 100), '{"task": "write"}')
    step = subagent_step(attrs, 5, 2, S, 2 * S, "review_loop", "writer")
    assert step is not None and step.kind == "agent" and step.agent == "review_loop"
    assert step.call is not None and step.call.tool == "review_loop → writer"
    # No "text"/"content" key in the input: the compact JSON with sorted keys is digested.
    assert step.call.arguments == text_digest('{"task":"write"}')
    assert (step.call.result, step.call.result_captured) == (text_digest("Draft 1"), True)


def test_token_counts_and_ids_do_not_change_the_evidence() -> None:
    """The same answer with another prompt size (the history grew) is the same evidence; another answer is not."""
    first = subagent_step(_oi_agent("w", _adk_output("Same draft", 100)), 5, 2, S, S, "loop", "w")
    again = subagent_step(_oi_agent("w", _adk_output("Same  DRAFT", 260)), 6, 2, S, S, "loop", "w")
    other = subagent_step(_oi_agent("w", _adk_output("Draft 2", 100)), 7, 2, S, S, "loop", "w")
    assert first is not None and again is not None and other is not None
    assert first.call is not None and again.call is not None and other.call is not None
    assert first.call.result == again.call.result != other.call.result
    with_id = subagent_step(_oi_agent("w", '{"id": "run_1", "answer": 3}'), 8, 2, S, S, "loop", "w")
    other_id = subagent_step(_oi_agent("w", '{"id": "run_2", "answer": 3}'), 9, 2, S, S, "loop", "w")
    assert with_id is not None and other_id is not None and with_id.call is not None and other_id.call is not None
    assert with_id.call.result == other_id.call.result


def test_unrecorded_content_gives_no_step_and_no_output_gives_no_evidence() -> None:
    """Neither input nor output (or OpenInference's __REDACTED__): no step; input only: a step without evidence."""
    assert subagent_step(_oi_agent("agent"), 5, 2, S, S, "graph", "agent") is None
    redacted = _oi_agent("agent", "__REDACTED__", "__REDACTED__")
    assert subagent_step(redacted, 5, 2, S, S, "graph", "agent") is None
    step = subagent_step(_oi_agent("agent", given="question"), 5, 2, S, S, "graph", "agent")
    assert step is not None and step.call is not None and step.call.result_captured is False


def test_model_span_named_like_an_agent_span_is_no_subagent_step() -> None:
    """ADK's model call written onto an 'invoke_agent <agent>' span (OpenInference kind LLM there) is a model call."""
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing",
             "openinference.span.kind": "LLM", "output.value": _adk_output("hello", 10)}
    assert subagent_step(attrs, 5, 2, S, S, "triage", "billing") is None


def test_children_that_come_before_their_parent_wait_for_it() -> None:
    """A child read first waits; its parent's span completes it with the parent's name; a span under a non-agent
    parent never becomes a step; an agent span seen twice counts once."""
    subs = SubAgents()
    child = _oi_agent("writer", _adk_output("Draft", 1))
    assert subs.agent(child, 11, 10, 2 * S, 3 * S, "writer") == []
    [step] = subs.agent(_oi_agent("review_loop", _adk_output("Draft", 1)), 10, 1, S, 4 * S, "review_loop")
    assert step.call is not None and (step.call.tool, step.agent, step.span_id) == ("review_loop → writer",
                                                                                   "review_loop", 11)
    [late] = subs.agent(_oi_agent("critic", _adk_output("Fine", 1)), 12, 10, 3 * S, 4 * S, "critic")
    assert late.call is not None and late.call.tool == "review_loop → critic"
    assert subs.agent(child, 11, 10, 2 * S, 3 * S, "writer") == []
    assert subs.agent(_oi_agent("orphan", "x"), 20, 99, S, S, "orphan") == []
    # Still waiting: review_loop's own step (its parent, span 1, was not seen) and the orphan's.
    assert subs.waiting_steps == 2


def test_adk_transfer_names_the_calling_agent_from_its_genai_attribute() -> None:
    """ADK's OpenInference transfer span names its agent only in gen_ai.agent.name; two transfers whose outputs
    differ only in their fresh adk-<uuid> are the same step."""
    def transfer(call_id: str) -> Step | None:
        attrs = {"openinference.span.kind": "TOOL", "gen_ai.agent.name": "triage_agent", "tool.id": call_id,
                 "output.value": json.dumps({"id": call_id, "name": "transfer_to_agent", "response": {}})}
        call = ToolCall(tool="transfer_to_agent", arguments='{"agent_name": "billing_agent"}',
                        result=attrs["output.value"], result_captured=True)
        step = Step(span_id=7, parent_span_id=3, start_ns=S, end_ns=2 * S, call=call)
        return handoff_of_tool(step, attrs, "execute_tool transfer_to_agent", lambda attrs, name: None)

    first, second = transfer("adk-17d702d4"), transfer("adk-d9502f9e")
    assert first is not None and second is not None and first.call is not None
    assert first.call.tool == "triage_agent → billing_agent"
    assert first.call == second.call and first.call.result_captured is False


def test_output_nested_too_deep_still_gives_a_step() -> None:
    """Output nested deeper than the JSON decoder goes is digested as its raw text; one nested deeper than the
    normaliser goes, whole; neither raises, and two such outputs that differ give different evidence."""
    too_deep = "[" * 3000 + "]" * 3000
    step = subagent_step(_oi_agent("w", too_deep), 5, 2, S, S, "loop", "w")
    assert step is not None and step.call is not None and step.call.result == text_digest(too_deep)
    results = set()
    for leaf in ("1", "2"):
        deep = '{"a":' * 950 + leaf + "}" * 950
        deep_step = subagent_step(_oi_agent("w", deep), 6, 2, S, S, "loop", "w")
        assert deep_step is not None and deep_step.call is not None and deep_step.call.result_captured
        results.add(deep_step.call.result)
    assert len(results) == 2
