"""OpenLIT's own shapes: a LangChain tool call's arguments as a Python dict's repr and its result as a ToolMessage's
repr (read as literals only, bounded, or as opaque text without per-call ids), and the calls a chat span asked for
joined by ``", "`` (read only when they split one per call)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard import cli
from otel_loopguard.conventions.envelopes import ENVELOPES, MAX_LITERAL_CHARS
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.unread import UnreadTrace
from tests.support.recorded_fixtures import OBS_SDK_FIXTURES


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _unwrap(name: str, value: Any) -> Any:
    return ENVELOPES[name].unwrap(value, _parse)


def test_a_python_dict_repr_is_read_as_its_literal() -> None:
    """``{'query': 'x'}`` is the JSON object it spells; JSON text, code and oversized text stay as they are."""
    assert json.loads(_unwrap("python_dict", "{'query': 'weather in Paris', 'n': 2}")) == {
        "query": "weather in Paris", "n": 2}
    assert _unwrap("python_dict", '{"query": "x"}') == '{"query": "x"}'
    code = "{'q': __import__('os').getcwd()}"
    assert _unwrap("python_dict", code) == code
    big = "{'q': '" + "x" * MAX_LITERAL_CHARS + "'}"
    assert _unwrap("python_dict", big) is big
    deep = "{'a': " + "[" * 5000 + "]" * 5000 + "}"
    assert _unwrap("python_dict", deep) == deep


def test_a_tool_message_repr_is_its_content_whatever_its_ids() -> None:
    """Two results of equal calls that differ only in their call ids (or a run id) read as the same content; a
    content that is no plain literal keeps the text without the ids."""
    first = "content='Paris: 18C, light rain.' name='search' tool_call_id='call_uvmWX5'"
    second = "content='Paris: 18C, light rain.' name='search' id='run-7f3a' tool_call_id='call_h6k9lo'"
    assert _unwrap("message_repr", first) == _unwrap("message_repr", second) == "Paris: 18C, light rain."
    listed_a = "content=[{'type': 'text', 'text': 'r'}] name='search' tool_call_id='call_a'"
    listed_b = "content=[{'type': 'text', 'text': 'r'}] name='search' tool_call_id='call_b'"
    assert _unwrap("message_repr", listed_a) == _unwrap("message_repr", listed_b)
    assert "call_" not in _unwrap("message_repr", listed_a)
    assert _unwrap("message_repr", "content=plain text") == "content=plain text"


def _calls(attrs: dict[str, Any]) -> tuple[Any, ...]:
    turn = Extractor().model_turn({"gen_ai.operation.name": "chat", **attrs}, "chat", 1, None, 0, 10)
    assert turn is not None
    return turn.calls


def test_calls_a_chat_span_asked_for_are_split_one_per_call() -> None:
    """One call: its arguments as they are; two calls: split as consecutive JSON texts; arguments that do not split
    one per call are given to no call."""
    assert _calls({"gen_ai.tool.name": "search", "gen_ai.tool.call.id": "call_1",
                   "gen_ai.tool.args": '{"query": "a, b"}'}) == (("call_1", "search", '{"query": "a, b"}'),)
    assert _calls({"gen_ai.tool.name": "search, read", "gen_ai.tool.call.id": "call_1, call_2",
                   "gen_ai.tool.args": '{"query": "a, b"}, {"doc_id": "d1"}'}) == (
        ("call_1", "search", '{"query": "a, b"}'), ("call_2", "read", '{"doc_id": "d1"}'))
    assert _calls({"gen_ai.tool.name": "search, read", "gen_ai.tool.args": '{"query": "a"}'}) == (
        (None, "search", None), (None, "read", None))


def test_arguments_without_results_are_named_as_evidence() -> None:
    """A chat span with OpenLIT's tool arguments and no messages: the note names ``gen_ai.tool.args``."""
    trace = UnreadTrace()
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.tool.name": "search", "gen_ai.tool.args": "{}",
             "gen_ai.response.finish_reasons": ("tool_calls",)}
    trace.model(attrs)
    trace.derived(1)
    [cause] = trace.causes()
    assert (cause.reason, cause.keys) == ("calls_without_content", ("gen_ai.tool.args",))


_TEXT = st.one_of(st.text(max_size=60), st.sampled_from([
    "{'", "{'a': ", "content=", "content='x", "content='x' tool_call_id='", "content=[", "{'a': {'b': [1, (2,)]}}",
    '{"a": 1}, ', '{"a": 1}, {"b"', ", , ", "content=b'x' tool_call_id='y'"]))


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT, _TEXT)
def test_odd_values_never_raise(names: str, args: str, result: str) -> None:
    """Whatever the repr-like text or the joined names and arguments hold, reading never raises, and every call read
    has a tool name."""
    for name in ("python_dict", "message_repr"):
        _unwrap(name, args)
        _unwrap(name, result)
    calls = _calls({"gen_ai.tool.name": names, "gen_ai.tool.args": args, "gen_ai.tool.call.id": result})
    assert all(isinstance(tool, str) for _, tool, _ in calls)


def test_openlit_content_off_compares_the_arguments_without_results(capsys: pytest.CaptureFixture[str]) -> None:
    """OpenLIT with capture_message_content=False, recorded: five chat spans keep only the calls' names, ids and
    arguments; the five equal searches are compared (one signature with the query) but have no result: uncertain
    (rule evidence) at the third, and the note names gen_ai.tool.args for the five spans."""
    capsys.readouterr()
    cli.main(["audit", "--json", str(OBS_SDK_FIXTURES / "openlit__no_content.json")])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert (report["steps_used"], report["verdict"]) == (5, "uncertain")
    assert [(t["step"], t["to"], t["rule"]) for t in report["transitions"]] == [(2, "uncertain", "evidence")]
    assert report["violations"] == ["repeat_loop:search|query=weather in Paris@0"]
    assert [(u["reason"], u["keys"], u["spans"]) for u in report["unread"]] == [
        ("calls_without_content", ["gen_ai.tool.args"], 5)]
