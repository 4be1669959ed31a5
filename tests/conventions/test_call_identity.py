"""Call identity: a model's call id joins a call with its result, but is not an identity when it repeats across model
turns or has the shape ``<tool>_<n>`` (Gemini's chats synthesise ``search_0`` on every turn).

Six turns that each ask for ``search(query="weather in Paris")`` as ``search_0`` and get the same result are six
calls, the same call six times: ``stuck`` with period 1 (first at the third call, step 2). Joined by call id they
would be one call, and the loop would read as working.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard import cli
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.model_calls import Turn, TurnJudge, by_occurrence, synthetic_id
from otel_loopguard.conventions.names import UNREAD_TOOL
from otel_loopguard.conventions.unread import UnreadTrace
from otel_loopguard.core.cost import Usage
from tests.support.chat_traces import repeated_id_chat

MS = 1_000_000


def test_a_call_id_repeated_on_every_turn_does_not_merge_the_calls(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seven turns, six of them asking for search as search_0 (the last answers): six calls, stuck (period 1)."""
    path = tmp_path / "chat.json"
    repeated_id_chat(path, 6)
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert report["steps_used"] == 6
    assert [(t["step"], t["to"], t["rule"]) for t in report["transitions"]] == [(2, "stuck", "period")]
    assert report["verdict"] == "stuck" and report["period"] == 1


def _turn(span_id: int, start: int, end: int, calls=(), results=None, response_id=None) -> Turn:
    return Turn(span_id, None, start * MS, end * MS, response_id, (None, Usage(input_tokens=1, output_tokens=1)),
                tuple(calls), None if results is None else tuple(results))


def test_an_id_repeated_by_another_model_turn_is_a_new_call() -> None:
    """An opaque id asked for again by a later, separate model call is a second call; its result is the second
    occurrence of that id in the next input."""
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[("abc", "search", "{}")], results=[]))
    first = judge.add(_turn(2, 20, 30, calls=[("abc", "search", "{}")], results=[("abc", "r1")]))
    second = judge.add(_turn(3, 40, 50, results=by_occurrence([("abc", "r1"), ("abc", "r2")])))
    assert [s.call.result for s in first + second if s.call is not None] == ["r1", "r2"]


def test_two_spans_of_one_model_call_still_ask_once() -> None:
    """The same opaque id on two spans of one model call (same response id, or overlapping spans) is one call."""
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[("abc", "search", "{}")], results=[], response_id="r1"))
    judge.add(_turn(2, 1, 9, calls=[("abc", "search", "{}")], results=[]))
    assert judge.pending == 1


def test_a_tool_name_and_counter_is_never_an_identity() -> None:
    """``search_0`` on two overlapping spans without a response id: two calls (the id is not used to merge them);
    with one response id, the response's call index says they are one."""
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[("search_0", "search", "{}")], results=[]))
    judge.add(_turn(2, 1, 9, calls=[("search_0", "search", "{}")], results=[]))
    assert judge.pending == 2
    judge = TurnJudge()
    judge.add(_turn(1, 0, 10, calls=[("search_0", "search", "{}")], results=[], response_id="r1"))
    judge.add(_turn(2, 1, 9, calls=[("search_0", "search", "{}")], results=[], response_id="r1"))
    assert judge.pending == 1
    assert synthetic_id("search_0") and synthetic_id("get_weather_12")
    assert not synthetic_id("call_uvmWX5DjwaYuQiZRbu5m3aM4") and not synthetic_id("toolu_01A09q90qw90lq917835lq9")


_ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=40),
    st.sampled_from(['["tool_calls"]', "[", '{"message": 1}', '{"messages": [1, {"role": "tool"}]}',
                     '{"choices": [{"message": {"tool_calls": [{"function": "x"}, 3]}}]}', "tool_use"]),
    st.lists(st.one_of(st.text(max_size=10), st.integers(), st.none()), max_size=4),
)
_KEYS = ("gen_ai.response.finish_reasons", "llm.finish_reason", "request_data", "response_data",
         "langfuse.observation.input", "langfuse.observation.output", "mlflow.spanInputs", "mlflow.spanOutputs")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _ODD_VALUES, max_size=6),
       st.sampled_from([{"gen_ai.operation.name": "chat"}, {"langfuse.observation.type": "generation"},
                        {"mlflow.spanType": '"CHAT_MODEL"'}]))
def test_odd_values_in_the_new_keys_never_raise(values: dict, marker: dict) -> None:
    """Whatever the SDK keys and finish reasons hold (broken JSON, numbers, lists of anything), a model span is
    read without raising, and at most one call that cannot be compared is derived from it."""
    attrs = {**marker, **values}
    turn = Extractor().model_turn(attrs, "chat", 1, None, 0, 10)
    assert turn is not None
    assert all(isinstance(name, str) for _, name, _ in turn.calls)
    opaque = [call for call in turn.calls if call[1] == UNREAD_TOOL]
    assert not opaque or turn.calls == ((None, UNREAD_TOOL, None),)
    trace = UnreadTrace()
    trace.model(attrs)
    trace.causes()
