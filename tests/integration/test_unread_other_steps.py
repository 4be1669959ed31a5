"""A trace read through hand-offs, sub-agent invocations or model turns gets no ``no_tool_calls`` note, in the
processor (counter ``loopguard.spans.unread``), ``serve`` and ``audit`` alike; tools offered or model turns without
their input keep it.

Expectations, read by eye from the recorded files:

* ``openai_agents_openinference__chat_repeat``: four OpenInference LLM spans, each with ``llm.input_messages.*``
  and no ``llm.tools.*`` (a chat-only agent), judged as model turns: no note;
* ``adk_openinference__loop_repeat``: AGENT spans ``writer_agent``/``critic_agent`` under ``review_loop``, no model
  span and no tool definition, judged as sub-agent invocations: no note;
* ``haystack_openllmetry__healthy``: model spans with only ``gen_ai.completion.0.content = "replies"`` (no input
  recorded), so their turns say too little: ``no_tool_calls``;
* ``litellm_parent_span__healthy``: its model span offers ``get_quote`` (``llm.request.functions.0.name``) and its
  final answer is a model turn with its input: tool calls happened unread, ``no_tool_calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.three_paths import audit_reports, processor_points, serve_reports

OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
#: fixture -> the unread reasons of its one trace (module docstring).
CASES = {
    "agents/openai_agents_openinference__chat_repeat.json": [],
    "agents/adk_openinference__loop_repeat.json": [],
    "obs_sdk/haystack_openllmetry__healthy.json": ["no_tool_calls"],
    "model_spans/litellm_parent_span__healthy.json": ["no_tool_calls"],
}
PARAMS = pytest.mark.parametrize(("name", "reasons"), CASES.items(), ids=lambda v: str(v).rsplit("/", 1)[-1])


@pytest.mark.parametrize("reports", [audit_reports, serve_reports], ids=["audit", "serve"])
@PARAMS
def test_reports(name: str, reasons: list[str], reports: Callable[[Path], list[Any]]) -> None:
    """``audit``'s and ``serve``'s report of the trace carry exactly the expected unread reasons."""
    [report] = reports(OTLP / name)
    assert [u["reason"] for u in report.unread or ()] == reasons


@PARAMS
def test_processor(name: str, reasons: list[str]) -> None:
    """The processor counts ``loopguard.spans.unread`` for exactly the expected reasons."""
    points = processor_points(OTLP / name, "loopguard.spans.unread")
    assert sorted({str(p.attributes["loopguard.unread.reason"]) for p in points}) == reasons
