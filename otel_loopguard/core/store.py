"""Per-trace records grouped by trace: the one bounded map every path keeps them in, and the processor's store.

:class:`TraceMap` is the grouping every path shares (the processor through :class:`StateStore`, ``serve``'s table,
``audit``'s collector): records by key, least recently active first, bounded, with a memory of keys that left.
What is evicted when, and what is made of a record that leaves, stays with each path (docs/architecture.md).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

S = TypeVar("S")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
G = TypeVar("G")
X = TypeVar("X")

EVICT_CAPACITY = "capacity"
EVICT_IDLE = "idle"


class Timed(Protocol):
    """A record that knows when it was last active (what :meth:`TraceMap.pop_idle` reads)."""

    seen: float


T = TypeVar("T", bound=Timed)


class TraceMap(Generic[K, V, G]):
    """Per-trace records by key (a trace id, or (tenant, trace id)), least recently active first, and a bounded
    memory of keys that left, so that a late span of a finished or released trace is recognised.

    Not locked: its owner serialises access (the store's or ``serve``'s table lock, ``audit``'s one thread).

    Args:
        max_entries: records held at most; :meth:`add` removes and returns those beyond it, oldest first.
        remember: keys remembered after they left, at most (0: none); :meth:`remember` returns those forgotten.

    Attributes:
        get: the record of a key, or None, its place unchanged (a bound ``dict.get``: the per-span lookup).
        touch: makes a key's record the most recently active (``last=False``: the least).
        recall: the value remembered for a key that left, or None.
    """

    __slots__ = ("_entries", "_gone", "_max", "_max_gone", "get", "recall", "touch")

    def __init__(self, max_entries: int = sys.maxsize, remember: int = 0) -> None:
        entries: OrderedDict[K, V] = OrderedDict()
        gone: OrderedDict[K, G] = OrderedDict()
        self._entries = entries
        self._gone = gone
        self._max = max_entries
        self._max_gone = remember
        self.get = entries.get
        self.touch = entries.move_to_end
        self.recall = gone.get

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def add(self, key: K, value: V) -> list[tuple[K, V]]:
        """Hold ``value`` as the most recently active record of ``key``; returns the records removed beyond
        ``max_entries``, oldest first."""
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        return _beyond(entries, self._max)

    def pop(self, key: K) -> V | None:
        """Remove and return the record of ``key``, or None."""
        return self._entries.pop(key, None)

    def pop_oldest(self) -> tuple[K, V]:
        """Remove and return the least recently active (key, record); KeyError when empty."""
        return self._entries.popitem(last=False)

    def pop_idle(self: TraceMap[K, T, G], horizon: float) -> list[tuple[K, T]]:
        """Remove and return the records last active at or before ``horizon``, oldest first."""
        entries = self._entries
        idle: list[tuple[K, T]] = []
        # Ordered by last activity, so the idle ones are at the front.
        while entries:
            key, value = next(iter(entries.items()))
            if value.seen > horizon:
                break
            del entries[key]
            idle.append((key, value))
        return idle

    def pop_all(self) -> list[tuple[K, V]]:
        """Remove and return every record, oldest first (the memory stays)."""
        items = list(self._entries.items())
        self._entries.clear()
        return items

    def values(self) -> list[V]:
        """The records, oldest first (a snapshot)."""
        return list(self._entries.values())

    def items(self) -> list[tuple[K, V]]:
        """The (key, record) pairs, oldest first (a snapshot)."""
        return list(self._entries.items())

    def remember(self, key: K, value: G) -> list[tuple[K, G]]:
        """Remember ``key`` (with ``value``) as having left; returns the keys forgotten beyond ``remember``, oldest
        first. A key remembered again keeps its place."""
        self._gone[key] = value
        return _beyond(self._gone, self._max_gone)

    def forget(self, key: K) -> G | None:
        """Forget that ``key`` left (it is back); returns what was remembered, or None."""
        return self._gone.pop(key, None)


def _beyond(entries: OrderedDict[K, X], limit: int) -> list[tuple[K, X]]:
    """Remove and return the oldest entries beyond ``limit``, oldest first."""
    beyond: list[tuple[K, X]] = []
    while len(entries) > limit:
        beyond.append(entries.popitem(last=False))
    return beyond


class _Slot(Generic[S]):
    __slots__ = ("lock", "seen", "state")

    def __init__(self, state: S, seen: float) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.seen = seen


class StateStore(Generic[S]):
    """Per-trace states in a :class:`TraceMap`, thread-safe, least recently used first, never more than
    ``max_entries``.

    Args:
        factory: makes the state of a new trace.
        max_entries: the most traces held; the least recently used is evicted beyond it.
        ttl_seconds: a trace not touched for this long is evicted on the next access to the store.
        on_evict: called with (key, state, reason) for each eviction, outside the store's lock.

    The map lock is held only for dictionary work; each trace's slot has its own ``lock``, so threads working on
    different traces do not wait for each other.
    """

    def __init__(
        self,
        factory: Callable[[], S],
        max_entries: int,
        ttl_seconds: float,
        on_evict: Callable[[Hashable, S, str], None] | None = None,
    ) -> None:
        self._factory = factory
        self._ttl = ttl_seconds
        self._on_evict = on_evict
        self._slots: TraceMap[Hashable, _Slot[S], None] = TraceMap(max_entries)
        self._lock = threading.Lock()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._slots)

    def slot(self, key: Hashable, now: float, create: bool = True) -> _Slot[S] | None:
        """The slot of ``key`` (created when missing and ``create``), marked as used at ``now``."""
        evicted: list[tuple[Hashable, S, str]] = []
        slots = self._slots
        with self._lock:
            slot = slots.get(key)
            if slot is not None:
                slot.seen = now
                slots.touch(key)
            elif create:
                slot = _Slot(self._factory(), now)
                for old, dropped in slots.add(key, slot):
                    evicted.append((old, dropped.state, EVICT_CAPACITY))
            for old, dropped in slots.pop_idle(now - self._ttl):
                evicted.append((old, dropped.state, EVICT_IDLE))
            self.evicted += len(evicted)
        self._report(evicted)
        return slot

    def get(self, key: Hashable) -> S | None:
        """The state of ``key`` without touching its age, or None."""
        slot = self._slots.get(key)
        return slot.state if slot is not None else None

    def pop(self, key: Hashable) -> S | None:
        """Remove and return the state of ``key`` (a finished trace), or None."""
        with self._lock:
            slot = self._slots.pop(key)
        return slot.state if slot is not None else None

    def tracked_keys(self) -> list[Hashable]:
        """A snapshot of the keys."""
        with self._lock:
            return [key for key, _ in self._slots.items()]

    def items(self) -> list[tuple[Hashable, S]]:
        """A snapshot of (key, state) pairs."""
        with self._lock:
            return [(k, s.state) for k, s in self._slots.items()]

    def _report(self, evicted: list[tuple[Hashable, S, str]]) -> None:
        if evicted and self._on_evict is not None:
            for key, state, reason in evicted:
                self._on_evict(key, state, reason)
