"""``force_flush(timeout_millis)`` honours its timeout with a hung listener, and the worker finishes the work later."""

from __future__ import annotations

import threading

from otel_loopguard import VerdictEvent
from tests.processor.conftest import HarnessFactory

WAIT = 60.0  # a deadline for threads of the test itself; every wait returns as soon as its event is set


def test_force_flush_returns_false_on_time_with_a_hung_listener(make_harness: HarnessFactory) -> None:
    """A listener blocked on the first verdict event: force_flush(100 ms) returns False instead of waiting for it;
    once the listener is released, the worker delivers both events and force_flush returns True."""
    h = make_harness()
    release = threading.Event()
    entered = threading.Event()
    received: list[str] = []

    def hung(event: VerdictEvent) -> None:
        entered.set()
        release.wait(WAIT)
        received.append(event.intervention.action if event.intervention else "transition")

    h.processor.add_listener(hung)
    agent = h.agent()
    for _ in range(4):  # the third identical call nudges, the fourth stops (see test_harness_api)
        h.tool(agent)
    answers: list[bool] = []
    caller = threading.Thread(target=lambda: answers.append(h.processor.force_flush(timeout_millis=100)))
    try:
        caller.start()
        caller.join(WAIT)
        # Before the fix the caller drained itself and sat in the hung listener until released.
        assert not caller.is_alive(), "force_flush ignored its timeout"
        assert answers == [False]
        assert entered.is_set() and received == []
    finally:
        release.set()
    assert h.processor.force_flush(timeout_millis=int(WAIT * 1000)) is True
    assert received == ["nudge", "stop"]


def test_force_flush_from_a_listener_does_not_wait_for_itself(make_harness: HarnessFactory) -> None:
    """A listener that calls force_flush (on the worker or a draining thread) gets True at once, no deadlock."""
    h = make_harness()
    answers: list[bool] = []
    h.processor.add_listener(lambda event: answers.append(h.processor.force_flush(timeout_millis=int(WAIT * 1000))))
    agent = h.agent()
    for _ in range(3):
        h.tool(agent)
    assert h.processor.force_flush() is True
    assert answers == [True]
