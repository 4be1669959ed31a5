"""The period rule with cycles longer than one call: fixed examples through ``LoopEngine.observe``, the expected
verdicts derived by hand from the rule (the shortest cycle the end of the window repeats at least ``min_repetitions``
times, the largest ``min_repetitions`` of the cycle's tools; a cycle of exempt tools only is never judged).

The frequency limit is set to 10 (the window) so the frequency rule never fires first: every verdict here is the
period rule's (or none).
"""

from __future__ import annotations

from typing import Any

from otel_loopguard.core.config import LoopGuardConfig, ToolSettings
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.signature import NUDGE_MARKER
from tests.core._helpers import T0


def _observe(calls: list[ToolCall], **config: Any) -> list[tuple[str, str, int | None, int | None, int | None]]:
    """(kind, rule, period, repetitions, cycle start) after each call."""
    engine = LoopEngine(LoopGuardConfig(frequency_limit=10, **config))
    state = engine.new_state()
    out = []
    for c in calls:
        v = engine.observe(state, c).verdict
        out.append((v.kind, v.rule, v.period, v.repetitions, v.cycle_start))
    return out


def _calls(spec: str, results: dict[int, Any] | None = None, **kw: Any) -> list[ToolCall]:
    """One call per letter: tool = the letter, arguments {"q": letter}, result "same" unless results[i] says."""
    results = results or {}
    out = []
    for i, letter in enumerate(spec):
        res = results.get(i, "same")
        captured = res is not None
        out.append(ToolCall(letter, {"q": letter}, result=res, result_captured=captured, start=T0 + i,
                            end=T0 + i + 0.5, **kw))
    return out


WORKING = ("working", "none", None, None, None)


def test_a_cycle_with_one_exempt_tool_is_still_judged_whichever_tool_ends_it() -> None:
    # Tool "a" is exempt, "b" is not: a cycle (a b) holds a tool that is judged, so three cycles are stuck. After
    # "bababa" (ending on a) and after "ababab" (ending on b): period 2, 3 repetitions from call 0.
    tools = {"a": ToolSettings(exempt=True)}
    assert _observe(_calls("bababa"), tools=tools)[5] == ("stuck", "period", 2, 3, 0)
    assert _observe(_calls("ababab"), tools=tools)[5] == ("stuck", "period", 2, 3, 0)
    # Both exempt: never judged.
    both = {"a": ToolSettings(exempt=True), "b": ToolSettings(exempt=True)}
    assert _observe(_calls("ababab"), tools=both)[5] == WORKING


def test_only_the_cycles_tools_set_the_repetitions_a_cycle_needs() -> None:
    # Tool "z" needs 9 repetitions, but it is not in the cycle (a b): the first two calls of the window are z's,
    # the cycle's tools need the default 3. "zzababab": the last six calls are three cycles of (a b) -> stuck at
    # call 7, period 2, 3 repetitions from call 2.
    tools = {"z": ToolSettings(min_repetitions=9)}
    calls = [ToolCall("z", {"n": i}, result=f"r{i}", result_captured=True, start=T0 + i, end=T0 + i) for i in range(2)]
    calls += _calls("ababab")
    assert _observe(calls, tools=tools)[7] == ("stuck", "period", 2, 3, 2)
    # And a cycle tool with a higher need is obeyed: "b" needs 4, so three cycles are not enough, four are.
    tools = {"b": ToolSettings(min_repetitions=4)}
    out = _observe(_calls("abababab"), tools=tools)
    assert out[5] == WORKING
    assert out[7] == ("stuck", "period", 2, 4, 0)


def test_a_short_repeat_that_is_not_enough_does_not_hide_a_longer_cycle() -> None:
    # "baabaabaa": the last two calls are equal (a a), a period-1 run of 2 calls, too short for 3 repetitions; the
    # last nine calls are three cycles of (b a a): stuck by period 3 at call 8, 3 repetitions from call 0.
    out = _observe(_calls("baabaabaa"))
    assert out[8] == ("stuck", "period", 3, 3, 0)


def test_missing_evidence_inside_the_last_cycles_of_a_longer_period_is_uncertain() -> None:
    # "ababab" with no result recorded for call 3 (a "b"): the verdict rests on the last three cycles, calls 0-5,
    # which include call 3, so the evidence is incomplete: uncertain (rule evidence), period 2, from call 0.
    out = _observe(_calls("ababab", results={3: None}))
    assert out[5] == ("uncertain", "evidence", 2, 3, 0)


def test_results_that_changed_in_an_earlier_cycle_are_progress() -> None:
    # "ababab" where b answered "r1" at call 1 and "r2" at calls 3 and 5: the three cycles do not all have the same
    # results, so the evidence changed: working by the progress rule (period 2, 3 repetitions).
    out = _observe(_calls("ababab", results={1: "r1", 3: "r2", 5: "r2"}))
    assert out[5] == ("working", "progress", 2, 3, 0)
    # The control: the same results in every cycle is stuck.
    assert _observe(_calls("ababab"))[5] == ("stuck", "period", 2, 3, 0)


def test_a_cycle_of_permanent_failures_right_after_a_success_skips_hysteresis() -> None:
    # Hysteresis 2 delays a stuck verdict, except for a cycle of permanent failures. Call 0 succeeds (not a
    # permanent failure); calls 1-3 are the same call failing with PermissionDenied (permanent, not retryable). At
    # call 3 the verdict rests on the last three repetitions, calls 1-3, all permanent failures: stuck at once,
    # although call 0, just before them, was not a failure.
    calls = [ToolCall("x", {"q": 0}, result="ok", result_captured=True, start=T0, end=T0)]
    calls += [ToolCall("a", {"q": 1}, error="PermissionDenied", start=T0 + i, end=T0 + i) for i in (1, 2, 3)]
    out = _observe(calls, hysteresis=2)
    assert out[3] == ("stuck", "period", 1, 3, 1)


def test_a_success_ends_a_run_of_retries() -> None:
    # Call 0 fails with TimeoutError (retryable); calls 1-3, the same call, succeed with the same result. The run
    # of one signature is calls 0-3 (4 repetitions from call 0: the period rule counts signatures, not results);
    # the last three have unchanged results, and they are not retries (they did not fail), so the retry policy
    # explains nothing: stuck at call 3, period 1.
    calls = [ToolCall("a", {"q": 1}, error="TimeoutError", start=T0, end=T0 + 0.5)]
    calls += [ToolCall("a", {"q": 1}, result="same", result_captured=True, start=T0 + 10 * i, end=T0 + 10 * i + 0.5)
              for i in (1, 2, 3)]
    out = _observe(calls)
    assert out[3] == ("stuck", "period", 1, 4, 0)


def test_ignored_arguments_given_as_an_object_are_ignored() -> None:
    # tools.a.ignore_args = ["page"], arguments handed over as dicts (not JSON text): {"q": 1, "page": n} for
    # n = 1, 2, 3 are one signature once "page" is dropped: three consecutive calls -> stuck, period 1, from 0.
    tools = {"a": ToolSettings(ignore_args=("page",))}
    calls = [ToolCall("a", {"q": 1, "page": n}, result="same", result_captured=True, start=T0 + n, end=T0 + n)
             for n in (1, 2, 3)]
    assert _observe(calls, tools=tools)[2] == ("stuck", "period", 1, 3, 0)


def test_no_arguments_and_empty_arguments_are_the_same_call() -> None:
    # Arguments None and {} both mean no arguments: None, {}, None is one call three times -> stuck at call 2.
    calls = [ToolCall("t", args, result="same", result_captured=True, start=T0 + i, end=T0 + i)
             for i, args in enumerate([None, {}, None])]
    assert _observe(calls)[2] == ("stuck", "period", 1, 3, 0)


def test_a_result_is_compared_up_to_the_first_nudge_marker() -> None:
    # A nudge is appended to a tool result after the marker; a result that carries one nudge, then two, is still
    # the same result as the bare one: "abc", "abc" + nudge 1, "abc" + nudge 1 + nudge 2 -> stuck at call 2.
    results = ["abc", "abc" + NUDGE_MARKER + "nudge 1", "abc" + NUDGE_MARKER + "nudge 1" + NUDGE_MARKER + "nudge 2"]
    calls = [ToolCall("t", {"q": 1}, result=r, result_captured=True, start=T0 + i, end=T0 + i)
             for i, r in enumerate(results)]
    assert _observe(calls)[2] == ("stuck", "period", 1, 3, 0)


def test_long_results_are_compared_by_content() -> None:
    # Results longer than the 512 characters kept raw are digested at once. Three long results that differ in their
    # last character: progress (working); the same long result three times: stuck.
    different = ["x" * 600 + str(i) for i in range(3)]
    calls = [ToolCall("t", {"q": 1}, result=r, result_captured=True, start=T0 + i, end=T0 + i)
             for i, r in enumerate(different)]
    assert _observe(calls)[2] == ("working", "progress", 1, 3, 0)
    same = [ToolCall("t", {"q": 1}, result="y" * 600, result_captured=True, start=T0 + i, end=T0 + i)
            for i in range(3)]
    assert _observe(same)[2] == ("stuck", "period", 1, 3, 0)


def _one_tool(args: list[Any]) -> list[ToolCall]:
    return [ToolCall("t", a, result="same", result_captured=True, start=T0 + i, end=T0 + i) for i, a in enumerate(args)]


def test_the_same_arguments_spelt_differently_are_one_call() -> None:
    # Key order and spaces differ, the canonical arguments {"q":1,"r":2} do not: three calls in a row of one
    # signature -> stuck at call 2, period 1, 3 repetitions.
    out = _observe(_one_tool(['{"q": 1, "r": 2}', '{"r": 2, "q": 1}', '{"q":1,"r":2}']))
    assert out[2] == ("stuck", "period", 1, 3, 0)


def test_arguments_given_as_text_then_as_an_object_are_one_call() -> None:
    # '{"q": 1}' as JSON text, then {"q": 1} as a dict twice: one signature -> stuck at call 2.
    assert _observe(_one_tool(['{"q": 1}', {"q": 1}, {"q": 1}]))[2] == ("stuck", "period", 1, 3, 0)
    # And the other way round: a dict, then the same as text twice.
    assert _observe(_one_tool([{"q": 1}, '{"q": 1}', '{"q":1}']))[2] == ("stuck", "period", 1, 3, 0)


def test_different_arguments_given_as_an_object_and_as_text_are_different_calls() -> None:
    # {"q": 1}, '{"q": 2}', {"q": 1}: no two neighbours are equal and {"q": 1} is only twice in the window (the
    # frequency limit is 10 here): working at every call.
    assert _observe(_one_tool([{"q": 1}, '{"q": 2}', {"q": 1}])) == [WORKING] * 3
