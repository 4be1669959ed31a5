"""The frequency rule when calls leave the window: fixed examples through ``LoopEngine.observe``, the expected
verdicts derived by hand from the rule (one signature at least ``frequency_limit`` times among the last ``window``
calls; incomplete evidence among those calls makes it ``uncertain``; a cycle of permanent failures skips hysteresis).

Every example uses window 5, frequency limit 3 and ``max_period`` 1, one tool, and never the same call twice in a row,
so the period rule (which needs consecutive repeats) never fires and every verdict is the frequency rule's.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from otel_loopguard.core.config import LoopGuardConfig, ToolSettings
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.errors import ConfigError
from tests.core._helpers import T0

A = {"q": "a"}


def _call(i: int, args: dict[str, Any], **kw: Any) -> ToolCall:
    kw.setdefault("result", "same")
    kw.setdefault("result_captured", True)
    return ToolCall("search", args, start=T0 + i, end=T0 + i + 0.5, **kw)


def _run(calls: list[dict[str, Any]], window: int = 5, **config: Any) -> list[tuple[str, str, int | None, int | None]]:
    """(kind, rule, repetitions, cycle start) after each call; calls[i] holds ToolCall keywords besides the times."""
    engine = LoopEngine(LoopGuardConfig(window=window, frequency_limit=3, max_period=1, **config))
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


def test_a_cycle_with_two_other_failures_is_not_permanent_while_one_is_in_the_window() -> None:
    # As above, but the A's at 0 and 2 both fail with KeyError. At call 6 the A's are 2 (KeyError), 4 and 6: not
    # all permanent, so hysteresis 2 holds the first stuck verdict of that cycle back (still working). At call 7
    # (A again) the window is calls 3-7 with A at 4, 6 and 7, all PermissionDenied: stuck at once, from call 4.
    def failing(error: str) -> dict[str, Any]:
        return {"args": A, "error": error, "result": None, "result_captured": False}

    calls = [failing("KeyError"), _other(1), failing("KeyError"), _other(3), failing("PermissionDenied"),
             _other(5), failing("PermissionDenied"), failing("PermissionDenied")]
    out = _run(calls, hysteresis=2)
    assert out[6] == W
    assert out[7] == ("stuck", "frequency", 3, 4)


def test_results_that_change_between_the_repeated_calls_are_progress() -> None:
    # A x A y A with A's results "r1", "r2", "r1": three A's in the window, but their results take two values, so
    # the evidence changed: working by the progress rule, not stuck. With "r1", "r2", "r3" likewise.
    for results in (["r1", "r2", "r1"], ["r1", "r2", "r3"]):
        calls = [{"args": A, "result": results[0]}, _other(1), {"args": A, "result": results[1]}, _other(3),
                 {"args": A, "result": results[2]}]
        assert _run(calls)[4] == ("working", "progress", 3, 0), results
    # The same result three times is stuck (the control).
    calls = [{"args": A, "result": "r1"}, _other(1), {"args": A, "result": "r1"}, _other(3), {"args": A, "result": "r1"}]
    assert _run(calls)[4] == ("stuck", "frequency", 3, 0)


def test_calls_of_one_fingerprint_but_another_signature_do_not_hide_a_frequent_call() -> None:
    # X1 and X2 differ only inside a nested object: the same top-level plain members ({"q": "a"}), so the same
    # fingerprint, but different signatures. Window 10, calls: X1 o X1 o X2 o X1. At call 6 the window holds X1 at
    # 0, 2 and 6: three calls of one signature -> stuck by frequency, 3 repetitions from call 0. X2 (call 4) is
    # another signature and counts for nothing.
    x1 = {"args": '{"q": "a", "f": {"x": 1}}'}
    x2 = {"args": '{"q": "a", "f": {"x": 2}}'}
    calls = [x1, _other(1), x1, _other(3), x2, _other(5), x1]
    out = _run(calls, window=10)
    assert [o[0] for o in out] == ["working"] * 6 + ["stuck"]
    assert out[6] == ("stuck", "frequency", 3, 0)


def test_counts_of_calls_that_left_the_window_are_freed() -> None:
    # Each query is asked three times, spaced so that at most two of its calls are ever in the window of 5 (calls
    # q x q x x q x x, q at 0, 2 and 5), then never again: the frequency rule counts the query's calls together (the
    # tool is frequent), and once all three have left the window nothing about that query may remain. Memory over
    # 1500 more queries must stay that of the window: allowed 64 KiB of growth, where a count kept per past query (a
    # small struct, a deque and a dict entry, several hundred bytes each) would grow by more than 1 MB.
    engine = LoopEngine(LoopGuardConfig(window=5, frequency_limit=3, max_period=1, max_steps=100_000))
    state = engine.new_state()
    step = 0

    def feed(queries: range) -> None:
        nonlocal step
        for q in queries:
            for is_query in (True, False, True, False, False, True, False, False):
                args = {"q": q} if is_query else {"other": step}
                engine.observe(state, _call(step, args, result=f"r{step}"))
                step += 1

    feed(range(300))  # warm up: caches and the window reach their steady size
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed(range(300, 1800))
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert state.window_size == 5 and state.verdict.kind == "working"
    assert after - before < 64 * 1024, after - before


def test_a_tool_frequency_limit_below_two_or_beyond_the_window_is_refused() -> None:
    # As at the top level, one call is not a repetition: a per-tool limit (or repetition count) of 1 would make every
    # call of that tool stuck, so it is a configuration error naming the setting; a per-tool limit larger than the
    # window (default 10) could never be reached.
    with pytest.raises(ConfigError, match=r"^tools.frequency_limit must be at least 2, got 1$"):
        ToolSettings(frequency_limit=1)
    with pytest.raises(ConfigError, match=r"^tools.min_repetitions must be at least 2, got 1$"):
        ToolSettings(min_repetitions=1)
    with pytest.raises(ConfigError, match=r"^tools.a.frequency_limit \(11\) cannot exceed window \(10\)$"):
        LoopGuardConfig(tools={"a": ToolSettings(frequency_limit=11)})
    assert LoopGuardConfig(tools={"a": ToolSettings(frequency_limit=10)}).tools["a"].frequency_limit == 10


def test_a_long_run_keeps_counting_as_calls_leave_the_window() -> None:
    # A o A o A o ... for 30 calls (A the same call, each o new), window 5: from call 4 on, every A call has three A's
    # in the window (itself and two calls back, four calls back) -> stuck by frequency, 3 repetitions starting four
    # calls earlier; every o call has a new signature, so nothing repeats at it, and its result is new to the window
    # -> working again, recovered.
    calls = [{"args": A} if i % 2 == 0 else _other(i) for i in range(30)]
    out = _run(calls)
    for i in range(4, 30, 2):
        assert out[i] == ("stuck", "frequency", 3, i - 4), (i, out[i])
    for i in range(5, 30, 2):
        assert out[i] == ("working", "recovered", None, None), (i, out[i])


def test_calls_with_empty_argument_text_are_counted_together() -> None:
    # Tool "t" with arguments "" (empty text) three times, "a" and "b" once, each call followed by a call of another
    # tool: t"" x t"a" x t"" x t"b" x t"". At call 8 the window (10) holds t"" three times (calls 0, 4, 8): stuck by
    # frequency, 3 repetitions from call 0.
    engine = LoopEngine(LoopGuardConfig(frequency_limit=3, max_period=1))
    state = engine.new_state()
    plan = [("t", ""), ("x", "1"), ("t", "a"), ("x", "2"), ("t", ""), ("x", "3"), ("t", "b"), ("x", "4"), ("t", "")]
    out = [engine.observe(state, ToolCall(tool, args, result="same", result_captured=True, start=T0 + i,
                                          end=T0 + i)).verdict for i, (tool, args) in enumerate(plan)]
    assert [v.kind for v in out] == ["working"] * 8 + ["stuck"]
    assert (out[8].rule, out[8].repetitions, out[8].cycle_start) == ("frequency", 3, 0)


def _interleaved(args: list[Any]) -> list[tuple[str, str, int | None, int | None]]:
    """Tool "t" with each of ``args``, each call followed by a new call of tool "x"; window 10, limit 3."""
    engine = LoopEngine(LoopGuardConfig(frequency_limit=3, max_period=1))
    state = engine.new_state()
    out = []
    step = 0
    for a in args:
        for tool, value in (("t", a), ("x", f"x{step}")):
            v = engine.observe(state, ToolCall(tool, value, result="same", result_captured=True, start=T0 + step,
                                               end=T0 + step)).verdict
            out.append((v.kind, v.rule, v.repetitions, v.cycle_start))
            step += 1
    return out


def test_nan_arguments_given_as_text_and_as_an_object_are_counted_together() -> None:
    # '{"x": NaN}' (JSON text with the non-standard NaN) and {"x": nan} (a dict) have one canonical form; with a
    # different call between them: text, dict, text at calls 0, 2 and 4 -> stuck by frequency at call 4, from 0.
    out = _interleaved(['{"x": NaN}', {"x": float("nan")}, '{"x": NaN}'])
    assert out[4] == ("stuck", "frequency", 3, 0)


def test_long_argument_texts_are_counted_together() -> None:
    # An argument text of 160 characters (longer than the 128 whose fingerprint is always taken as it is), three
    # times with other calls between: stuck by frequency at call 4, from call 0.
    text = '{"q": "' + "x" * 150 + '"}'
    assert len(text) > 128
    out = _interleaved([text, text, text])
    assert out[4] == ("stuck", "frequency", 3, 0)


def test_counts_of_tools_that_left_the_window_are_freed() -> None:
    # Every call is of a new tool: once a call has left the window (5 calls) nothing about its tool may remain in
    # the trace. The engine's own per-tool cache holds up to 4096 tools and is emptied when full, so memory is
    # compared at the same point of two of its cycles (100 tools into each): 4096 more tools may grow it by at most
    # 256 KiB (45 KB measured: dict resizes), where a count kept per past tool (a small struct and a deque, several
    # hundred bytes) would grow it by more than 1 MB.
    engine = LoopEngine(LoopGuardConfig(window=5, frequency_limit=3, max_period=1, max_steps=100_000))
    state = engine.new_state()

    def feed(tools: range) -> None:
        for i in tools:
            engine.observe(state, ToolCall(f"tool{i}", None, result="r", result_captured=True, start=T0 + i,
                                           end=T0 + i))

    feed(range(4096 + 100))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed(range(4096 + 100, 2 * 4096 + 100))
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert state.window_size == 5 and state.verdict.kind == "working"
    assert after - before < 256 * 1024, after - before
