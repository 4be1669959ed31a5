"""Every precedence between two rules of the decision order, and every key that orders a trace's steps, by example.

The decision order (README, docs): 1 a valid lease -> waiting; 2 no repetition -> working; 3 incomplete evidence ->
uncertain; 4 explained by the retry policy -> retrying; 5 evidence changed -> working (progress); 6 -> stuck. Each
test below builds calls for which two rules both apply, and checks the earlier one decides; a second sequence that
differs only in what makes the earlier rule apply shows that the later rule really applied (so moving a check ahead
of another changes an answer here). Two pairs cannot meet, and say why: retry and progress (a failed call's evidence
is "failed", never progress, and the retry policy explains only failed calls).

Steps are ordered by start time, then end time, then span id: one example per key, each with arrivals in another
order, where ordering by any other key (or dropping it) changes the verdicts.

Expected values are worked out by hand from the default configuration: window 10, max_period 3, min_repetitions 3,
frequency limit 3, retry of "timeout" up to 3 attempts with delays of 1 s then 2 s (tolerance 0.2).
"""

from __future__ import annotations

from typing import Any

from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import Step, TraceJudge
from otel_loopguard.core.model import Lease, ToolCall

T0 = 1_767_225_600
NS = 1_000_000_000


def _verdicts(calls: list[ToolCall]) -> list[tuple[int, str, str]]:
    """(call index, verdict kind, rule) after each call of a fresh trace, observed at each call's end."""
    engine = LoopEngine()
    state = engine.new_state()
    out = []
    for c in calls:
        obs = engine.observe(state, c)
        out.append((obs.index, obs.verdict.kind, obs.verdict.rule))
    return out


def _fetch(at: float, *, captured: bool = True, error: str | None = "timeout", result: Any = None,
           lease: Lease | None = None) -> ToolCall:
    """A ``fetch`` call at ``T0 + at`` (zero length) with the same arguments, failing with ``error`` unless None."""
    return ToolCall("fetch", {"url": "https://example.org"} if captured else None, arguments_captured=captured,
                    result=result, result_captured=result is not None, error=error, start=T0 + at, end=T0 + at,
                    lease=lease)


# --- 3 (evidence) before 4 (retry): the first survivor of issue 30 --------------------------------------------------


def test_incomplete_evidence_decides_before_the_retry_policy() -> None:
    """Three timeouts 0, 1 and 3 s apart with arguments not captured are uncertain (evidence), not retrying."""
    # Delays 1 s and 2 s meet the backoff (1 s, then 1 * 2), 3 attempts <= max 3: the retry policy explains the
    # run; but the signature lacks its arguments, so rule 3 decides first at the third call (period 1, 3 cycles).
    calls = [_fetch(at, captured=False) for at in (0, 1, 3)]
    assert _verdicts(calls) == [(0, "working", "none"), (1, "working", "none"), (2, "uncertain", "evidence")]


def test_the_same_timeouts_with_arguments_captured_are_retrying() -> None:
    """The control of the test above: with the arguments captured the retry policy explains the three timeouts."""
    calls = [_fetch(at) for at in (0, 1, 3)]
    assert _verdicts(calls) == [(0, "working", "none"), (1, "working", "none"), (2, "retrying", "retry")]


# --- 4 (retry) before 6 (stuck) ---------------------------------------------------------------------------------


def test_the_retry_policy_decides_before_stuck() -> None:
    """Three identical timeouts (evidence "failed" each time, unchanged) are retrying, not stuck; a non-retryable
    error class in the same places is stuck."""
    assert _verdicts([_fetch(at) for at in (0, 1, 3)])[2] == (2, "retrying", "retry")
    assert _verdicts([_fetch(at, error="ExplodedError") for at in (0, 1, 3)])[2] == (2, "stuck", "period")


# --- 3 (evidence) before 5 (progress) and before 6 (stuck) ----------------------------------------------------------


def test_incomplete_evidence_decides_before_progress() -> None:
    """Three successful calls with arguments not captured and three different results are uncertain, not working
    (progress); with the arguments captured the same results are progress."""
    blind = [_fetch(at, captured=False, error=None, result=f"page {at}") for at in (0, 1, 2)]
    seen = [_fetch(at, error=None, result=f"page {at}") for at in (0, 1, 2)]
    assert _verdicts(blind)[2] == (2, "uncertain", "evidence")
    assert _verdicts(seen)[2] == (2, "working", "progress")


def test_incomplete_evidence_decides_before_stuck() -> None:
    """Three successful calls with the same result and arguments not captured are uncertain; captured, stuck."""
    blind = [_fetch(at, captured=False, error=None, result="same") for at in (0, 1, 2)]
    seen = [_fetch(at, error=None, result="same") for at in (0, 1, 2)]
    assert _verdicts(blind)[2] == (2, "uncertain", "evidence")
    assert _verdicts(seen)[2] == (2, "stuck", "period")


# --- 5 (progress) before 6 (stuck) --------------------------------------------------------------------------------


def test_changed_evidence_decides_before_stuck() -> None:
    """The same call three times with results r0, r1, r2 is working (progress); with one result, stuck."""
    changing = [_fetch(at, error=None, result=f"r{at}") for at in (0, 1, 2)]
    assert _verdicts(changing) == [(0, "working", "none"), (1, "working", "none"), (2, "working", "progress")]


# --- 2 (no repetition) before 3 (evidence) ----------------------------------------------------------------------


def test_no_repetition_is_working_even_without_evidence() -> None:
    """Three different tools with arguments not captured and no result repeat nothing: working (rule none), not
    uncertain: missing evidence matters only for calls that repeat."""
    calls = [ToolCall(tool, None, arguments_captured=False, start=T0 + i, end=T0 + i) for i, tool in
             enumerate(("a", "b", "c"))]
    assert _verdicts(calls) == [(0, "working", "none"), (1, "working", "none"), (2, "working", "none")]


# --- 1 (lease) before 3, 4 and 6 ------------------------------------------------------------------------------


def test_a_valid_lease_decides_before_incomplete_evidence() -> None:
    """Three calls with arguments not captured, each declaring the same lease (owner, deadline ahead): waiting at
    every call, never uncertain."""
    lease = Lease("approver", T0 + 100)
    calls = [_fetch(at, captured=False, error=None, result="same", lease=lease) for at in (0, 1, 2)]
    assert [v[1:] for v in _verdicts(calls)] == [("waiting", "lease")] * 3


def test_a_valid_lease_decides_before_the_retry_policy() -> None:
    """The three retryable timeouts of the retry example, each under a valid lease: waiting, not retrying."""
    lease = Lease("approver", T0 + 100)
    calls = [_fetch(at, lease=lease) for at in (0, 1, 3)]
    assert [v[1:] for v in _verdicts(calls)] == [("waiting", "lease")] * 3


def test_a_valid_lease_decides_before_stuck_and_an_expired_one_does_not() -> None:
    """Same call, same result, three times under a lease: waiting while the deadline is ahead; with a deadline
    already passed at the second call (T0 + 0.5) the trace goes stuck at the third."""
    ahead = [_fetch(at, error=None, result="same", lease=Lease("approver", T0 + 100)) for at in (0, 1, 2)]
    passed = [_fetch(at, error=None, result="same", lease=Lease("approver", T0 + 0.5)) for at in (0, 1, 2)]
    assert [v[1] for v in _verdicts(ahead)] == ["waiting"] * 3
    assert _verdicts(passed)[2] == (2, "stuck", "period")


# --- within rule 2: a period before the frequency rule ------------------------------------------------------------


def test_a_period_is_named_before_the_frequency_rule() -> None:
    """A A A: both a period-1 cycle of three and a call seen three times; the rule named is period."""
    calls = [_fetch(at, error=None, result="same") for at in (0, 1, 2)]
    assert _verdicts(calls)[2] == (2, "stuck", "period")


def test_the_frequency_rule_finds_what_no_period_holds() -> None:
    """A x A y A: no periodic suffix of three cycles, the call seen three times in the window: stuck (frequency)."""
    a = [_fetch(at, error=None, result="same") for at in (0, 2, 4)]
    noise = [ToolCall("note", {"n": at}, result=f"n{at}", result_captured=True, start=T0 + at, end=T0 + at)
             for at in (1, 3)]
    calls = [a[0], noise[0], a[1], noise[1], a[2]]
    assert [v[1:] for v in _verdicts(calls)] == [("working", "none")] * 4 + [("stuck", "frequency")]


# --- the keys that order a trace's steps: start, then end, then span id ------------------------------------------


def _step(span_id: int, tool: str, start: float, end: float) -> Step:
    """A successful step with fixed arguments and result (so only the tool tells two steps apart)."""
    call = ToolCall(tool, {"q": 1}, result="same", result_captured=True, start=T0 + start, end=T0 + end)
    return Step(span_id=span_id, start_ns=int((T0 + start) * NS), end_ns=int((T0 + end) * NS), call=call)


def _report(arrivals: list[Step]) -> dict[str, Any]:
    """The audit report of a trace whose steps arrive in the order given, all before it is finished."""
    judge = TraceJudge(LoopEngine())
    for step in arrivals:
        judge.add(step)
    judge.finish(None)
    return judge.report("example", None).as_dict()


def _moves(report: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(t["step"], t["to"], t["rule"]) for t in report["transitions"]]


def test_steps_are_ordered_by_start_time_not_end_time() -> None:
    """A 0-1 s, A 2-3 s, B 4-100 s, A 5-6 s (the second survivor of issue 30): by start the order is A A B A,
    no period, A seen three times at step 3: stuck (frequency) there and nothing else; by end it would be A A A B."""
    steps = [_step(1, "A", 0, 1), _step(2, "A", 2, 3), _step(3, "B", 4, 100), _step(4, "A", 5, 6)]
    for arrivals in (steps, steps[::-1]):
        report = _report(arrivals)
        assert _moves(report) == [(3, "stuck", "frequency")]
        assert (report["verdict"], report["ok"], report["violations"]) == ("stuck", True, [])


def test_steps_starting_together_are_ordered_by_end_time_before_span_id() -> None:
    """A 0, A 1, then at 2 s an A ending at 2.5 s (span 9) and a B ending at 3 s (span 3): by end the order is
    A A A B, stuck (period 1) at step 2; by span id it would be A A B A, stuck only at step 3."""
    steps = [_step(1, "A", 0, 0.5), _step(2, "A", 1, 1.5), _step(9, "A", 2, 2.5), _step(3, "B", 2, 3)]
    for arrivals in (steps, steps[::-1]):
        assert _moves(_report(arrivals))[0] == (2, "stuck", "period")


def test_steps_with_the_same_times_are_ordered_by_span_id() -> None:
    """A 0, A 1, then an A (span 9) and a B (span 3) both 2-2.5 s, the A arriving first: by span id the order is
    A A B A, stuck (frequency) at step 3 only; in arrival order it would be A A A B, stuck at step 2."""
    steps = [_step(1, "A", 0, 0.5), _step(2, "A", 1, 1.5), _step(9, "A", 2, 2.5), _step(3, "B", 2, 2.5)]
    for arrivals in (steps, steps[::-1]):
        assert _moves(_report(arrivals)) == [(3, "stuck", "frequency")]


def test_a_cycle_counts_its_unchanged_evidence_only_from_the_last_change() -> None:
    """Results r1, r2, r2, r2 of one call: the change at the second call restarts the count of unchanged evidence
    at zero, so the third call is progress and only the fourth (two unchanged repeats) is stuck."""
    calls = [_fetch(at, error=None, result=r) for at, r in enumerate(("r1", "r2", "r2", "r2"))]
    assert _verdicts(calls) == [(0, "working", "none"), (1, "working", "none"), (2, "working", "progress"),
                                (3, "stuck", "period")]
