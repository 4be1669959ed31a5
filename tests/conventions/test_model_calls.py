"""Tool calls from model spans (no tool span): the turn reader and TurnJudge, on hand-checked cases.

The recorded model-client fixtures are judged by test_fixture_verdicts and test_fixture_calls; these tests pin the
rules those rely on: one model call counts once, results come from the next recorded input, derivation stops when
the trace has a tool span.
"""

from __future__ import annotations

import json

from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.model_calls import ORIGIN_DERIVED, Turn, TurnJudge, read_messages
from otel_loopguard.core.cost import Usage

MS = 1_000_000
USAGE = (None, Usage(input_tokens=10, output_tokens=2))


def _turn(span_id: int, start: int, end: int, calls=(), results=None, history=(), response_id=None, parent=None,
          usage=USAGE) -> Turn:
    return Turn(span_id, parent, start * MS, end * MS, response_id, usage, tuple(calls),
                None if results is None else tuple(results), tuple(history))


def test_a_call_takes_its_result_from_the_next_recorded_input() -> None:
    judge = TurnJudge()
    first = judge.add(_turn(1, 0, 10, calls=[("c1", "search", {"q": "x"})], results=[]))
    assert [s.usage is not None for s in first] == [True]  # the call waits for its result
    second = judge.add(_turn(2, 20, 30, calls=[("c2", "read", '{"id": 1}')], results=[("c1", "3 hits")]))
    call = second[0].call
    assert call is not None and second[0].origin == ORIGIN_DERIVED
    assert (call.tool, call.arguments, call.result, call.result_captured) == ("search", {"q": "x"}, "3 hits", True)
    # The call spans from the end of the model call that asked for it to the start of the next one.
    assert (second[0].start_ns, second[0].end_ns) == (10 * MS, 20 * MS)
    # Later inputs repeat the first result: the call is not derived again; the last call never got a result.
    third = judge.add(_turn(3, 40, 50, results=[("c1", "3 hits"), ("c2", "doc")]))
    assert [s.call.tool for s in third if s.call is not None] == ["read"]
    assert judge.finish() == [] and judge.derived == 2


def test_one_model_call_with_two_spans_counts_once() -> None:
    """The instrumentation's span and the Anthropic SDK's own span (same response id), the SDK's first; ADK's
    call_llm around generate_content (no response id: the parent of a counted model span)."""
    judge = TurnJudge()
    sdk = judge.add(_turn(2, 1, 9, response_id="msg_1"))  # metadata only: no messages recorded
    instrumentation = judge.add(_turn(1, 0, 10, calls=[("t1", "search", {"q": "x"})], results=[],
                                      response_id="msg_1"))
    assert len([s for s in sdk + instrumentation if s.usage is not None]) == 1
    inner = judge.add(_turn(11, 21, 29, parent=10))
    outer = judge.add(_turn(10, 20, 30))
    assert len([s for s in inner + outer if s.usage is not None]) == 1
    # The metadata-only span of the next call does not complete the pending call; the recorded input does.
    assert [s.call for s in judge.add(_turn(21, 41, 49, response_id="msg_2")) if s.call] == []
    done = judge.add(_turn(20, 40, 50, results=[("t1", "r")], response_id="msg_2"))
    assert [s.call.result for s in done if s.call is not None] == ["r"]


def test_no_derivation_in_a_trace_with_tool_spans() -> None:
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[("c1", "search", {})], results=[]))
    judge.tool_span_seen()
    assert [s for s in judge.add(_turn(2, 20, 30, results=[("c1", "r")])) if s.call] == []
    assert judge.finish() == [] and judge.derived == 0


def test_a_call_without_id_takes_the_id_of_its_next_input() -> None:
    """LiteLLM writes the request without an id; the next input repeats it (with its id) beside the result."""
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[(None, "search", '{"q": "x"}')], results=[], response_id="r1"))
    steps = judge.add(_turn(2, 20, 30, results=[("call_a", "hits")], history=[("call_a", "search", '{"q": "x"}')],
                            response_id="r2"))
    assert [(s.call.tool, s.call.result) for s in steps if s.call is not None] == [("search", "hits")]


def test_message_readers() -> None:
    """GenAI messages (JSON text), OpenInference and older OpenLLMetry flattened attributes; Anthropic blocks."""
    genai = {
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c2", "name": "read", "arguments": {"doc_id": "d1"}}]}]),
        "gen_ai.input.messages": json.dumps([
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}]},
            {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1",
                                        "response": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]},
        ]),
    }
    m = read_messages(genai, ["genai_messages"])
    assert m.calls == (("c2", "read", {"doc_id": "d1"}),)
    assert m.results == (("c1", "ab"),) and m.history == (("c1", "search", {}),)
    oi = {
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c2",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "read",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"doc_id": "d1"}',
        # openinference-anthropic repeats the call under contents: read once.
        "llm.output_messages.0.message.contents.0.tool_call.id": "c2",
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.tool_call_id": "c1",
        "llm.input_messages.3.message.content": "hits",
    }
    m = read_messages(oi, ["openinference_messages"])
    assert m.calls == (("c2", "read", '{"doc_id": "d1"}'),) and m.results == (("c1", "hits"),)
    old = {
        "gen_ai.completion.0.tool_calls.0.id": "t2", "gen_ai.completion.0.tool_calls.0.name": "read",
        "gen_ai.completion.0.tool_calls.0.arguments": "{}",
        "gen_ai.prompt.3.role": "user",
        "gen_ai.prompt.3.content": json.dumps([{"type": "tool_result", "tool_use_id": "t1", "content": "hits"}]),
    }
    m = read_messages(old, ["openllmetry_flat"])
    assert m.calls == (("t2", "read", "{}"),) and m.results == (("t1", "hits"),)


def test_model_turns_from_spans() -> None:
    """Through the extractor: a model span is a turn (usage, messages), any other span is not."""
    extractor = Extractor()
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 1,
             "gen_ai.response.id": "r", "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                 {"type": "tool_call", "id": "c", "name": "t", "arguments": {}}]}])}
    turn = extractor.model_turn(attrs, "chat m", 7, 1, 10, 20)
    assert turn is not None and turn.response_id == "r" and turn.calls == (("c", "t", {}),)
    assert turn.usage is not None and turn.usage[1].input_tokens == 5
    assert extractor.model_turn(attrs, "chat m", 7, 1, 10, 20, messages=False).calls == ()  # type: ignore[union-attr]
    assert extractor.model_turn({"gen_ai.operation.name": "execute_tool"}, "x", 1, None, 0, 1) is None
