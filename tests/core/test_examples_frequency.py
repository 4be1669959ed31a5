"""The frequency rule when calls leave the window: fixed examples through ``LoopEngine.observe``, the expected
verdicts derived by hand from the rule (one signature at least ``frequency_limit`` times among the last ``window``
calls; incomplete evidence among those calls makes it ``uncertain``; a cycle of permanent failures skips hysteresis).

Every example uses window 5, frequency limit 3 and ``max_period`` 1, one tool, and never the same call twice in a row,
so the period rule (which needs consecutive repeats) never fires and every verdict is the frequency rule's.
"""

from __future__ import annotations

from typing import Any

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from tests.core._helpers import T0

A = {"q": "a"}


def _call(i: int, args: dict[str, Any], **kw: Any) -> ToolCall:
    kw.setdefault("result", "same")
    kw.setdefault("result_captured", True)
    return ToolCall("search", args, start=T0 + i, end=T0 + i + 0.5, **kw)


def _run(calls: list[dict[str, Any]], **config: Any) -> list[tuple[str, str, int | None, int | None]]:
    """(kind, rule, repetitions, cycle start) after each call; calls[i] holds ToolCall keywords besides the times."""
    engine = LoopEngine(LoopGuardConfig(window=5, frequency_limit=3, max_period=1, **config))
    state = engine.new_state()
    out = []
    for i, kw in enumerate(calls):
        v = engine.observe(state, _call(i, **kw)).verdict
        out.append((v.kind, v.rule, v.repetitions, v.cycle_start))
    return out


def _other(i: int) -> dict[str, Any]:
    return {"args": {"q": f"other {i}"}, "result": f"r{i}"}


W = ("working", "none", None, None)  # no repetition


def test_a_call_counted_again_after_its_first_repetition_left_the_window() -> None:
    # A B A C A D A: at call 4 the window (calls 0-4) holds A three times -> stuck, 3 repetitions from call 0.
    # Call 5 (D) pushes call 0 out: A twice in the window, D once -> working. Call 6 pushes call 1 (B) out and is
    # A again: the window is calls 2-6 with A at 2, 4 and 6 -> stuck again, 3 repetitions from call 2.
    calls = [{"args": A}, _other(1), {"args": A}, _other(3), {"args": A}, _other(5), {"args": A}]
    out = _run(calls)
    assert [o[0] for o in out] == ["working"] * 4 + ["stuck", "working", "stuck"]
    assert out[4][1:] == ("frequency", 3, 0)
    assert out[6][1:] == ("frequency", 3, 2)


def test_incomplete_evidence_leaves_with_its_call() -> None:
    # The first A has no captured result (incomplete evidence): at call 4 the three A's are uncertain. Once call 0
    # has left the window, the A's at 2, 4 and 6 all have their result: stuck.
    calls = [{"args": A, "result": None, "result_captured": False}, _other(1), {"args": A}, _other(3), {"args": A},
             _other(5), {"args": A}]
    out = _run(calls)
    assert out[4] == ("uncertain", "evidence", 3, 0)
    assert out[6] == ("stuck", "frequency", 3, 2)


def test_two_incomplete_calls_one_leaves_the_other_still_makes_it_uncertain() -> None:
    # A's at 0 and 2 lack their result. When call 0 leaves, the A at 2 is still among the three A's (2, 4, 6) of the
    # window: uncertain again, not stuck.
    missing = {"result": None, "result_captured": False}
    calls = [{"args": A, **missing}, _other(1), {"args": A, **missing}, _other(3), {"args": A}, _other(5),
             {"args": A}]
    out = _run(calls)
    assert out[4] == ("uncertain", "evidence", 3, 0)
    assert out[6] == ("uncertain", "evidence", 3, 2)


def test_a_cycle_becomes_one_of_permanent_failures_when_its_other_failure_leaves() -> None:
    # Hysteresis 2: a stuck verdict shows once the same cycle was stuck twice in a row, except a cycle of permanent
    # failures (every repeated call failed with a permanent error class), which shows at once. A's first call fails
    # with KeyError (not permanent, not retryable), the later ones with PermissionDenied (permanent, not retryable).
    # At call 4 the three A's include the KeyError: not permanent, first stuck of the cycle -> still working.
    # At call 6 the A's are 2, 4 and 6, all PermissionDenied: permanent -> stuck at once.
    def failing(error: str) -> dict[str, Any]:
        return {"args": A, "error": error, "result": None, "result_captured": False}

    calls = [failing("KeyError"), _other(1), failing("PermissionDenied"), _other(3), failing("PermissionDenied"),
             _other(5), failing("PermissionDenied")]
    out = _run(calls, hysteresis=2)
    assert out[4] == W
    assert out[6] == ("stuck", "frequency", 3, 2)
