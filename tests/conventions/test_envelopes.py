"""Envelopes peeled off a tool call's arguments or result, one fixed example per behaviour.

Read through the public :class:`Extractor` on spans of the conventions that name each envelope in the table
(README, "Conventions read"): OpenInference (arguments: ``langchain_inputs``, ``python_call``, ``kwargs_only``;
result: ``tool_message``, ``json_string``), the Vercel AI SDK (result: ``json_string``), strands with the latest
GenAI conventions (result: ``content_blocks``). Each expected value is worked out by hand from what the envelope is
(the comment says why), never taken from the code's output. The LangChain envelopes on OpenLLMetry spans are in
``test_extract_values.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.conventions.extract import Extractor

T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z


def _call(attrs: dict[str, Any]) -> Any:
    return Extractor(65_536).tool_call(attrs, "execute_tool", T0_NS, T0_NS + 10**8, False, None, ())


def _oi(args: Any = None, result: Any = None) -> Any:
    # An OpenInference tool span: arguments in input.value, result in output.value.
    attrs: dict[str, Any] = {"openinference.span.kind": "TOOL", "tool.name": "t"}
    if args is not None:
        attrs["input.value"] = args
    if result is not None:
        attrs["output.value"] = result
    return _call(attrs)


def _vercel(result: Any) -> Any:
    return _call({"ai.operationId": "ai.toolCall", "ai.toolCall.name": "t", "ai.toolCall.result": result})


def _strands(result: Any) -> Any:
    return _call({"gen_ai.operation.name": "execute_tool", "gen_ai.provider.name": "strands-agents",
                  "gen_ai.tool.name": "t", "gen_ai.tool.call.result": result})


# --- langchain_inputs (arguments) ------------------------------------------------------------------------------

def test_inputs_with_metadata_only_are_the_arguments_as_json_text() -> None:
    # "inputs" with "metadata" (no "input_str", no "tags") is the LangChain envelope: the arguments are the inputs,
    # written back as JSON text with json.dumps' default separators: '{"q": 1}'.
    assert _oi(args='{"inputs": {"q": 1}, "metadata": {"run": 7}}').arguments == '{"q": 1}'


def test_input_str_without_inputs_is_the_repr_text() -> None:
    # No structured inputs (absent, or null): the repr string is the arguments, as the string itself (not quoted
    # again as JSON text).
    assert _oi(args='{"input_str": "q=1"}').arguments == "q=1"
    assert _oi(args='{"input_str": "q=2", "inputs": null}').arguments == "q=2"
    # null inputs without input_str: not the envelope, the text stays whole.
    assert _oi(args='{"inputs": null, "tags": []}').arguments == '{"inputs": null, "tags": []}'


def test_text_that_mentions_inputs_but_is_no_object_stays_whole() -> None:
    # A JSON list mentioning "inputs", and text that is not JSON at all: neither is an object, so no envelope.
    assert _oi(args='["inputs", "tags"]').arguments == '["inputs", "tags"]'
    assert _oi(args='"inputs" and more').arguments == '"inputs" and more'


def test_arguments_given_as_a_mapping_are_unwrapped_as_a_mapping() -> None:
    # A mapping (OTLP kvlist) is peeled as it is: the inner {"q": 3} stays a mapping, and input_str stays a string.
    assert _oi(args={"inputs": {"q": 3}, "metadata": {}}).arguments == {"q": 3}
    assert _oi(args={"input_str": "q=3"}).arguments == "q=3"


def test_an_argument_value_that_is_neither_text_nor_mapping_stays_as_it_is() -> None:
    # An array attribute is no envelope of any kind, even when an item is the quoted marker text of one (the
    # smolagents call's '"sanitize_inputs_outputs"'): only text is parsed, so the very value is the arguments.
    assert _oi(args=["inputs", "tags"]).arguments == ["inputs", "tags"]
    assert _oi(args=['"sanitize_inputs_outputs"']).arguments == ['"sanitize_inputs_outputs"']


# --- python_call (smolagents under OpenInference) ---------------------------------------------------------------

@pytest.mark.parametrize(("doc", "expected"), [
    # Only positional arguments: their list, as JSON text.
    ({"args": [1, "a"], "sanitize_inputs_outputs": True, "kwargs": {}}, '[1, "a"]'),
    # Only keyword arguments: their object.
    ({"args": [], "sanitize_inputs_outputs": False, "kwargs": {"city": "Paris"}}, '{"city": "Paris"}'),
    # Both: the positional list under "args", then the keywords, in that order.
    ({"args": [2], "sanitize_inputs_outputs": True, "kwargs": {"city": "Rome"}}, '{"args": [2], "city": "Rome"}'),
    # args and kwargs absent or null: no arguments at all, the empty keyword object.
    ({"sanitize_inputs_outputs": True}, "{}"),
    ({"args": None, "sanitize_inputs_outputs": True, "kwargs": None}, "{}"),
    # kwargs absent, args present: the list.
    ({"args": [5], "sanitize_inputs_outputs": True}, "[5]"),
])
def test_a_python_call_is_its_arguments(doc: dict[str, Any], expected: str) -> None:
    assert _oi(args=json.dumps(doc)).arguments == expected


@pytest.mark.parametrize("doc", [
    {"args": [1], "sanitize_inputs_outputs": True, "other": 1},  # a key the envelope does not have
    {"args": "x", "sanitize_inputs_outputs": True},               # args that are not a list
    {"kwargs": [1], "sanitize_inputs_outputs": True},             # kwargs that are not an object
    ["sanitize_inputs_outputs"],                                  # not an object
])
def test_what_only_looks_like_a_python_call_stays_whole(doc: Any) -> None:
    text = json.dumps(doc)
    assert _oi(args=text).arguments == text


# --- kwargs_only (DSPy under OpenInference) ---------------------------------------------------------------------

def test_a_kwargs_only_object_is_its_keywords() -> None:
    # {"kwargs": {...}} and nothing else: the keywords, as JSON text.
    assert _oi(args='{"kwargs": {"question": "why"}}').arguments == '{"question": "why"}'


@pytest.mark.parametrize("text", [
    '{"kwargs": {"q": 1}, "extra": 2}',  # another key besides kwargs
    '{"kwargs": 5}',                     # kwargs that are not an object
    '{"kwargs": {"q": 1}',               # not JSON
])
def test_what_only_looks_like_kwargs_only_stays_whole(text: str) -> None:
    assert _oi(args=text).arguments == text


# --- tool_message (results) -------------------------------------------------------------------------------------

def test_tool_message_content_that_is_not_text_is_given_as_it_is() -> None:
    # The result envelope is not written back as text: a ToolMessage whose content is a list of numbers gives the
    # list itself, and an object content gives the object.
    assert _oi(result='{"content": [1, 2], "tool_call_id": "c"}').result == [1, 2]
    assert _oi(result='{"lc": 1, "kwargs": {"content": {"a": 1}, "tool_call_id": "c"}}').result == {"a": 1}


def test_an_output_message_wins_over_the_outer_fields() -> None:
    # {"output": {"kwargs": {"content": "in"}}, "content": "out", "tool_call_id": "c"}: the OpenLLMetry form is
    # looked at first, so the output message's content "in" is the result.
    text = json.dumps({"output": {"kwargs": {"content": "in"}}, "content": "out", "tool_call_id": "c"})
    assert _oi(result=text).result == "in"
    # An "output" that is not an object, next to a flat message: the flat message's content.
    text = json.dumps({"output": "x", "content": "flat", "tool_call_id": "c"})
    assert _oi(result=text).result == "flat"
    # data that is not an object, next to a bare message's kwargs: the kwargs' content.
    text = json.dumps({"data": "x", "kwargs": {"content": "bare", "tool_call_id": "c"}})
    assert _oi(result=text).result == "bare"


def test_a_tool_message_given_as_a_mapping_is_unwrapped() -> None:
    assert _oi(result={"content": "m", "tool_call_id": "c"}).result == "m"
    # A mapping that is no message stays the very mapping.
    assert _oi(result={"content": "m"}).result == {"content": "m"}


# --- json_string ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ('"sunny"', "sunny"),          # JSON.stringify("sunny")
    ('""', ""),                    # JSON.stringify(""): the empty string, two characters of text
    ('"[1, 2]"', "[1, 2]"),        # a string whose text looks like JSON stays that string
    ('"a" + "b"', '"a" + "b"'),    # quoted at both ends but not one JSON string: stays whole
    ('"sunny" ', '"sunny" '),      # not exactly a quoted string (a trailing space): not JSON.stringify's output
    (' "sunny"', ' "sunny"'),      # the same with a leading space
    ('"', '"'),                    # a lone quote
    ("sunny", "sunny"),            # plain text
    ("12", "12"),                  # a number's text is no string
])
def test_a_json_encoded_string_result_is_the_string(text: str, expected: str) -> None:
    assert _vercel(text).result == expected


def test_json_string_on_openinference_comes_after_tool_message() -> None:
    # OpenInference names tool_message, then json_string: '"x"' is no ToolMessage, so it is the string x.
    assert _oi(result='"x"').result == "x"
    assert _oi(result={"a": 1}).result == {"a": 1}


# --- content_blocks (strands) -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ('[{"text": "42"}]', "42"),                                        # one text block: its text
    ('[{"text": "a"}, {"text": "b"}]', '[{"text": "a"}, {"text": "b"}]'),  # two blocks: the list stays whole
    ('[{"text": "a", "type": "x"}]', '[{"text": "a", "type": "x"}]'),  # a block with another key stays whole
    ('[{"text": "a"}', '[{"text": "a"}'),                              # not JSON
    ('{"text": "a"}', '{"text": "a"}'),                                # a block that is not in a list
])
def test_one_text_block_is_its_text(text: str, expected: str) -> None:
    assert _strands(text).result == expected


def test_content_blocks_given_as_an_array_attribute_stay_as_they_are() -> None:
    # Only the JSON text of the blocks is an envelope; an array attribute is the result as it is.
    assert _strands(['[{"text"']).result == ['[{"text"']


# --- the object-envelope builder ---------------------------------------------------------------------------------

def _parse(text: str) -> Any:
    # The parser the extractor hands over: the JSON value, or None for text that is not JSON.
    try:
        return json.loads(text)
    except ValueError:
        return None


def test_the_object_envelope_builder() -> None:
    # langchain_inputs and tool_message are built by the private _object_envelope while the module is imported
    # (before mutmut switches a mutant on), so it is called here directly, with the same inner readers.
    from otel_loopguard.conventions.envelopes import _inner_args, _inner_result, _object_envelope

    args = _object_envelope(_inner_args, ('"input_str"', '"inputs"'), as_text=True)
    # Either marker is enough to look inside: "inputs" with "tags" (no "input_str") is unwrapped, as JSON text.
    assert args('{"inputs": {"q": 1}, "tags": []}', _parse) == '{"q": 1}'
    # "input_str" alone: the repr string itself (a string found is not written as JSON text again).
    assert args('{"input_str": "q=1"}', _parse) == "q=1"
    # Text mentioning neither marker is not parsed at all: a parser that fails the test if called.
    def no_parse(text: str) -> Any:
        raise AssertionError(f"parsed {text!r}")
    assert args('{"q": 1}', no_parse) == '{"q": 1}'
    # An object that is not the envelope: the very same text object.
    plain = '{"inputs": [1]}'
    assert args(plain, _parse) is plain
    # Not an object: the same text.
    assert args('["inputs"]', _parse) == '["inputs"]'
    # A mapping is unwrapped as a mapping; anything else is given back as it is.
    assert args({"inputs": {"q": 2}, "metadata": {}}, _parse) == {"q": 2}
    assert args(7, _parse) == 7

    result = _object_envelope(_inner_result, ('"tool_call_id"', '"kwargs"'), as_text=False)
    # as_text False: a non-string inner value is given as it is, not as text.
    assert result('{"content": [1], "tool_call_id": "c"}', _parse) == [1]
    # The second marker alone ("kwargs", no "tool_call_id") is enough to look inside.
    assert result('{"output": {"kwargs": {"content": "in"}}}', _parse) == "in"
    assert result({"content": "m", "tool_call_id": "c"}, _parse) == "m"
