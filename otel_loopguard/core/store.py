"""A bounded, thread-safe map of per-trace state with an idle TTL and counted evictions."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

S = TypeVar("S")

EVICT_CAPACITY = "capacity"
EVICT_IDLE = "idle"


class _Slot(Generic[S]):
    __slots__ = ("lock", "seen", "state")

    def __init__(self, state: S, seen: float) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.seen = seen


class StateStore(Generic[S]):
    """Per-trace states, least recently used first, never more than ``max_entries``.

    Args:
        factory: makes the state of a new trace.
        max_entries: the most traces held; the least recently used is evicted beyond it.
        ttl_seconds: a trace not touched for this long is evicted on the next access to the store.
        on_evict: called with (key, state, reason) for each eviction, outside the store's lock.

    The map lock is held only for dictionary work; each trace has its own lock
    (:meth:`locked`) so threads working on different traces do not wait for each other.
    """

    def __init__(
        self,
        factory: Callable[[], S],
        max_entries: int,
        ttl_seconds: float,
        on_evict: Callable[[Hashable, S, str], None] | None = None,
    ) -> None:
        self._factory = factory
        self._max = max_entries
        self._ttl = ttl_seconds
        self._on_evict = on_evict
        self._slots: OrderedDict[Hashable, _Slot[S]] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._slots)

    def slot(self, key: Hashable, now: float, create: bool = True) -> _Slot[S] | None:
        """The slot of ``key`` (created when missing and ``create``), marked as used at ``now``."""
        evicted: list[tuple[Hashable, S, str]] = []
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None:
                slot.seen = now
                self._slots.move_to_end(key)
            elif create:
                slot = self._slots[key] = _Slot(self._factory(), now)
            self._expire(now, evicted)
        self._report(evicted)
        return slot

    def get(self, key: Hashable) -> S | None:
        """The state of ``key`` without touching its age, or None."""
        slot = self._slots.get(key)
        return slot.state if slot is not None else None

    def pop(self, key: Hashable) -> S | None:
        """Remove and return the state of ``key`` (a finished trace), or None."""
        with self._lock:
            slot = self._slots.pop(key, None)
        return slot.state if slot is not None else None

    def tracked_keys(self) -> list[Hashable]:
        """A snapshot of the keys."""
        with self._lock:
            return list(self._slots)

    def items(self) -> list[tuple[Hashable, S]]:
        """A snapshot of (key, state) pairs."""
        with self._lock:
            return [(k, s.state) for k, s in self._slots.items()]

    def _expire(self, now: float, evicted: list[tuple[Hashable, S, str]]) -> None:
        slots = self._slots
        while len(slots) > self._max:
            key, slot = slots.popitem(last=False)
            evicted.append((key, slot.state, EVICT_CAPACITY))
            self.evicted += 1
        # Ordered by last use, so the idle ones are at the front.
        horizon = now - self._ttl
        while slots:
            key, slot = next(iter(slots.items()))
            if slot.seen > horizon:
                break
            del slots[key]
            evicted.append((key, slot.state, EVICT_IDLE))
            self.evicted += 1

    def _report(self, evicted: list[tuple[Hashable, S, str]]) -> None:
        if evicted and self._on_evict is not None:
            for key, state, reason in evicted:
                self._on_evict(key, state, reason)
