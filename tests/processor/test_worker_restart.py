"""The deferred-work thread, killed for real, is started again by the next submit, which it then processes."""

from __future__ import annotations

import ctypes
import threading

import pytest

from otel_loopguard.sdk.worker import DeferredWork

WAIT = 60.0  # a deadline: every wait returns as soon as its event is set


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Make ``thread`` raise ``exc_type`` at its next Python instruction (CPython's asynchronous exception)."""
    assert thread.ident is not None
    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    assert set_async(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type)) == 1


# The killed thread's SystemExit reaches threading's excepthook, which pytest reports as a warning: expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_killed_worker_is_restarted_and_processes_the_next_item() -> None:
    """A ``SystemExit`` raised in the worker thread outside any item (it waits for work, so nothing catches it)
    ends the thread; the next submit starts a new worker, counted once in ``restarts``, and that worker, not the
    submitting thread, processes the item."""
    processed: list[tuple[object, threading.Thread]] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def process(item: object) -> None:
        processed.append((item, threading.current_thread()))
        done.set()

    # max_items=1: every submit into an empty queue wakes the worker (the wake-up point is min(256, max_items)).
    work = DeferredWork(process, max_items=1, on_drop=lambda: None, interval=0.01, on_error=errors.append)
    try:
        first = work._thread
        # The worker wakes every 10 ms; the exception is raised where it runs next: nearly always in its wait,
        # outside the per-wake-up guard, which ends the thread. Should it land inside the guard instead, the guard
        # reports it (that path has its own test) and the thread lives on: try again.
        for _ in range(20):
            errors.clear()
            _raise_in(first, SystemExit)
            while first.is_alive() and not errors:
                first.join(0.01)  # a poll of the two outcomes, each of which ends the loop
            if not first.is_alive():
                break
        assert not first.is_alive()
        assert work.restarts == 0  # nobody noticed yet

        work.submit("next")
        assert done.wait(WAIT)
        item, thread = processed[0]
        assert item == "next"
        # The new worker processed it: not the dead thread, not this (submitting) thread.
        assert thread is work._thread and thread is not first and thread is not threading.current_thread()
        assert thread.is_alive()
        assert work.restarts == 1
        # One restart only: a later submit finds the new worker alive.
        done.clear()
        work.submit("after")
        assert done.wait(WAIT)
        assert [i for i, _ in processed] == ["next", "after"]
        assert work.restarts == 1
    finally:
        work.shutdown()
