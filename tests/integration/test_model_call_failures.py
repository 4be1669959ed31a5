"""A failed tool call that only the model's messages record (Anthropic ``tool_result`` with ``"is_error": true``)
is read as a failed call by every path: processor, ``serve``, ``audit`` and ``calibrate``.

The two fixtures were recorded from the real packages (``tests/fixtures/generate/model_spans_runs.py``): the
scripted agent calls ``get_quote(ACME)`` three times; the first two results are ``tool_result`` blocks with
``"is_error": true`` and the text ``Error: RateLimitError: 429 Too Many Requests: retry after 1s``, the third is
``ACME: 101.5 USD``. So each trace has 3 derived tool calls, 2 of them failed (read by eye from the JSON files).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.core.calibrate import replay_judge
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from tests.support.three_paths import audit_reports, processor_points, serve_reports

MODEL_SPANS = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "model_spans"
FIXTURES = [MODEL_SPANS / "anthropic_openinference__errors_then_success.json",
            MODEL_SPANS / "anthropic_traceloop_0_53__errors_then_success.json"]
#: (tool calls, failed calls) of each fixture's one trace, counted by hand (module docstring).
EXPECTED = (3, 2)


@pytest.mark.parametrize("reports", [audit_reports, serve_reports], ids=["audit", "serve"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_reports_count_the_failed_calls(path: Path, reports: Callable[[Path], list[Any]]) -> None:
    """``audit``'s and ``serve``'s report read the two ``is_error`` results as failed calls of the trace's three."""
    [report] = reports(path)
    assert (report.steps_used, report.failed_calls) == EXPECTED


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_calibrate_counts_the_failed_calls(path: Path) -> None:
    """``calibrate`` replays the trace with the two ``is_error`` results as failed calls."""
    config = LoopGuardConfig()
    [trace] = read_traces([(str(path), None)], config).traces
    judge = replay_judge(trace, LoopEngine(config))
    assert (judge.steps, judge.failed_calls) == EXPECTED


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_processor_counts_the_failed_calls(path: Path) -> None:
    """The processor's ``loopguard.task.tool_errors`` for the replayed trace is 2 of 3 tool calls."""
    [calls] = processor_points(path, "loopguard.task.tool_calls")
    [errors] = processor_points(path, "loopguard.task.tool_errors")
    assert (calls.sum, errors.sum) == EXPECTED
