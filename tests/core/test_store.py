"""The per-trace state store: LRU capacity, idle TTL, eviction counting and many threads at once."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.store import EVICT_CAPACITY, EVICT_IDLE, StateStore

from ._helpers import call, letters


def counter_store(max_entries: int = 100, ttl: float = 1000.0, on_evict: Any = None) -> StateStore[list[int]]:
    """A store whose states are one-element counters."""
    return StateStore(lambda: [0], max_entries, ttl, on_evict)


def test_capacity_evicts_least_recently_used() -> None:
    """Beyond max_entries the least recently used trace goes, and the counter and callback see it."""
    evicted: list[tuple[Hashable, str]] = []
    store = counter_store(2, on_evict=lambda k, s, r: evicted.append((k, r)))
    store.slot("a", 0.0)
    store.slot("b", 1.0)
    store.slot("a", 2.0)  # a is now the most recent
    store.slot("c", 3.0)
    assert len(store) == 2 and store.get("b") is None and store.get("a") is not None
    assert evicted == [("b", EVICT_CAPACITY)] and store.evicted == 1


def test_idle_ttl_evicts_on_the_next_access() -> None:
    """A trace idle for the TTL is evicted the next time the store is used; a recent one stays."""
    evicted: list[tuple[Hashable, str]] = []
    store = counter_store(ttl=10.0, on_evict=lambda k, s, r: evicted.append((k, r)))
    store.slot("old", 0.0)
    store.slot("recent", 5.0)
    store.slot("new", 9.9)
    assert evicted == []
    store.slot("new", 10.0)  # "old" was last seen exactly one TTL ago
    assert evicted == [("old", EVICT_IDLE)]
    store.slot("new", 15.0)  # "recent" was last seen at 5.0: idle for the TTL now
    assert [k for k, _ in evicted] == ["old", "recent"] and store.evicted == 2
    assert [k for k, _ in store.items()] == ["new"]


def test_get_does_not_refresh_and_create_false_does_not_create() -> None:
    """``get`` leaves the age alone and ``slot(create=False)`` never makes a state."""
    store = counter_store(ttl=10.0)
    store.slot("a", 0.0)
    assert store.get("a") == [0]
    assert store.slot("missing", 1.0, create=False) is None and len(store) == 1
    store.slot("b", 10.0)  # any use of the store expires "a", idle for the TTL
    assert store.get("a") is None


def test_pop_removes_without_counting_an_eviction() -> None:
    """A finished trace popped from the store is not an eviction."""
    store = counter_store()
    store.slot("a", 0.0).state[0] = 7
    assert store.pop("a") == [7] and store.pop("a") is None
    assert store.evicted == 0 and len(store) == 0


def test_eviction_callback_runs_outside_the_lock() -> None:
    """The eviction callback may use the store again without deadlocking."""
    seen: list[int] = []
    store: StateStore[list[int]] = StateStore(lambda: [0], 1, 1000.0, lambda k, s, r: seen.append(len(store.items())))
    store.slot("a", 0.0)
    store.slot("b", 1.0)
    assert seen == [1]


def test_evicted_state_is_handed_to_the_callback() -> None:
    """The callback receives the evicted state itself, so the shell can report its final verdict."""
    got: list[Any] = []
    store = counter_store(1, on_evict=lambda k, s, r: got.append(s))
    store.slot("a", 0.0).state[0] = 42
    store.slot("b", 1.0)
    assert got == [[42]]


def run_threads(n: int, target: Any) -> None:
    """Start ``n`` threads that wait on one barrier, run ``target(i)``, and join them all."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_many_threads_on_the_same_trace_lose_no_update() -> None:
    """Sixteen threads observing one trace under its slot lock account for every call."""
    engine = LoopEngine(LoopGuardConfig(max_steps=100_000))
    store = StateStore(engine.new_state, 100, 1000.0)
    calls = letters("abcdefgh")

    def work(i: int) -> None:
        for j in range(400):
            slot = store.slot("trace-1", float(j))
            with slot.lock:
                engine.observe(slot.state, calls[j % len(calls)])

    run_threads(16, work)
    state = store.get("trace-1")
    assert state.steps == 16 * 400
    assert sum(state.counts.values()) == state.window_size == 10


def test_many_threads_on_different_traces() -> None:
    """Threads on their own traces each see exactly their own loop, stuck at their third call."""
    engine = LoopEngine(LoopGuardConfig())
    store = StateStore(engine.new_state, 1000, 1000.0)
    first_stuck: dict[int, int] = {}

    def work(i: int) -> None:
        for j in range(50):
            slot = store.slot(("trace", i), float(j))
            with slot.lock:
                obs = engine.observe(slot.state, call("search", {"q": i}, result=f"r{i}"))
            if obs.verdict.kind == "stuck" and i not in first_stuck:
                first_stuck[i] = obs.index

    run_threads(16, work)
    assert first_stuck == dict.fromkeys(range(16), 2)
    assert all(store.get(("trace", i)).steps == 50 for i in range(16))


def test_many_threads_over_capacity_keep_the_bound() -> None:
    """Threads creating far more traces than the capacity leave exactly the capacity, every eviction counted once."""
    evictions: list[str] = []
    lock = threading.Lock()

    def on_evict(key: Hashable, state: list[int], reason: str) -> None:
        with lock:
            evictions.append(reason)

    store = StateStore(lambda: [0], 50, 1000.0, on_evict)

    def work(i: int) -> None:
        for j in range(200):
            slot = store.slot((i, j), 0.0)
            with slot.lock:
                slot.state[0] += 1

    run_threads(8, work)
    assert len(store) == 50
    assert store.evicted == 8 * 200 - 50 == len(evictions)
    assert set(evictions) == {EVICT_CAPACITY}
