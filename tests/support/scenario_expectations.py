"""What the product must say about each recorded fixture, derived by hand from the scenario table.

The scenarios (``tests/fixtures/generate/pydantic_ai_runs.py`` ``SCENARIOS``, played by every source) judged with
the default configuration (window 10, max_period 3, min_repetitions 3, frequency_limit 3, stop_after 1):

* ``same_call_loop``: ``search(query="weather in Paris")`` five times, same result. The third call (step 2) makes
  three repetitions of a period-1 cycle: ``stuck`` (rule period), nudge; the fourth is still stuck: stop. Final
  ``stuck``, period 1.
* ``reordered_keys``: ``lookup(city, units)`` four times, keys in alternating order, same result: the same call, so
  as ``same_call_loop``: stuck at step 2 (period 1), nudge at 2, stop at 3.
* ``ping_pong``: ``search(x)``, ``read(d1)`` three times. The third ``search`` (step 4) is the third occurrence of
  one call in the window: ``stuck`` (rule frequency), nudge; step 5 completes three cycles of period 2: stop. Final
  ``stuck``, period 2.
* ``pagination``: ``fetch_page`` with four different cursors, different rows: no repetition, no transition.
* ``healthy``: four different tools: no transition.
* ``errors_then_success``: ``get_quote(ACME)`` fails twice, then answers: a repetition whose evidence changes
  (a failure is never progress, the third call's result is): never ``stuck``, no intervention.
* ``no_content``: ``same_call_loop`` with content capture off: the repetition at step 2 lacks evidence:
  ``uncertain`` (rule evidence), never ``stuck``, no intervention.
* ``parallel_calls`` (ADK only): ``search`` and ``read`` in one turn: two calls, no transition (the
  ``execute_tool (merged)`` span after them is not a call).

Source differences, from the fixtures README:

* smolagents and DSPy ReAct end every run with their own ``final_answer`` / ``finish`` call: one more step after the
  scenario's; what the scenario's calls caused must still be in the trace's transitions and interventions (the final
  verdict is the one after the closing call).
* AutoGen's native spans never record arguments or results: calls differ by tool name only, so a tool called a
  third time is a repetition without evidence: ``uncertain`` where the scenario repeats (step 2; ping_pong at step
  4, the third ``search``; pagination and errors_then_success at step 2, the third ``fetch_page`` / ``get_quote``),
  never ``stuck``; ``healthy`` has four different tools: no transition.
* Applications instrumented only at the model client (``otlp/model_spans``): the calls are read from the model
  spans' messages, so with content recorded on the spans every scenario is as above; with content off, or written
  to log records instead of spans (openai-v2 and genai-openai ``EVENT_ONLY``, openai-v2's older event format), or
  overwritten on the user's span (LiteLLM's default), no call can be read: 0 steps, no transition, and the trace
  says so (unread reason ``no_tool_calls``; google-genai's chats with content off too: Gemini's finish reason is
  ``STOP`` after a function call as after text) -- unless the model spans keep their finish reasons (every source but
  the anthropic SDK's own spans, OpenLLMetry before 0.55 and LiteLLM): a finish reason naming tool calls says one
  call happened in that turn, so each tool-calling turn is one call that cannot be compared (no name, no
  arguments, no result). All such calls look alike: the third (step 2) is a repetition without evidence,
  ``uncertain`` (rule evidence), whatever the scenario, and the trace says why (unread reason
  ``calls_without_content``).
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.recorded_fixtures import (
    AUDIT_ONLY_SOURCES,
    FIXTURE_DIRS,
    JUDGED_SOURCES,
    MODEL_SPAN_SOURCES,
    OBS_MODEL_SPAN_SOURCES,
)

#: Sources whose runs end with a call of the framework's own (smolagents final_answer, DSPy finish).
CLOSING_CALL_SOURCES = frozenset({"smolagents_openinference", "smolagents_code_openinference", "dspy_openinference"})
#: Sources that never record a call's arguments or results.
NO_CONTENT_SOURCES = frozenset({"autogen_native"})
#: Model-client sources whose spans never hold the messages (content in log records, or overwritten).
UNREADABLE_SOURCES = frozenset({"openai_v2_event", "openai_genai_event", "openai_v2_legacy", "litellm_parent_span"})
#: Model-client sources whose model spans keep ``gen_ai.response.finish_reasons`` / ``llm.finish_reason`` without
#: content (checked in the recorded files: the others record no finish reason then).
FINISH_REASON_SOURCES = frozenset({
    "anthropic_genai", "anthropic_openinference", "anthropic_traceloop", "openai_genai_event", "openai_genai_span",
    "openai_openinference", "openai_traceloop", "openai_v2_event", "openai_v2_legacy", "openai_v2_span",
})


#: Sources that record no tool or model call at all (Haystack 3 under OpenInference: two CHAIN spans): every
#: scenario reads as no call, with the note no_tool_calls.
NOTHING_READ_SOURCES = frozenset({"haystack_openinference"})
#: Sources whose model spans record a placeholder for every output (Haystack 2 under OpenLLMetry:
#: ``gen_ai.completion.0.content = "replies"``, the output's name) and no tool call: no call is read, and the model
#: turns look alike, so the third is a repetition without evidence (uncertain), with the note no_tool_calls.
PLACEHOLDER_OUTPUT_SOURCES = frozenset({"haystack_openllmetry"})
#: Model-client sources whose model spans keep the calls' names and arguments with content off, never their results
#: (OpenLIT's gen_ai.tool.name / gen_ai.tool.args): the repetition lacks evidence, and a note says so.
ARGUMENTS_ONLY_SOURCES = frozenset({"openlit"})


def opaque_calls(source: str, scenario: str) -> bool:
    """Whether the fixture's calls are known only from finish reasons (one call per tool-calling turn, no content)."""
    return source in FINISH_REASON_SOURCES and (scenario == "no_content" or source in UNREADABLE_SOURCES)


@dataclass(frozen=True)
class Expected:
    """What ``audit --json`` (and the processor) must report for one fixture.

    Attributes:
        steps: tool calls of the trace.
        transitions: (step, to, rule) in order; with ``exact`` False they must be the first transitions.
        interventions: (step, action) in order.
        final: the final verdict, or None when not asserted (a closing call follows the scenario).
        period: the final stuck period, when ``final`` is stuck.
        exact: whether ``transitions`` are all of them.
        unread: the unread reasons the trace must report (and no other).
    """

    steps: int
    transitions: tuple[tuple[int, str, str], ...]
    interventions: tuple[tuple[int, str], ...]
    final: frozenset[str] | None
    period: int | None = None
    exact: bool = True
    unread: tuple[str, ...] = ()

    def check(self, report: dict[str, Any]) -> None:
        """Assert an ``audit --json`` object (or the same fields from the processor) matches."""
        transitions = [(t["step"], t["to"], t["rule"]) for t in report["transitions"]]
        interventions = [(i["step"], i["action"]) for i in report["interventions"]]
        assert report["steps_used"] == self.steps, report
        if self.exact:
            assert transitions == list(self.transitions), report
        else:
            assert transitions[: len(self.transitions)] == list(self.transitions), report
        assert interventions == list(self.interventions), report
        if self.final is not None:
            assert report["verdict"] in self.final, report
            if self.period is not None:
                assert report["period"] == self.period, report
        if "stuck" not in {t for _, t, _ in self.transitions}:
            assert "stuck" not in {t["to"] for t in report["transitions"]}, report
        assert [u["reason"] for u in report.get("unread", [])] == list(self.unread), report


_STUCK = frozenset({"stuck"})
_WORKING = frozenset({"working"})

_BASE: dict[str, Expected] = {
    "same_call_loop": Expected(5, ((2, "stuck", "period"),), ((2, "nudge"), (3, "stop")), _STUCK, 1),
    "reordered_keys": Expected(4, ((2, "stuck", "period"),), ((2, "nudge"), (3, "stop")), _STUCK, 1),
    "ping_pong": Expected(6, ((4, "stuck", "frequency"),), ((4, "nudge"), (5, "stop")), _STUCK, 2),
    "pagination": Expected(4, (), (), _WORKING),
    "healthy": Expected(4, (), (), _WORKING),
    "errors_then_success": Expected(3, (), (), frozenset({"working", "retrying"}), exact=False),
    "no_content": Expected(5, ((2, "uncertain", "evidence"),), (), frozenset({"uncertain"})),
    "parallel_calls": Expected(2, (), (), _WORKING),
    # BeeAI's own cycle checker withdraws the repeated tool: one call, then the answer.
    "same_call_guarded": Expected(1, (), (), _WORKING),
}

# Without content, the step at which a tool is called for the third time (see the module docstring).
_NO_CONTENT_REPEAT = {"same_call_loop": 2, "reordered_keys": 2, "ping_pong": 4, "pagination": 2,
                      "errors_then_success": 2, "no_content": 2}


_NOTHING_READ = Expected(0, (), (), _WORKING, unread=("no_tool_calls",))


def expected(source: str, scenario: str) -> Expected:
    """The expectation for one fixture."""
    base = _BASE[scenario]
    if opaque_calls(source, scenario):
        # Every scenario has at least three calls: the third is the first repetition, without evidence.
        return Expected(base.steps, ((2, "uncertain", "evidence"),), (), frozenset({"uncertain"}),
                        unread=("calls_without_content",))
    if source in NOTHING_READ_SOURCES:
        return _NOTHING_READ
    if source in PLACEHOLDER_OUTPUT_SOURCES:
        return Expected(0, ((2, "uncertain", "evidence"),), (), frozenset({"uncertain"}), unread=("no_tool_calls",))
    if source in ARGUMENTS_ONLY_SOURCES and scenario == "no_content":
        return Expected(base.steps, base.transitions, (), base.final, unread=("calls_without_content",))
    model_spans_only = source in MODEL_SPAN_SOURCES or source in OBS_MODEL_SPAN_SOURCES
    if source in UNREADABLE_SOURCES or (model_spans_only and scenario == "no_content"):
        return _NOTHING_READ
    if source in NO_CONTENT_SOURCES:
        step = _NO_CONTENT_REPEAT.get(scenario)
        if step is None:
            return base
        return Expected(base.steps, ((step, "uncertain", "evidence"),), (), frozenset({"uncertain"}))
    if source in CLOSING_CALL_SOURCES:
        return Expected(base.steps + 1, base.transitions, base.interventions, None, exact=False)
    return base


def scripted_table() -> ModuleType:
    """``tests/fixtures/generate/pydantic_ai_runs.py``: the scenario table and the tools every non-LangGraph
    generator plays (imported without its framework)."""
    generate = str(Path(__file__).resolve().parents[1] / "fixtures" / "generate")
    sys.path.insert(0, generate)
    try:
        return importlib.import_module("pydantic_ai_runs")
    finally:
        sys.path.remove(generate)


@dataclass(frozen=True)
class Row:
    """One manifest row of a judged source."""

    path: Path
    source: str
    scenario: str
    tool_calls: tuple[str, ...]
    row: dict[str, Any]

    @property
    def id(self) -> str:
        return self.path.stem


def manifest_rows(sources: tuple[str, ...] = JUDGED_SOURCES + AUDIT_ONLY_SOURCES) -> list[Row]:
    """The manifest rows of the judged sources (those judged by ``audit`` only included), over every folder."""
    rows = []
    for folder in FIXTURE_DIRS:
        for manifest in sorted(folder.glob("MANIFEST-*.json")):
            for row in json.loads(manifest.read_text()):
                if row["source"] in sources:
                    rows.append(Row(folder / row["file"], row["source"], row["scenario"], tuple(row["tool_calls"]),
                                    row))
    return sorted(rows, key=lambda r: (str(r.path.parent), r.path.name))
