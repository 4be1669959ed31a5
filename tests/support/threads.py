"""Run a worker on several threads at once and fail, rather than hang, when one never finishes."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(worker: Callable[[int], object], count: int, timeout: float) -> None:
    """Run ``worker(0)`` ... ``worker(count - 1)`` on their own threads and wait for all of them.

    Raises:
        AssertionError: a thread was still running after ``timeout`` seconds (a deadlock, or a hang).
    """
    threads = [threading.Thread(target=worker, args=(index,), daemon=True) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in time (deadlock?)"
