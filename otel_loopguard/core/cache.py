"""The one bounded cache of the package: a dict that empties itself when full.

Every memo whose keys come from spans (argument texts, tool names, ids, key spellings) is one of these, so no cache
grows with traffic. Emptied rather than trimmed: a miss only costs the computation again, and a cache shared
between threads needs no lock, because reading, writing and clearing one key or the whole dict are each atomic
under the GIL (no two-step update can interleave).

>>> cache = BoundedCache(2)
>>> cache.put("a", 1), cache.put("b", 2), cache.get("a")
(1, 2, 1)
>>> cache.put("c", 3), len(cache), cache.get("a")  # full: emptied, then "c" stored
(3, 1, None)
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["MAX_KEY_CHARS", "BoundedCache", "small"]

#: The most characters of strings a cache key built from span data may hold: entries are bounded in number, and a
#: sender choosing 1 MB attribute keys would otherwise make 1 024 entries hold a gigabyte.
MAX_KEY_CHARS = 4096

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A memo of at most ``max_entries`` entries: a plain dict (lookups are dict lookups) with a bounded ``put``.

    Args:
        max_entries: entries held; storing one more empties the cache first.
    """

    __slots__ = ("max_entries",)

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (emptying the cache first when it is full) and return it."""
        if len(self) >= self.max_entries:
            self.clear()
        self[key] = value
        return value


def small(strings: tuple[str, ...]) -> bool:
    """Whether a key made of ``strings`` is small enough to be cached (:data:`MAX_KEY_CHARS` characters in all)."""
    return sum(map(len, strings)) <= MAX_KEY_CHARS
