"""``otel-loopguard audit`` on every judged fixture says what the scenario table says (derived by hand).

One test per manifest row: the expectation comes from ``tests/support/scenario_expectations.py`` (the scenario
table and the documented source differences), never from the product's output; the manifest's own count of
recorded tool calls cross-checks the expected step count.
"""

from __future__ import annotations

import json

import pytest

from otel_loopguard import cli
from tests.support.recorded_fixtures import NO_CONTENT_SWITCH_SOURCES
from tests.support.scenario_expectations import Row, expected, manifest_rows, opaque_calls

ROWS = manifest_rows()


def _audit(row: Row, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    status = cli.main(["audit", "--json", str(row.path)])
    captured = capsys.readouterr()
    assert captured.err == ""
    [report] = [json.loads(line) for line in captured.out.splitlines() if line.strip()]
    # --fail-on stuck (the default): exit 1 when the trace was stuck at any point.
    assert status == (1 if any(t["to"] == "stuck" for t in report["transitions"]) else 0)
    return report


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_audit_says_what_the_scenario_says(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    """Loops stuck with their period (nudge, then stop), pagination and healthy runs working, unrecorded content
    uncertain and never stuck, failures that end in a result never stuck."""
    want = expected(row.source, row.scenario)
    if opaque_calls(row.source, row.scenario):
        # Known only from finish reasons: one call per tool-calling turn, and each scripted turn asks for one call.
        assert want.steps == len(row.tool_calls), "the hand-derived count disagrees with the recording"
    elif "tool_calls_read_from" in row.row:
        # Model-client sources: the recording's own check says which calls its spans hold ("log records": none).
        readable = row.row["tool_calls_read_back"] if row.row["tool_calls_read_from"] == "spans" else []
        if row.source == "litellm_parent_span":
            # The user's span, overwritten call after call: what the check reads back is an earlier call's stale
            # function_call beside the final answer (fixtures README), not a call of its own.
            readable = []
        assert want.steps == len(readable), "the hand-derived count disagrees with the recording"
    else:
        assert want.steps == len(row.tool_calls), "the hand-derived count disagrees with the recording"
    want.check(_audit(row, capsys))


def test_every_scenario_of_every_source_is_judged() -> None:
    """Each judged source contributes its seven scenarios (ADK one more; a source without a content switch, Logfire's
    Agents SDK integration, all but no_content), so no row is silently missing."""
    by_source: dict[str, set[str]] = {}
    for row in ROWS:
        by_source.setdefault(row.source, set()).add(row.scenario)
    scenarios = {"same_call_loop", "ping_pong", "pagination", "healthy", "reordered_keys", "errors_then_success",
                 "no_content"}
    for source, seen in by_source.items():
        want = scenarios - {"no_content"} if source in NO_CONTENT_SWITCH_SOURCES else scenarios
        assert want <= seen <= want | {"parallel_calls"}, source


def _tokens(model_calls: int) -> int:
    # The scripted model reports input 120 + 40·turn and output 18 for its turn-th call (turn from 0).
    return sum(120 + 40 * turn + 18 for turn in range(model_calls))


# Sources that record no token usage at all (fixtures README): DSPy's instrumentation writes no token counts,
# AutoGen's native spans include no model call; LiteLLM's default mode keeps only the last call's usage on the
# user's span it overwrites.
_NO_USAGE = frozenset({"dspy_openinference", "autogen_native", "litellm_parent_span"})


@pytest.mark.parametrize("row", [r for r in ROWS if r.source not in _NO_USAGE], ids=lambda r: r.id)
def test_each_model_call_is_counted_once(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    """The tokens of the trace are those of its model calls, each counted once: a run's totals repeated on the agent
    or root span (strands, smolagents, Vercel AI SDK, Mastra), two spans of one call (the Anthropic SDK's own beside
    an instrumentation's, ADK's call_llm around generate_content) do not double them.

    Model calls: one per scripted call plus the final answer; where the framework's closing call ends the run
    (smolagents, DSPy) that call replaces the final answer; ADK's parallel_calls asks for both calls in one turn.
    """
    calls = len(row.tool_calls)
    if row.scenario == "parallel_calls":
        model_calls = 2
    elif row.source in ("smolagents_openinference", "smolagents_code_openinference"):
        model_calls = calls
    else:
        model_calls = calls + 1
    report = _audit(row, capsys)
    assert report.get("unpriced_tokens") == _tokens(model_calls), report
