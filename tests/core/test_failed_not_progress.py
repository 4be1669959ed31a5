"""A failed call is never progress, and loopguard's own nudge text is not task evidence."""

from __future__ import annotations

from otel_loopguard import LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.harness import NUDGE_MARKER


def _kinds(calls: list[ToolCall]) -> list[str]:
    engine = LoopEngine(LoopGuardConfig())
    state = engine.new_state()
    return [engine.observe(state, call, 0.0).verdict.kind for call in calls]


def test_failure_after_identical_results_keeps_the_loop_stuck() -> None:
    """Same result twice then a failure of the same call: the failure does not count as a change of evidence."""
    ok = ToolCall("search", {"q": "x"}, result="r", result_captured=True)
    failed = ToolCall("search", {"q": "x"}, error="ValueError")
    assert _kinds([ok, ok, failed, failed]) == ["working", "working", "stuck", "stuck"]


def test_success_after_failures_is_progress() -> None:
    """Failures then a success of the same call: the success changes the evidence."""
    failed = ToolCall("search", {"q": "x"}, error="ValueError")
    ok = ToolCall("search", {"q": "x"}, result="r", result_captured=True)
    assert _kinds([failed, failed, ok]) == ["working", "working", "working"]


def test_nudge_text_in_a_result_is_not_progress() -> None:
    """A result that only gained loopguard's nudge still counts as the same result."""
    plain = ToolCall("search", {"q": "x"}, result="r", result_captured=True)
    nudged = ToolCall("search", {"q": "x"}, result="r" + NUDGE_MARKER + "You have ...", result_captured=True)
    assert _kinds([plain, plain, nudged, plain]) == ["working", "working", "stuck", "stuck"]
