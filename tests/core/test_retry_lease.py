"""Retry policy and dependency leases at their boundaries: gaps, attempts, error classes, owners and renewals."""

from __future__ import annotations

from otel_loopguard.core.config import LeasePolicy, LoopGuardConfig, RetryPolicy, ToolSettings
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.lease import LeaseDetector, LeaseState
from otel_loopguard.core.model import Lease, ToolCall

from ._helpers import T0, call, kinds, observe_all

EXACT = RetryPolicy(interval_seconds=2.0, backoff_rate=2.0, max_attempts=3, tolerance=0.0)


def failing(starts: list[float], error: str = "RateLimitError") -> list[ToolCall]:
    """Identical failing calls starting at ``T0 + s``, each lasting zero seconds."""
    return [ToolCall("llm", "{}", error=error, start=T0 + s, end=T0 + s) for s in starts]


def verdicts(calls: list[ToolCall], **config: object) -> list[str]:
    """The verdict kinds after each call with min_repetitions 2."""
    cfg = LoopGuardConfig(min_repetitions=2, **config)  # type: ignore[arg-type]
    return kinds(observe_all(LoopEngine(cfg), calls)[1])


def test_gap_exactly_the_backoff_is_a_retry() -> None:
    """Gaps of exactly 2 s and 4 s (no tolerance) keep the calls retrying."""
    assert verdicts(failing([0, 2, 6]), retry=EXACT) == ["working", "retrying", "retrying"]


def test_gap_just_short_of_the_backoff_is_stuck() -> None:
    """A second gap of 3.99 s under a 4 s backoff is stuck."""
    assert verdicts(failing([0, 2, 5.99]), retry=EXACT) == ["working", "retrying", "stuck"]


def test_tolerance_accepts_a_slightly_short_gap() -> None:
    """With 20% tolerance a 3.5 s gap satisfies a 4 s backoff."""
    policy = RetryPolicy(interval_seconds=2.0, backoff_rate=2.0, max_attempts=3, tolerance=0.2)
    assert verdicts(failing([0, 2, 5.5]), retry=policy) == ["working", "retrying", "retrying"]


def test_max_attempts_zero_means_no_retry() -> None:
    """With max_attempts 0 the first repeat is already stuck."""
    policy = RetryPolicy(interval_seconds=1.0, max_attempts=0)
    assert verdicts(failing([0, 10]), retry=policy) == ["working", "stuck"]


def test_retry_resets_after_a_success() -> None:
    """A success between failures restarts the attempt count, so a new failure burst may retry again."""
    policy = RetryPolicy(interval_seconds=1.0, max_attempts=1, tolerance=0.0)
    assert verdicts(failing([0, 1, 3]), retry=policy) == ["working", "retrying", "stuck"]
    calls = failing([0, 1]) + [call("read", {"x": 1}, at=5)] + failing([10, 11])
    # At index 3 the failing call is seen a third time in the window (frequency), explained by the fresh retry.
    assert verdicts(calls, retry=policy) == ["working", "retrying", "working", "retrying", "retrying"]


def test_error_classes_match_as_case_insensitive_substrings() -> None:
    """Configured error classes match anywhere in the error type, whatever its case."""
    policy = RetryPolicy(errors=("Throttl",), interval_seconds=1.0, tolerance=0.0)
    assert verdicts(failing([0, 1], error="aws.ThrottlingException"), retry=policy)[-1] == "retrying"
    assert verdicts(failing([0, 1], error="RateLimitError"), retry=policy)[-1] == "stuck"


def test_retry_verdict_carries_period_and_digest() -> None:
    """A retrying verdict names the retried tool, period 1 and a signature digest."""
    _, obs = observe_all(LoopEngine(LoopGuardConfig(min_repetitions=2, retry=EXACT)), failing([0, 2]))
    v = obs[-1].verdict
    assert (v.kind, v.rule, v.period, v.tool, v.cycle_start) == ("retrying", "retry", 1, "llm", 0)
    assert v.signature_digest is not None and len(v.signature_digest) == 32


def waits(leases: list[Lease | None]) -> list[str]:
    """Verdicts of identical approval checks that declare the given leases, judged at T0 + 10."""
    calls = [call("approval", {"t": 1}, at=float(i), lease=lease) for i, lease in enumerate(leases)]
    engine = LoopEngine(LoopGuardConfig(min_repetitions=2, lease=LeasePolicy(max_renewals=1)))
    return kinds(observe_all(engine, calls, now=T0 + 10)[1])


def test_lease_wait_needs_a_deadline_after_the_observation_time() -> None:
    """A deadline equal to the observation time has passed; one second later is still valid."""
    assert waits([Lease("bob", T0 + 10)] * 3) == ["working", "stuck", "stuck"]
    assert waits([Lease("bob", T0 + 11)] * 3) == ["waiting"] * 3


def test_renewals_count_only_extensions_by_the_same_owner() -> None:
    """Re-sending the same deadline is not a renewal; extending it is; max_renewals 1 allows one."""
    same = Lease("bob", T0 + 100)
    assert waits([same, same, same, same]) == ["waiting"] * 4
    assert waits([Lease("bob", T0 + 100), Lease("bob", T0 + 200), Lease("bob", T0 + 300)]) == [
        "waiting", "waiting", "stuck",
    ]


def test_a_new_owner_starts_a_new_lease() -> None:
    """A lease from another owner replaces the old one and its renewal count."""
    leases = [Lease("bob", T0 + 100), Lease("bob", T0 + 200), Lease("carol", T0 + 300), Lease("carol", T0 + 400)]
    assert waits(leases) == ["waiting"] * 4


def test_lease_persists_over_repeats_without_one() -> None:
    """The same call repeated without restating the lease still waits until other work resumes."""
    assert waits([Lease("bob", T0 + 100), None, None]) == ["waiting"] * 3


def test_release_ends_only_the_owners_lease() -> None:
    """release('job') leaves bob's lease held; release('bob') ends it, so the same moment no longer waits."""
    detector, state = LeaseDetector(max_renewals=0), LeaseState()
    detector.update(state, Lease("bob", T0 + 100), continues=False)
    detector.release(state, "job")
    assert detector.holds(state, now=T0 + 50)
    detector.release(state, "bob")
    assert state.lease is None and not detector.holds(state, now=T0 + 50)


def test_a_finished_poll_releases_the_tools_lease_through_the_detector() -> None:
    """A polled tool's wait (owner: the tool) ends with a matching result: 'running' twice waits, 'done' works."""
    engine = LoopEngine(LoopGuardConfig(tools={"poll": ToolSettings(wait_seconds=600, wait_until="done")}))
    state = engine.new_state()
    calls = [ToolCall("poll", "{}", result=r, result_captured=True, start=T0 + s, end=T0 + s) for s, r in
             [(0, "running"), (10, "running"), (20, "done")]]
    assert [engine.observe(state, c).verdict.kind for c in calls] == ["working", "waiting", "working"]
    assert state._lease.lease is None
