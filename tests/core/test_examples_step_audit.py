"""The step audit's reading of arguments, one example per rule (the README: a JSON object's members, else the raw
value under ``input``; only text that starts with ``{`` or ``[`` is read as JSON)."""

from __future__ import annotations

from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.step_audit import step_args


def test_plain_text_is_the_input() -> None:
    assert step_args(ToolCall("t", "weather in Paris")) == {"input": "weather in Paris"}


def test_json_text_of_an_object_gives_its_members_and_of_an_array_the_array() -> None:
    assert step_args(ToolCall("t", '{"q": "x", "n": 2}')) == {"q": "x", "n": 2}
    assert step_args(ToolCall("t", "[1, 2]")) == {"input": [1, 2]}


def test_only_text_starting_with_a_brace_or_bracket_is_read_as_json() -> None:
    # "42" and a leading space before an object are valid JSON, but the audit reads only text that starts with
    # "{" or "[": both stay text.
    assert step_args(ToolCall("t", "42")) == {"input": "42"}
    assert step_args(ToolCall("t", ' {"a": 1}')) == {"input": ' {"a": 1}'}


def test_text_that_only_looks_like_json_is_the_input() -> None:
    assert step_args(ToolCall("t", "{not json")) == {"input": "{not json"}


def test_no_arguments_are_no_members_and_other_values_the_input() -> None:
    assert step_args(ToolCall("t", None)) == {}
    assert step_args(ToolCall("t", {"a": 1})) == {"a": 1}
    assert step_args(ToolCall("t", [3])) == {"input": [3]}
