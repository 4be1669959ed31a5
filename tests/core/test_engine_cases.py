"""The progress-aware six-case table replayed at one fixed observation time, and the variants that flip each case."""

from __future__ import annotations

from dataclasses import replace

import pytest

from otel_loopguard.core.config import LeasePolicy, LoopGuardConfig, RetryPolicy
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import TraceJudge, replay_calls
from otel_loopguard.core.model import Lease, ToolCall
from otel_loopguard.core.signature import NORMALIZER_VERSION

from ._helpers import T0, call

# The table's own parameters: six-call window, periods up to three, two repetitions, 2 s retry interval.
CONFIG = LoopGuardConfig(
    window=6, max_period=3, min_repetitions=2, frequency_limit=3,
    retry=RetryPolicy(interval_seconds=2.0, backoff_rate=2.0, max_attempts=3),
    lease=LeasePolicy(max_renewals=3),
)
#: The one observation time every case is judged at.
OBSERVED_AT = T0 + 60.0


def replay(calls: list[ToolCall], config: LoopGuardConfig = CONFIG, at: float = OBSERVED_AT) -> TraceJudge:
    """Replay ``calls`` through a fresh engine and judge again at ``at``."""
    return replay_calls(LoopEngine(config), calls, at)


# -- the six cases ------------------------------------------------------------------


def pagination(rows: tuple[int, ...] = (50, 94, 139, 182)) -> list[ToolCall]:
    """Four distinct page requests whose accepted rows grow."""
    cursors = [None, "c1", "c2", "c3"]
    return [
        call("list_products", {"cursor": cursors[i], "limit": 50, "request_id": f"r-{i}"},
             result={"accepted_rows": n}, at=float(i))
        for i, n in enumerate(rows)
    ]


def backoff(gaps: tuple[float, ...] = (2.0, 4.0), error: str = "RateLimitError") -> list[ToolCall]:
    """Identical failing provider calls, each starting ``gap`` seconds after the previous one ended."""
    calls, start = [], T0
    for i in range(len(gaps) + 1):
        calls.append(ToolCall("chat_completion", '{"model": "m", "prompt": "hi"}', error=error,
                              start=start, end=start + 0.5))
        if i < len(gaps):
            start = start + 0.5 + gaps[i]
    return calls


def same_call_loop() -> list[ToolCall]:
    """Four identical searches with the same result."""
    return [call("search", {"query": "timeout errors"}, result={"hits": ["doc-1"]}, at=float(i)) for i in range(4)]


def oscillation() -> list[ToolCall]:
    """Three repetitions of a search/read pair with the same results."""
    out = []
    for i in range(6):
        if i % 2 == 0:
            out.append(call("search", {"query": "brief"}, result={"hits": ["doc-1"]}, at=float(i)))
        else:
            out.append(call("read", {"doc": "doc-1"}, result="the brief", at=float(i)))
    return out


def approval_wait(owner: str = "alice@example.org", deadline: float = OBSERVED_AT + 3600,
                  renew: bool = False, n: int = 4) -> list[ToolCall]:
    """Repeated approval checks that declare a lease (extended on every call when ``renew``)."""
    return [
        call("check_approval", {"ticket": 7}, result={"status": "pending"}, at=float(i),
             lease=Lease(owner, deadline + (i * 60 if renew else 0)))
        for i in range(n)
    ]


def redacted_writes(mode: str) -> list[ToolCall]:
    """Repeated writes whose arguments were not captured, or whose result was not captured."""
    if mode == "arguments":
        return [call("write_file", None, arguments_captured=False, result="ok", at=float(i)) for i in range(4)]
    return [call("write_file", {"path": "out.txt"}, result=None, result_captured=False, at=float(i)) for i in range(4)]


def test_catalog_pagination_is_working() -> None:
    """Four distinct page signatures with growing rows stay working, with no transition."""
    r = replay(pagination())
    assert (r.state.verdict.kind, r.state.verdict.rule) == ("working", "none")
    assert r.transitions == [] and r.interventions == []


def test_provider_backoff_is_retrying() -> None:
    """Three identical rate-limited calls 2 s then 4 s apart are retrying, from the second call on."""
    r = replay(backoff())
    v = r.state.verdict
    assert (v.kind, v.rule, v.period, v.step) == ("retrying", "retry", 1, 2)
    assert [(t.step, t.previous, t.verdict.kind) for t in r.transitions] == [(1, "working", "retrying")]
    assert r.interventions == []


def test_same_call_loop_is_stuck_period_one() -> None:
    """Four identical searches with one result are stuck with period 1, first at the second call."""
    r = replay(same_call_loop())
    v = r.state.verdict
    assert (v.kind, v.rule, v.period, v.cycle_start, v.tool) == ("stuck", "period", 1, 0, "search")
    assert [(t.step, t.verdict.kind, t.verdict.period) for t in r.transitions] == [(1, "stuck", 1)]
    assert v.normalizer_version == NORMALIZER_VERSION


def test_search_read_oscillation_is_stuck_period_two() -> None:
    """A search/read pair repeated three times is stuck with period 2, first after two full cycles."""
    r = replay(oscillation())
    v = r.state.verdict
    assert (v.kind, v.rule, v.period, v.repetitions, v.cycle_start) == ("stuck", "period", 2, 3, 0)
    assert [(t.step, t.verdict.kind, t.verdict.rule, t.verdict.period) for t in r.transitions] == [
        (3, "stuck", "period", 2)
    ]


def test_approval_wait_is_waiting() -> None:
    """Repetition under a lease with an owner and a future deadline is waiting, from the first call."""
    r = replay(approval_wait())
    assert (r.state.verdict.kind, r.state.verdict.rule) == ("waiting", "lease")
    assert [(t.step, t.verdict.kind) for t in r.transitions] == [(0, "waiting")]


@pytest.mark.parametrize("mode", ["arguments", "result"])
def test_redacted_writes_are_uncertain(mode: str) -> None:
    """Repeated writes without captured arguments, or without a result, are uncertain rather than stuck."""
    r = replay(redacted_writes(mode))
    v = r.state.verdict
    assert (v.kind, v.rule, v.period) == ("uncertain", "evidence", 1)
    assert all(t.verdict.kind != "stuck" for t in r.transitions)
    assert r.interventions == []


def test_six_cases_together_flag_exactly_the_two_loops() -> None:
    """Of the six cases exactly the same-call loop and the oscillation end stuck."""
    cases = {
        "pagination": pagination(), "backoff": backoff(), "loop": same_call_loop(),
        "oscillation": oscillation(), "approval": approval_wait(), "redacted": redacted_writes("arguments"),
    }
    verdicts = {name: replay(calls).state.verdict.kind for name, calls in cases.items()}
    assert verdicts == {
        "pagination": "working", "backoff": "retrying", "loop": "stuck",
        "oscillation": "stuck", "approval": "waiting", "redacted": "uncertain",
    }


def test_replay_matches_observe_one_call_at_a_time() -> None:
    """``replay_calls`` and calling ``LoopEngine.observe`` in order give the same verdicts."""
    engine = LoopEngine(CONFIG)
    state = engine.new_state()
    by_observe = [engine.observe(state, c).verdict.kind for c in oscillation()]
    assert by_observe == ["working", "working", "working", "stuck", "stuck", "stuck"]
    assert replay(oscillation()).state.verdict.kind == by_observe[-1]


# -- variants that flip each case ---------------------------------------------------


def test_non_retryable_error_is_stuck() -> None:
    """The backoff case with a non-retryable error class is stuck, not retrying."""
    v = replay(backoff(error="ValueError")).state.verdict
    assert (v.kind, v.rule, v.period) == ("stuck", "period", 1)


def test_collapsed_delays_are_stuck() -> None:
    """Retries that come back faster than the backoff allows are stuck from the too-early retry."""
    r = replay(backoff(gaps=(2.0, 0.1)))
    assert [(t.step, t.verdict.kind) for t in r.transitions] == [(1, "retrying"), (2, "stuck")]


def test_immediate_retry_is_stuck_at_once() -> None:
    """A retry with no gap at all never counts as backoff."""
    r = replay(backoff(gaps=(0.0, 0.0)))
    assert [(t.step, t.verdict.kind) for t in r.transitions] == [(1, "stuck")]


def test_attempts_beyond_max_attempts_are_stuck() -> None:
    """With max_attempts 3 the fourth retry is stuck even though its delay honours the backoff."""
    r = replay(backoff(gaps=(2.0, 4.0, 8.0, 16.0)))
    assert [(t.step, t.verdict.kind) for t in r.transitions] == [(1, "retrying"), (4, "stuck")]


def test_untimed_retries_cannot_show_backoff() -> None:
    """Retryable failures without times are stuck: without times no backoff can be shown."""
    calls = [ToolCall("chat_completion", "{}", error="RateLimitError") for _ in range(3)]
    assert replay(calls).state.verdict.kind == "stuck"


def test_per_tool_retry_policy_wins() -> None:
    """A tool's own retry policy (here: nothing retryable) overrides the top-level one."""
    from otel_loopguard.core.config import ToolSettings

    cfg = replace(CONFIG, tools={"chat_completion": ToolSettings(retry=RetryPolicy(errors=("nothing",)))})
    assert replay(backoff(), cfg).state.verdict.kind == "stuck"


def test_expired_deadline_is_not_waiting() -> None:
    """A lease whose deadline passed before the observation time explains nothing: the loop is stuck."""
    r = replay(approval_wait(deadline=T0 + 2.0))
    assert r.state.verdict.kind == "stuck"
    assert [t.verdict.kind for t in r.transitions][-1] == "stuck"


def test_reevaluation_after_the_deadline_flips_waiting_to_stuck() -> None:
    """A trace waiting at the observation time becomes stuck when judged again after the deadline."""
    deadline = OBSERVED_AT + 30
    engine = LoopEngine(CONFIG)
    r = replay_calls(engine, approval_wait(deadline=deadline), OBSERVED_AT)
    assert r.state.verdict.kind == "waiting"
    assert engine.reevaluate(r.state, deadline - 1) is None
    later = engine.reevaluate(r.state, deadline + 1)
    assert later is not None and later.transition is not None
    assert (later.transition.previous, later.verdict.kind, later.verdict.period) == ("waiting", "stuck", 1)


def test_missing_owner_is_not_waiting() -> None:
    """A lease that names no owner explains nothing."""
    assert replay(approval_wait(owner="")).state.verdict.kind == "stuck"
    assert replay(approval_wait(owner="   ")).state.verdict.kind == "stuck"


def test_too_many_renewals_is_not_waiting() -> None:
    """A lease renewed more often than max_renewals stops explaining the repetition."""
    ok = replay(approval_wait(renew=True, n=4))  # three renewals: within the limit
    assert ok.state.verdict.kind == "waiting"
    r = replay(approval_wait(renew=True, n=5))  # four renewals
    assert r.state.verdict.kind == "stuck"
    assert [(t.step, t.verdict.kind) for t in r.transitions] == [(0, "waiting"), (4, "stuck")]


def test_other_work_ends_the_wait() -> None:
    """A call with another signature and no lease clears the lease."""
    calls = approval_wait(n=2) + [call("read", {"doc": 1}, at=5.0)]
    r = replay(calls)
    assert [t.verdict.kind for t in r.transitions] == ["waiting", "working"]


@pytest.mark.parametrize("how", ["result", "progress"])
def test_changing_progress_is_working(how: str) -> None:
    """The same search repeated while its result (or explicit progress) changes is working by the progress rule."""
    if how == "result":
        calls = [call("search", {"query": "q"}, result={"rows": 50 * (i + 1)}, at=float(i)) for i in range(4)]
    else:
        calls = [call("search", {"query": "q"}, result="same", progress=f"rows={i}", at=float(i)) for i in range(4)]
    v = replay(calls).state.verdict
    assert (v.kind, v.rule, v.period) == ("working", "progress", 1)


def test_explicit_progress_that_stays_the_same_is_stuck() -> None:
    """An unchanged explicit progress fingerprint overrides a changing result: still stuck."""
    calls = [call("search", {"query": "q"}, result=f"page {i}", progress="brief:sha4", at=float(i)) for i in range(4)]
    assert replay(calls).state.verdict.kind == "stuck"


def test_pagination_whose_rows_stop_growing_is_stuck() -> None:
    """Pagination that keeps requesting the same page with the same rows is a loop."""
    calls = [call("list_products", {"cursor": "c3"}, result={"accepted_rows": 182}, at=float(i)) for i in range(4)]
    assert replay(calls).state.verdict.kind == "stuck"


def test_failing_call_with_varying_error_text_is_stuck() -> None:
    """Failed calls are never progress: a non-retryable failure whose message varies is still stuck."""
    calls = [
        call("run_tests", {"cmd": "pytest"}, error=f"AssertionError: expected 3, got {i}",
             result=f"FAILED test_x.py::test_{i}", at=float(i))
        for i in range(4)
    ]
    v = replay(calls).state.verdict
    assert (v.kind, v.rule, v.period) == ("stuck", "period", 1)


def test_a_far_deadline_counts_only_max_seconds_after_the_call() -> None:
    """A deadline of 1e308 waits at most lease.max_seconds (3600 s by default) after the first call's end
    (T0 + 0.5 s): waiting at T0 + 60 s and just before T0 + 3600.5 s, stuck just after."""
    engine = LoopEngine(CONFIG)
    r = replay_calls(engine, approval_wait(deadline=1e308), OBSERVED_AT)
    assert r.state.verdict.kind == "waiting"
    assert engine.reevaluate(r.state, T0 + 3600.0) is None
    later = engine.reevaluate(r.state, T0 + 3601.0)
    assert later is not None and later.verdict.kind == "stuck"


def test_max_seconds_is_a_setting_and_non_finite_deadlines_never_hold() -> None:
    """With lease.max_seconds = 30 a lease taken at T0 + 0.5 s no longer holds at T0 + 60 s; an infinite or NaN
    deadline holds at no time."""
    short = replace(CONFIG, lease=LeasePolicy(max_renewals=3, max_seconds=30.0))
    assert replay(approval_wait(), short).state.verdict.kind == "stuck"
    assert replay(approval_wait(deadline=float("inf"))).state.verdict.kind == "stuck"
    assert replay(approval_wait(deadline=float("nan"))).state.verdict.kind == "stuck"
