"""Deferred work: a bounded FIFO drained by one background thread, or by any caller that needs it done now.

Span hooks only append to the queue, so judging tool calls costs the application
thread almost nothing; a caller that needs the result (``check()``, ``verdict()``,
``force_flush()``) drains the queue itself first, so answers are never stale.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any


class _Mark:
    """A place in the queue: set when every item queued before it has been processed."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class DeferredWork:
    """Runs ``process(item)`` for every submitted item, in submission order, off the submitting thread.

    Args:
        process: handles one item; it must not raise (the processor guards its own work).
        max_items: items held at most; a submit beyond it is dropped and reported through ``on_drop``.
        on_drop: called (on the submitting thread) for each dropped item.
        interval: the worker wakes at least this often (seconds); a submit wakes it early only when
            items pile up, so no item waits much longer than this.
        on_error: called with anything ``process`` raises on the worker thread (even a ``BaseException`` such
            as ``SystemExit``); the worker goes on with the next item.
        on_drained: called (under the drain lock) at the end of every drain, so that ``process`` can keep
            per-item tallies in plain fields and hand them over once per drain.

    A worker thread that died anyway is started again by the next :meth:`submit` that wakes it or the next
    :meth:`drain`.
    """

    def __init__(self, process: Callable[[Any], None], max_items: int, on_drop: Callable[[], None],
                 interval: float = 0.05, on_error: Callable[[BaseException], None] | None = None,
                 on_drained: Callable[[], None] | None = None) -> None:
        self._process = process
        self._on_drained = on_drained
        self._max = max_items
        self._on_drop = on_drop
        self._on_error = on_error
        self.restarts = 0
        self._interval = interval
        self._wake_at = min(256, max_items)
        self._queue: deque[Any] = deque()
        # Reentrant: a listener called while draining may ask for a verdict, which drains again.
        self._drain_lock = threading.RLock()
        self._wake = threading.Event()
        self._stopped = False
        # The thread draining now, if any (a listener that flushes from inside a drain must not wait for itself).
        self._draining: int | None = None
        self._start_worker()
        # A forked child inherits the queue but not the thread; start a new one there.
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (method := ref()) and method())

    def _start_worker(self) -> None:
        # The thread holds only a weak reference, so a processor that is dropped without shutdown()
        # is still collected and its thread ends at the next wake-up.
        self._thread = threading.Thread(
            target=_run, args=(weakref.ref(self), self._wake, self._interval), name="otel_loopguard", daemon=True
        )
        self._thread.start()

    def _after_fork(self) -> None:
        self._drain_lock = threading.RLock()
        self._wake = threading.Event()
        if not self._stopped:
            self._start_worker()

    def submit(self, item: Any) -> None:
        """Queue one item (cheap: no lock on the common path)."""
        queue = self._queue
        if len(queue) >= self._max:
            self._on_drop()
            return
        queue.append(item)
        # Waking the worker costs a lock round trip, so submitters only do it when work piles up;
        # otherwise the worker's own timer picks items up (queries drain by themselves anyway).
        if len(queue) == self._wake_at:
            self._ensure_worker()
            self._wake.set()

    def drain(self) -> None:
        """Process everything queued so far, on the calling thread, in order."""
        self._ensure_worker()
        queue = self._queue
        # The lock even for an empty queue: an item the worker popped may still be in progress.
        process = self._process
        popleft = queue.popleft
        with self._drain_lock:
            self._draining = threading.get_ident()
            try:
                while queue:
                    try:
                        item = popleft()
                    except IndexError:
                        break
                    if item.__class__ is _Mark:
                        item.done.set()
                    else:
                        process(item)
            finally:
                self._draining = None
                if self._on_drained is not None:
                    self._on_drained()

    def flush(self, timeout: float) -> bool:
        """Have everything queued so far processed by the worker; True if that happened within ``timeout``
        seconds. On False the worker goes on and finishes later (like the SDK's batch processors): a slow or hung
        listener must not hold the caller past its deadline."""
        if self._stopped or threading.get_ident() in (self._thread.ident, self._draining):
            # No worker to wait for, or the caller is the one draining (a listener flushing): drain here.
            self.drain()
            return True
        mark = _Mark()
        self._queue.append(mark)  # beyond max_items on purpose: a mark holds nothing and must not be dropped
        self._ensure_worker()
        self._wake.set()
        return mark.done.wait(max(timeout, 0.0))

    def _ensure_worker(self) -> None:
        """Start a new worker thread when the last one died (it never should: see ``_run``)."""
        if not self._stopped and not self._thread.is_alive():
            self.restarts += 1
            self._start_worker()

    def _work(self) -> None:
        """One wake-up of the worker: drain, with whatever escapes ``process`` reported and survived."""
        try:
            self.drain()
        except BaseException as exc:  # noqa: BLE001 - the worker must outlive anything an item raises
            if self._on_error is not None:
                try:
                    self._on_error(exc)
                except BaseException:  # noqa: BLE001 - reporting must not kill the worker either
                    pass


    def shutdown(self, timeout: float = 5.0) -> None:
        """Process what is queued, then stop the worker. Safe to call twice."""
        self._stopped = True
        self._wake.set()
        self.drain()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __len__(self) -> int:
        return len(self._queue)


def _run(ref: weakref.ref[DeferredWork], wake: threading.Event, interval: float) -> None:
    """The worker loop: drain whenever woken or every ``interval`` seconds, until stopped or collected."""
    while True:
        wake.wait(interval)
        wake.clear()
        work = ref()
        if work is None or work._stopped:
            return
        work._work()
        del work  # no strong reference while waiting
