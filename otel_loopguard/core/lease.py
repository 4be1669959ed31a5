"""The lease detector: is the trace waiting on a declared dependency (rule ``lease``, verdict ``waiting``)?

A call may declare a lease: an owner (who the trace waits for: an approver, a job) and a deadline. While a lease
names an owner, its deadline is ahead of the observation time and it was renewed (extended by the same owner) at
most ``max_renewals`` times, repetition is waiting, not a loop. The lease ends when the trace moves on to another
call than the one that took it. A deadline counts at most ``max_seconds`` after the call that took (or renewed) the
lease: a sender's deadline of ``1e308`` would otherwise keep a loop ``waiting`` for ever.

>>> from otel_loopguard.core.model import Lease
>>> detector, state = LeaseDetector(max_renewals=1, max_seconds=3600.0), LeaseState()
>>> detector.update(state, Lease("approver", deadline=100.0), continues=False)
>>> detector.holds(state, now=50.0), detector.holds(state, now=150.0)
(True, False)
>>> detector.update(state, None, continues=False)  # another call: the wait is over
>>> detector.holds(state, now=50.0)
False
>>> detector.update(state, Lease("approver", deadline=100.0), continues=False)
>>> detector.release(state, "ci")  # not the owner: the wait goes on
>>> detector.holds(state, now=50.0)
True
>>> detector.release(state, "approver")
>>> detector.holds(state, now=50.0)
False
"""

from __future__ import annotations

import math

from .model import Lease
from .window import Call

__all__ = ["LeaseDetector", "LeaseState"]


class LeaseState:
    """One trace's lease: the lease held, the call that took it, and its renewals."""

    __slots__ = ("call", "lease", "renewals", "until")

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.call: Call | None = None
        self.renewals = 0
        #: The held lease's deadline, bounded by ``max_seconds`` after the call that took or renewed it.
        self.until = -math.inf


class LeaseDetector:
    """Follows a trace's declared waits; holds no per-trace state.

    Args:
        max_renewals: extensions after which a lease no longer explains repetition.
        max_seconds: the longest a deadline may lie after the call that declares it (seconds).
    """

    def __init__(self, max_renewals: int, max_seconds: float = math.inf) -> None:
        self._max_renewals = max_renewals
        self._max_seconds = max_seconds

    def update(self, state: LeaseState, lease: Lease | None, *, continues: bool, call: Call | None = None) -> None:
        """Account for one call.

        Args:
            state: the trace's lease state.
            lease: the lease the call declares, if any.
            continues: the call has the signature of the call that took the held lease (asked only when a lease is
                held and the call declares none).
            call: the call, remembered as the one that took ``lease``.
        """
        if lease is not None:
            held = state.lease
            if held is not None and held.owner == lease.owner:
                if lease.deadline > held.deadline:
                    state.renewals += 1
                    state.lease = lease
                    state.until = self._bounded(lease, call)
            else:
                state.lease, state.renewals = lease, 0
                state.until = self._bounded(lease, call)
            state.call = call
        elif state.lease is not None and not continues:
            # Other work resumed: the wait is over.
            state.lease = None

    def release(self, state: LeaseState, owner: str) -> None:
        """End the held lease when ``owner`` holds it (a polled tool whose job finished or changed); a lease held by
        anyone else stays, since only its owner's news ends a declared wait."""
        if state.lease is not None and state.lease.owner == owner:
            state.lease = None

    def _bounded(self, lease: Lease, call: Call | None) -> float:
        """The deadline that counts: at most ``max_seconds`` after the call (its end, else its start); a deadline
        that is not a finite number never holds."""
        deadline = lease.deadline
        if not math.isfinite(deadline):
            return -math.inf
        taken = None if call is None else call.end if call.end is not None else call.start
        return deadline if taken is None else min(deadline, taken + self._max_seconds)

    def holds(self, state: LeaseState, now: float | None) -> bool:
        """Whether a valid lease explains the trace's repetition at ``now``."""
        lease = state.lease
        return (
            lease is not None
            and bool(lease.owner.strip())
            and now is not None
            and state.until > now
            and state.renewals <= self._max_renewals
        )
