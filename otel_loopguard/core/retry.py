"""The retry detector: is the latest call a retry that the retry policy allows (rule ``retry``)?

A run of calls with one signature, each failing with a retryable error class, is a retry while the attempts stay
within ``max_attempts`` and every gap before a retry is at least the policy's backoff (less its tolerance). Without
call times a backoff cannot be shown, so the run is not a retry. The decision order asks this only of a repetition
of one call (period 1, or the frequency rule).

>>> from otel_loopguard.core.config import RetryPolicy
>>> detector, state = RetryDetector(), RetryState()
>>> policy = RetryPolicy(interval_seconds=1.0, backoff_rate=2.0, tolerance=0.0)
>>> detector.update(state, "RateLimitError", start=0.0, previous_end=None, same_as_previous=False, policy=policy)
>>> detector.update(state, "RateLimitError", start=1.5, previous_end=0.5, same_as_previous=True, policy=policy)
>>> detector.explains(state)  # waited 1 s before the first retry
True
>>> detector.update(state, "RateLimitError", start=2.0, previous_end=1.5, same_as_previous=True, policy=policy)
>>> detector.explains(state)  # waited 0.5 s before the second, which needed 2 s
False
"""

from __future__ import annotations

from .config import RetryPolicy

__all__ = ["RetryDetector", "RetryState"]


class RetryState:
    """One trace's retry run: whether the last call continued one, its attempts, and whether it is still allowed."""

    __slots__ = ("attempts", "ok", "on")

    def __init__(self) -> None:
        self.on = False
        self.attempts = 0
        self.ok = False


class RetryDetector:
    """Follows runs of retryable failures; holds no per-trace state."""

    @staticmethod
    def update(state: RetryState, error: str | None, *, start: float | None, previous_end: float | None,
               same_as_previous: bool, policy: RetryPolicy) -> None:
        """Account for one call.

        Args:
            state: the trace's retry state.
            error: the call's error class, None when it succeeded.
            start: the call's start time.
            previous_end: when the previous call ended (or started, without an end).
            same_as_previous: the call has the previous call's signature.
            policy: the retry policy of the call's tool.
        """
        if error is None or not policy.is_retryable(error):
            state.on = False
            return
        # The run continues when the previous call was a retryable failure with this signature.
        if state.on and same_as_previous:
            state.attempts += 1
            if previous_end is None or start is None or start - previous_end < policy.min_gap(state.attempts):
                state.ok = False
            if state.attempts > policy.max_attempts:
                state.ok = False
        else:
            state.on = True
            state.attempts = 0
            state.ok = True

    @staticmethod
    def explains(state: RetryState) -> bool:
        """Whether the latest call is an allowed retry."""
        return state.on and state.ok
