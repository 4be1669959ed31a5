"""Tool calls from model spans, fixed examples of the message readers and of TurnJudge.

Through the public names of :mod:`otel_loopguard.conventions.model_calls`. Every expected value is worked out by
hand from the module's rules (the comment says which), never taken from the code's output. Times are whole seconds,
so the calls' times in seconds are exact.
"""

from __future__ import annotations

import json
from typing import Any

from otel_loopguard.conventions.model_calls import (
    MESSAGE_READERS,
    ORIGIN_DERIVED,
    Failed,
    Messages,
    Turn,
    TurnJudge,
    failure_class,
    read_messages,
)
from otel_loopguard.core.judge import Step
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000
MASK64 = (1 << 64) - 1


def _turn(span_id: int, start: int, end: int, calls: Any = (), results: Any = None, history: Any = (),
          response_id: str | None = None, parent: int | None = None, agent: str | None = None,
          conversation: str | None = None) -> Turn:
    # start and end in seconds; no usage (these examples are about derived calls).
    return Turn(span_id, parent, start * S, end * S, response_id, None, tuple(calls),
                None if results is None else tuple(results), tuple(history), agent, conversation)


def _calls(steps: list[Step]) -> list[tuple[str, Any]]:
    return [(s.call.tool, s.call.result) for s in steps if s.call is not None]


# -- readers ---------------------------------------------------------------------------------------------------------

def test_every_reader_finds_nothing_in_a_span_without_its_attributes() -> None:
    # No messages attribute of the reader's convention: None (not an empty Messages), so read_messages skips it.
    for name in ("genai_messages", "openinference_messages", "openllmetry_flat"):
        assert MESSAGE_READERS[name]({"gen_ai.operation.name": "chat"}) is None, name


def _genai_input(*messages: Any) -> dict[str, Any]:
    return {"gen_ai.input.messages": json.dumps(list(messages))}


def test_genai_input_only() -> None:
    # Only the input is recorded: no call asked for, but its results and history are read.
    attrs = _genai_input(
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": 1}}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "response": "3 hits"}]},
    )
    assert read_messages(attrs, ["genai_messages"]) == Messages((), (("c1", "3 hits"),), (("c1", "search", {"q": 1}),))


def test_genai_results_that_are_not_text_blocks_are_kept_as_they_are() -> None:
    # Only a non-empty list of blocks that all have "text" is joined: an empty list, a block without text and a list
    # of strings stay as recorded.
    attrs = _genai_input({"role": "user", "parts": [
        {"type": "tool_call_response", "id": "a", "response": []},
        {"type": "tool_call_response", "id": "b", "response": [{"type": "image"}]},
        {"type": "tool_call_response", "id": "c", "response": ["the text", "more text"]},
        {"type": "tool_call_response", "id": "d", "response": [{"text": "x"}, {"text": 2}]},
    ]})
    assert read_messages(attrs, ["genai_messages"]).results == (
        ("a", []), ("b", [{"type": "image"}]), ("c", ["the text", "more text"]), ("d", "x2"))


def test_genai_output_skips_what_is_not_a_message() -> None:
    # A stray non-object before the assistant message is skipped; the message after it is still read.
    attrs = {"gen_ai.output.messages": json.dumps([
        "junk", {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "t", "arguments": {}}]}])}
    assert read_messages(attrs, ["genai_messages"]) == Messages((("c1", "t", {}),), None, ())


def test_genai_what_is_not_a_call_or_a_result() -> None:
    # Output: a text part that has a name is no call; a tool_call part without a name is none either.
    attrs = {"gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
        {"type": "text", "name": "n", "content": "hi"}, {"type": "tool_call", "id": "c0"},
        {"type": "tool_call", "id": "c1", "name": "t", "arguments": {}}]}])}
    assert read_messages(attrs, ["genai_messages"]).calls == (("c1", "t", {}),)
    # Input: a stray message and a stray part are skipped (what follows them is read); a text part with an id and a
    # name is not history; a tool_call part without an id is not history (nothing to match a result by).
    attrs = _genai_input("junk", {"role": "assistant", "parts": [
        "junk", {"type": "text", "id": "z", "name": "n"}, {"type": "tool_call", "name": "no_id"},
        {"type": "tool_call", "id": "c1", "name": "search", "arguments": "{}"},
        {"type": "tool_call_response", "id": "c1", "response": "r"}]})
    assert read_messages(attrs, ["genai_messages"]) == Messages((), (("c1", "r"),), (("c1", "search", "{}"),))


def test_genai_litellm_tool_messages_and_openai_calls() -> None:
    # LiteLLM: a tool message with its call id; its result is the joined content of its parts (a part without
    # content adds nothing, a stray part is skipped). Earlier calls in OpenAI's shape are history when they have an
    # id and a function name; a stray entry, one without an id and one without a name are not.
    attrs = _genai_input(
        {"role": "assistant", "tool_calls": [
            "junk", {"function": {"name": "no_id"}}, {"id": "c9", "function": {"arguments": "{}"}},
            {"id": "c1", "function": {"name": "search", "arguments": '{"q": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "parts": [
            {"type": "text", "content": "a"}, "junk", {"type": "text"}, {"type": "text", "content": "b"}]},
    )
    assert read_messages(attrs, ["genai_messages"]) == Messages(
        (), (("c1", "ab"),), (("c1", "search", '{"q": 1}'),))


OI_CALL = "llm.output_messages.{}.message.tool_calls.{}.tool_call.{}"
OI_INPUT = "llm.input_messages.{}.message.{}"


def test_openinference_outputs_only() -> None:
    # Calls of every output message, in order (a call without an id has None, not "None"); no input recorded:
    # results None (not empty), no history.
    attrs = {
        OI_CALL.format(0, 0, "function.name"): "a", OI_CALL.format(0, 0, "function.arguments"): "{}",
        OI_CALL.format(1, 0, "id"): "c2", OI_CALL.format(1, 0, "function.name"): "b",
        OI_CALL.format(1, 0, "function.arguments"): '{"x": 1}',
    }
    assert MESSAGE_READERS["openinference_messages"](attrs) == Messages(
        ((None, "a", "{}"), ("c2", "b", '{"x": 1}')), None, ())


def test_openinference_inputs_only() -> None:
    # Message 0: a tool message without its call id (skipped). Message 1: the assistant's earlier calls, the one
    # with an id is history, the one without is not. Message 2: the result of c1.
    attrs = {
        OI_INPUT.format(0, "role"): "tool", OI_INPUT.format(0, "content"): "orphan",
        OI_INPUT.format(1, "role"): "assistant",
        OI_INPUT.format(1, "tool_calls.0.tool_call.id"): "c1",
        OI_INPUT.format(1, "tool_calls.0.tool_call.function.name"): "search",
        OI_INPUT.format(1, "tool_calls.0.tool_call.function.arguments"): '{"q": 1}',
        OI_INPUT.format(1, "tool_calls.1.tool_call.function.name"): "no_id",
        OI_INPUT.format(2, "role"): "tool", OI_INPUT.format(2, "tool_call_id"): "c1",
        OI_INPUT.format(2, "content"): "hits",
    }
    assert MESSAGE_READERS["openinference_messages"](attrs) == Messages(
        (), (("c1", "hits"),), (("c1", "search", '{"q": 1}'),))


# -- TurnJudge ---------------------------------------------------------------------------------------------------------

def test_derived_steps_in_full() -> None:
    # Turn 5 (0 s to 2 s, parent 9) asks for two calls; turn 6 (3 s to 4 s) records its input with the result of c1
    # only. c1 is judged with its result; c2, whose model call ended before turn 6 started, is judged now without
    # one. Both run from the end of turn 5 (2 s) to the start of turn 6 (3 s), keep turn 5's parent, agent and
    # conversation, and have span ids 5 * 1 000 003 + position + 1 = 5 000 016 and 5 000 017.
    judge = TurnJudge()
    assert judge.add(_turn(5, 0, 2, calls=[("c1", "search", {"q": "x"}), ("c2", "read", None)], parent=9,
                           agent="bot", conversation="conv")) == []
    assert judge.pending == 2
    steps = judge.add(_turn(6, 3, 4, results=[("c1", "hits")], parent=8, agent="other", conversation="other"))
    assert steps == [
        Step(span_id=5_000_016, parent_span_id=9, start_ns=2 * S, end_ns=3 * S,
             call=ToolCall("search", {"q": "x"}, True, "hits", True, start=2.0, end=3.0),
             agent="bot", conversation="conv", origin=ORIGIN_DERIVED),
        Step(span_id=5_000_017, parent_span_id=9, start_ns=2 * S, end_ns=3 * S,
             call=ToolCall("read", None, False, None, False, start=2.0, end=3.0),
             agent="bot", conversation="conv", origin=ORIGIN_DERIVED),
    ]
    assert judge.derived == 2 and judge.pending == 0 and judge.finish() == []


def test_a_call_never_answered_is_judged_at_finish() -> None:
    # No later input: at finish the call is judged without a result, ending where its model call ended (2 s), and
    # marked at_end (judged after the trace's other steps: the live paths know only now that no result comes).
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[("c1", "search", "{}")]))
    assert judge.finish() == [Step(span_id=1_000_004, start_ns=2 * S, end_ns=2 * S,
                                   call=ToolCall("search", "{}", True, None, False, start=2.0, end=2.0),
                                   origin=ORIGIN_DERIVED, at_end=True)]
    assert judge.derived == 1 and judge.finish() == []


def test_an_input_starting_when_the_call_ended_judges_it() -> None:
    # The next input starts exactly when the asking call ended (2 s) and lacks the result: the result will not come,
    # so the call is judged now (once: nothing is left for finish).
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[("c1", "search", "{}")]))
    assert _calls(judge.add(_turn(2, 2, 3, results=[]))) == [("search", None)]
    assert judge.finish() == []


def test_an_input_that_overlaps_the_asking_call_leaves_it_waiting() -> None:
    # Turn 2 started (1 s) before turn 1 ended (2 s): its input cannot hold turn 1's result, so c1 keeps waiting and
    # is completed by turn 3.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[("c1", "search", "{}")]))
    assert judge.add(_turn(2, 1, 3, results=[])) == []
    assert judge.pending == 1
    assert _calls(judge.add(_turn(3, 4, 5, results=[("c1", "hits")]))) == [("search", "hits")]


def test_a_call_without_id_and_no_id_in_the_next_input_is_judged_without_a_result() -> None:
    # The id-less call of "search" finds no earlier "search" call in the next input's history (only "other"), so it
    # has no id to match a result by: judged without one.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[(None, "search", "{}")]))
    steps = judge.add(_turn(2, 3, 4, results=[("x", "r")], history=[("x", "other", "{}")]))
    assert _calls(steps) == [("search", None)]


def test_one_call_recorded_by_two_spans_is_asked_for_once() -> None:
    # By call id: c1 is in both spans (the second also asks for c2, after it), so c1 once and c2.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[("c1", "search", "{}")]))
    judge.add(_turn(2, 0, 2, calls=[("c1", "search", "{}"), ("c2", "read", "{}")]))
    assert [s.call.tool for s in judge.finish() if s.call] == ["search", "read"]
    # Without ids, by response id and position: r#0 in both spans, r#1 in the second only.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[(None, "a", "{}")], response_id="r"))
    judge.add(_turn(2, 0, 2, calls=[(None, "a", "{}"), (None, "b", "{}")], response_id="r"))
    assert [s.call.tool for s in judge.finish() if s.call] == ["a", "b"]
    # Without ids and without response ids, nothing says two spans are one call: each is asked for.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[(None, "a", "{}")]))
    judge.add(_turn(2, 3, 4, calls=[(None, "a", "{}")]))
    assert [s.call.tool for s in judge.finish() if s.call] == ["a", "a"]


def test_after_a_tool_span_nothing_is_derived() -> None:
    # The trace has a tool span: derive is off for good, a later turn's calls are not asked for.
    judge = TurnJudge()
    judge.add(_turn(1, 0, 2, calls=[("c1", "search", "{}")]))
    judge.tool_span_seen()
    assert judge.derive is False and judge.pending == 0
    judge.add(_turn(2, 3, 4, calls=[("c2", "read", "{}")]))
    assert judge.pending == 0 and judge.finish() == [] and judge.derived == 0


def test_derived_span_ids() -> None:
    # (span_id * 1 000 003 + position + 1) modulo 2**64: for the largest span id, 2**64 - 1 000 003 + 1.
    judge = TurnJudge()
    judge.add(_turn(MASK64, 0, 2, calls=[("c1", "search", "{}")]))
    assert [s.span_id for s in judge.finish()] == [(1 << 64) - 1_000_002]
    # A span id whose derived id wraps to 0 gets 1 (0 is no span id): x * 1 000 003 + 1 = 0 modulo 2**64.
    wraps = -pow(1_000_003, -1, 1 << 64) % (1 << 64)
    judge = TurnJudge()
    judge.add(_turn(wraps, 0, 2, calls=[("c1", "search", "{}")]))
    assert [s.span_id for s in judge.finish()] == [1]


def test_openllmetry_completions_only() -> None:
    # Calls of every completion, in order; no prompt recorded: results None (not empty).
    attrs = {"gen_ai.completion.0.tool_calls.0.id": "t1", "gen_ai.completion.0.tool_calls.0.name": "a",
             "gen_ai.completion.0.tool_calls.0.arguments": "{}",
             "gen_ai.completion.1.tool_calls.0.id": "t2", "gen_ai.completion.1.tool_calls.0.name": "b"}
    assert MESSAGE_READERS["openllmetry_flat"](attrs) == Messages((("t1", "a", "{}"), ("t2", "b", None)), None, ())


def test_openllmetry_prompts_only() -> None:
    # Prompt 0: a tool message without a call id (skipped). Prompt 1: the assistant's earlier call (history) and, in
    # its content, tool_result blocks that are not a user's (not results). Prompt 2: a user prompt without content.
    # Prompt 3: a user's blocks: a tool_result (its text blocks joined), a text block with a tool_use_id and a
    # tool_use block (neither is a result). Prompt 4: a tool message with its call id.
    blocks = [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "hi"}]},
              {"type": "text", "tool_use_id": "t8", "text": "no"}, {"type": "tool_use", "id": "t9"}]
    attrs = {
        "gen_ai.prompt.0.role": "tool", "gen_ai.prompt.0.content": "orphan",
        "gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "t0",
        "gen_ai.prompt.1.tool_calls.0.name": "ls", "gen_ai.prompt.1.tool_calls.0.arguments": "{}",
        "gen_ai.prompt.1.content": json.dumps([{"type": "tool_result", "tool_use_id": "t7", "content": "x"}]),
        "gen_ai.prompt.2.role": "user",
        "gen_ai.prompt.3.role": "user", "gen_ai.prompt.3.content": json.dumps(blocks),
        "gen_ai.prompt.4.role": "tool", "gen_ai.prompt.4.tool_call_id": "t0", "gen_ai.prompt.4.content": "files",
    }
    assert MESSAGE_READERS["openllmetry_flat"](attrs) == Messages(
        (), (("t1", "hi"), ("t0", "files")), (("t0", "ls", "{}"),))


def test_read_messages_merges_the_readers() -> None:
    # Nothing recorded: no call, results None (no input), no history.
    readers = ["openinference_messages", "genai_messages", "openllmetry_flat"]
    assert read_messages({"gen_ai.operation.name": "chat"}, readers) == Messages((), None, ())
    # The first reader finds nothing and is passed over; the calls are the first reader's that has any (GenAI's
    # here); the results and the history of every reader are kept, in the readers' order.
    attrs = {
        **_genai_input(*_asks_genai(("g0", "ls", "{}")),
                       {"role": "user", "parts": [{"type": "tool_call_response", "id": "g0", "response": "files"}]}),
        "gen_ai.output.messages": json.dumps(_asks_genai(("g1", "read", "{}"))),
        "gen_ai.prompt.0.role": "tool", "gen_ai.prompt.0.tool_call_id": "t0", "gen_ai.prompt.0.content": "old",
        "gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "t0",
        "gen_ai.prompt.1.tool_calls.0.name": "find",
        "gen_ai.completion.0.tool_calls.0.id": "t1", "gen_ai.completion.0.tool_calls.0.name": "other",
    }
    assert read_messages(attrs, readers) == Messages(
        (("g1", "read", "{}"),), (("g0", "files"), ("t0", "old")), (("g0", "ls", "{}"), ("t0", "find", None)))


def _asks_genai(*calls: tuple[str, str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "parts": [{"type": "tool_call", "id": i, "name": t, "arguments": a}
                                            for i, t, a in calls]}]


def test_usage_steps_in_full() -> None:
    # A model call's usage step: the turn's ids, times, model, usage, agent and conversation; no call, no origin.
    from otel_loopguard.core.cost import Usage

    usage = Usage(input_tokens=7, output_tokens=3)
    turn = Turn(10, 4, 1 * S, 2 * S, None, ("gpt", usage), agent="bot", conversation="conv")
    assert TurnJudge().add(turn) == [Step(span_id=10, parent_span_id=4, start_ns=1 * S, end_ns=2 * S, model="gpt",
                                          usage=usage, agent="bot", conversation="conv")]
    # Counted once per call: a parent counted first, then its child (ADK's call_llm around generate_content);
    # roots without a response id are all counted.
    judge = TurnJudge()
    steps = []
    for t in (Turn(10, None, 0, S, None, ("m", usage)), Turn(11, 10, 0, S, None, ("m", usage)),
              Turn(20, None, S, 2 * S, None, ("m", usage))):
        steps += judge.add(t)
    assert [s.span_id for s in steps] == [10, 20]


# -- failed results (Anthropic ``tool_result`` with ``is_error``) ----------------------------------------------------

_RATE = "Error: RateLimitError: 429 Too Many Requests"


def test_openllmetry_anthropic_is_error_block_is_a_failed_result() -> None:
    # OpenLLMetry 0.53: tool_result blocks in a user prompt's JSON text; the one with is_error true is Failed, its
    # error class its text; the other is a plain result.
    blocks = [{"type": "tool_result", "tool_use_id": "t1", "content": _RATE, "is_error": True},
              {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "ok"}]}]
    attrs = {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": json.dumps(blocks)}
    assert read_messages(attrs, ["openllmetry_flat"]).results == (("t1", Failed(_RATE, _RATE)), ("t2", "ok"))


def test_openinference_reads_is_error_from_the_request_body() -> None:
    # OpenInference flattens the tool message without is_error; input.value (the Anthropic request) says t1 failed,
    # so t1's result is Failed and t2's (is_error false) is not.
    request = {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
        {"type": "tool_result", "tool_use_id": "t2", "content": "fine", "is_error": False}]}]}
    attrs = {"input.value": json.dumps(request),
             "llm.input_messages.0.message.role": "tool", "llm.input_messages.0.message.tool_call_id": "t1",
             "llm.input_messages.0.message.content": "boom",
             "llm.input_messages.1.message.role": "tool", "llm.input_messages.1.message.tool_call_id": "t2",
             "llm.input_messages.1.message.content": "fine"}
    assert read_messages(attrs, ["openinference_messages"]).results == (("t1", Failed("boom", "boom")),
                                                                         ("t2", "fine"))


def test_failed_error_class_is_bounded_and_never_empty() -> None:
    # The class is the message cut at 200 characters; no message at all gives the class "error".
    assert failure_class("x" * 250) == "x" * 200
    assert failure_class("") == "error"
    assert failure_class(None) == "error"


def test_a_failed_result_makes_a_failed_derived_call() -> None:
    # Turn 1 (0-1 s) asks for get_quote; turn 2 (2-3 s) brings its Failed result: one derived call whose result is
    # the text and whose error is the class.
    judge = TurnJudge()
    assert judge.add(_turn(1, 0, 1, calls=[("t1", "get_quote", {"symbol": "ACME"})])) == []
    [step] = judge.add(_turn(2, 2, 3, results=[("t1", Failed(_RATE, "RateLimitError"))]))
    assert step.call is not None
    assert (step.call.result, step.call.result_captured, step.call.error) == (_RATE, True, "RateLimitError")


def test_a_turn_judge_counts_no_model_call_before_its_first_turn() -> None:
    """A new turn judge (its once-sets not made yet) counts 0 model calls; one turn makes it 1."""
    judge = TurnJudge()
    assert judge.calls == 0
    judge.add(Turn(span_id=1, parent_span_id=None, start_ns=0, end_ns=1, response_id=None, usage=None))
    assert judge.calls == 1
