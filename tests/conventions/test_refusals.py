"""A model refusal, per source that records one, and turns counted for every model call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.conventions.model_calls import Turn, TurnJudge, refused
from otel_loopguard.core.cost import Usage

CHAT_REFUSED = {"id": "c1", "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": None,
                                                     "refusal": "I can't help with that."}}]}
CHAT_ANSWERED = {"id": "c2", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "Paris", "refusal": None}}]}
RESPONSES_REFUSED = {"id": "r1", "output": [{"type": "message", "role": "assistant", "status": "completed",
                                             "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]}
GENAI_REFUSED = [{"role": "assistant", "finish_reason": "stop",
                  "parts": [{"type": "refusal", "content": "I can't help with that."}]}]


@pytest.mark.parametrize(("attrs", "expected"), [
    ({"gen_ai.response.finish_reasons": ("content_filter",)}, True),
    ({"llm.finish_reason": "refusal"}, True),
    ({"gen_ai.completion.0.refusal": "I can't help with that."}, True),
    ({"gen_ai.completion.1.refusal": "no"}, True),
    ({"gen_ai.completion.0.refusal": ""}, False),
    ({"output.value": json.dumps(CHAT_REFUSED)}, True),
    ({"output.value": json.dumps(CHAT_ANSWERED)}, False),
    ({"response_data": json.dumps({"message": {"role": "assistant", "refusal": "No."}})}, True),
    ({"response": json.dumps(RESPONSES_REFUSED)}, True),
    ({"gen_ai.output.messages": json.dumps(GENAI_REFUSED)}, True),
    ({"gen_ai.output.messages": GENAI_REFUSED}, True),
    ({"gen_ai.output.messages": json.dumps([{"role": "assistant", "finish_reason": "stop",
                                             "parts": [{"type": "text", "content": "the word \"refusal\""}]}])}, False),
    ({"gen_ai.output.messages": "not json \"refusal\""}, False),
    ({"gen_ai.response.finish_reasons": ("stop",)}, False),
])
def test_refusal_per_source(attrs: dict[str, Any], expected: bool) -> None:
    """Finish reasons, OpenLLMetry's refusal text, an OpenAI Chat or Responses body and a GenAI refusal part each
    say refused; an answer, a text merely quoting the word and unreadable JSON do not."""
    assert refused(attrs) is expected


def _turn(span_id: int, parent: int | None = None, response_id: str | None = None, usage: bool = False) -> Turn:
    """A model turn without tool calls (with usage on model m1 when asked)."""
    return Turn(span_id=span_id, parent_span_id=parent, start_ns=span_id, end_ns=span_id + 1, response_id=response_id,
                usage=("m1", Usage(input_tokens=1, output_tokens=1)) if usage else None)


def test_every_model_call_is_a_turn_once() -> None:
    """Four model spans: two plain calls without usage, one with usage, and a second span of the last call (the
    same response id): 3 turns."""
    judge = TurnJudge()
    for turn in (_turn(1), _turn(2), _turn(3, response_id="r3", usage=True), _turn(4, response_id="r3")):
        judge.add(turn)
    assert judge.calls == 3


def test_wrapping_model_span_counts_once() -> None:
    """A model span around another (ADK's call_llm around generate_content), inner one ending first: 1 turn."""
    judge = TurnJudge()
    judge.add(_turn(5, parent=9))
    judge.add(_turn(9))
    assert judge.calls == 1
