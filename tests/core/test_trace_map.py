"""The one per-trace map every path groups spans in: order of activity, capacity, idle expiry, memory of keys that
left."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from otel_loopguard.core.store import TraceMap


@dataclass
class Rec:
    """A record that knows when it was last active."""

    seen: float


def test_capacity_returns_the_least_recently_active_first() -> None:
    """With room for 2: a, b, touch a, add c, d: b then a leave, in that order, and c and d stay."""
    traces: TraceMap[str, str, None] = TraceMap(2)
    assert traces.add("a", "A") == [] and traces.add("b", "B") == []
    traces.touch("a")
    assert traces.add("c", "C") == [("b", "B")]
    assert traces.add("d", "D") == [("a", "A")]
    assert traces.items() == [("c", "C"), ("d", "D")] and len(traces) == 2
    assert "a" not in traces and "d" in traces and traces.get("c") == "C" and traces.get("a") is None


def test_adding_a_held_key_again_makes_it_the_most_recent() -> None:
    """a, b, then a again with a new record: b is the oldest, a holds the new record."""
    traces: TraceMap[str, str, None] = TraceMap()
    traces.add("a", "A1")
    traces.add("b", "B")
    traces.add("a", "A2")
    assert traces.items() == [("b", "B"), ("a", "A2")]


def test_touch_last_false_makes_a_key_the_least_recent() -> None:
    """touch(c, last=False) puts c first, so pop_oldest returns it."""
    traces: TraceMap[str, str, None] = TraceMap()
    for key in "abc":
        traces.add(key, key.upper())
    traces.touch("c", last=False)
    assert traces.pop_oldest() == ("c", "C")
    assert traces.values() == ["A", "B"]


def test_pop_oldest_of_an_empty_map_raises_key_error() -> None:
    """Nothing held: pop_oldest raises KeyError, as OrderedDict.popitem does."""
    with pytest.raises(KeyError):
        TraceMap[str, str, None]().pop_oldest()


def test_pop_idle_takes_those_last_active_at_or_before_the_horizon() -> None:
    """Seen at 1, 2 and 5: a horizon of 2 takes the first two (2 is not after it), oldest first; 5 stays."""
    traces: TraceMap[str, Rec, None] = TraceMap()
    a, b, c = Rec(1.0), Rec(2.0), Rec(5.0)
    traces.add("a", a)
    traces.add("b", b)
    traces.add("c", c)
    assert traces.pop_idle(2.0) == [("a", a), ("b", b)]
    assert traces.pop_idle(4.9) == [] and traces.values() == [c]


def test_pop_and_pop_all() -> None:
    """pop removes one key (None when missing); pop_all empties the map oldest first and keeps the memory."""
    traces: TraceMap[str, str, bool] = TraceMap(remember=4)
    for key in "abc":
        traces.add(key, key.upper())
    traces.remember("z", True)
    assert traces.pop("b") == "B" and traces.pop("b") is None
    assert traces.pop_all() == [("a", "A"), ("c", "C")]
    assert len(traces) == 0 and traces.recall("z") is True


def test_memory_is_bounded_and_forgets_the_oldest_key() -> None:
    """Room for 2 remembered keys: x, y, then z forgets x; y remembered again keeps its place, so w forgets y."""
    traces: TraceMap[str, str, int] = TraceMap(remember=2)
    assert traces.remember("x", 1) == [] and traces.remember("y", 2) == []
    assert traces.remember("z", 3) == [("x", 1)]
    assert traces.recall("x") is None and traces.recall("y") == 2
    assert traces.remember("y", 4) == []
    assert traces.remember("w", 5) == [("y", 4)]
    assert traces.recall("z") == 3 and traces.recall("w") == 5


def test_forget_returns_what_was_remembered() -> None:
    """A key that comes back is forgotten: forget returns its value once, then None."""
    traces: TraceMap[str, str, str] = TraceMap(remember=8)
    traces.remember("k", "done")
    assert traces.forget("k") == "done" and traces.forget("k") is None and traces.recall("k") is None


def test_without_memory_a_remembered_key_is_forgotten_at_once() -> None:
    """The default remembers nothing: remember returns the key it was given as forgotten."""
    traces: TraceMap[str, str, bool] = TraceMap()
    assert traces.remember("k", True) == [("k", True)] and traces.recall("k") is None
