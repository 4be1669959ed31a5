"""The scripted OpenAI-compatible server the fixture generators share (``tests/fixtures/generate/scripted_openai.py``)
answers over real HTTP on 127.0.0.1 exactly as the scenario table says, whichever API a framework uses."""

from __future__ import annotations

import importlib
import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

GENERATE = Path(__file__).resolve().parents[1] / "fixtures" / "generate"


@pytest.fixture(scope="module")
def scripted() -> Iterator[ModuleType]:
    """The module, imported the way the generators import it (their folder first on the path)."""
    sys.path.insert(0, str(GENERATE))
    try:
        yield importlib.import_module("scripted_openai")
    finally:
        sys.path.remove(str(GENERATE))


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers["Content-Type"], response.read()


def test_the_scenario_server_answers_each_turn_with_its_next_call_then_the_final_text(scripted: ModuleType) -> None:
    """Scenario same_call_loop (five `search` calls): the Responses API with two function calls in the input gets
    the third call (`call_2`); Chat Completions with five assistant messages gets the final text, finish 'stop'."""
    scenario = next(s for s in sys.modules["pydantic_ai_runs"].SCENARIOS if s.name == "same_call_loop")
    with scripted.ScriptedChatServer(scenario) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        calls = [{"type": "function_call", "call_id": f"call_{i}"} for i in range(2)]
        kind, body = _post(server.base_url + "/responses", {"input": [{"role": "user"}, *calls]})
        [output] = json.loads(body)["output"]
        assert kind == "application/json"
        assert (output["type"], output["call_id"], output["name"]) == ("function_call", "call_2", "search")
        assert json.loads(output["arguments"]) == {"query": "weather in Paris"}
        messages = [{"role": "user"}] + [{"role": "assistant"}, {"role": "tool"}] * 5
        [choice] = json.loads(_post(server.base_url + "/chat/completions", {"messages": messages})[1])["choices"]
        assert (choice["finish_reason"], choice["message"]["content"]) == ("stop", scenario.final)
        assert server.requests == 2


def test_a_subclass_scripts_its_own_answers_and_streams(scripted: ModuleType) -> None:
    """A subclass answering with an event stream: two chunks arrive as two `data:` events and `data: [DONE]`."""

    class Streaming(scripted.ScriptedOpenAIServer):  # type: ignore[name-defined,misc]
        def answer(self, path: str, request: dict[str, Any]) -> tuple[str, bytes]:
            return "text/event-stream", scripted.event_stream([{"n": 1}, {"n": 2}])

    with Streaming() as server:
        kind, body = _post(server.base_url + "/chat/completions", {"stream": True})
    assert kind == "text/event-stream"
    assert body.decode() == 'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'
