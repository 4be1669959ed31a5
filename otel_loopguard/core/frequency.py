"""The frequency detector: one call seen at least ``frequency_limit`` times in the window (rule ``frequency``).

The frequency rule, for repetition that is not periodic (``A x A y A``). A signature cannot repeat more often than its
tool, so calls are compared only once their tool is frequent enough, and only with calls of that tool.
"""

from __future__ import annotations

from collections import deque

from .model import RULE_FREQUENCY
from .window import Call, Repetition, Signatures

__all__ = ["FrequencyDetector"]


class FrequencyDetector:
    """Finds the latest call's signature repeated at least its tool's frequency limit in the window.

    Args:
        signatures: compares calls.
    """

    def __init__(self, signatures: Signatures) -> None:
        self._signatures = signatures

    def find(self, calls: deque[Call], tool_count: int) -> Repetition | None:
        """The repetition of the newest call in the window ``calls``, or None.

        Args:
            tool_count: calls of the newest call's tool in the window.
        """
        current = calls[-1]
        rules = current.rules
        if rules.exempt or tool_count < rules.limit:
            return None
        same = self.same_calls(calls, current, tool_count)
        if same is None:
            return None
        return Repetition(
            RULE_FREQUENCY, None, len(same), same[0].index, current,
            incomplete=any(c.incomplete for c in same),
            retry_applies=True,
            permanent=all(c.permanent for c in same),
            unchanged=lambda: self._signatures.one_evidence(same),
        )

    def same_calls(self, calls: deque[Call], current: Call, possible: int) -> list[Call] | None:
        """The window's calls with ``current``'s signature when at least its tool's frequency limit, else None.

        Args:
            possible: calls of ``current``'s tool in the window (an upper bound on the answer's length).
        """
        signatures = self._signatures
        tool = current.tool
        limit = current.rules.limit
        same = []
        raw = current.raw
        canon = current.canon
        differ = signatures.differ
        canonical = signatures.canonical
        for c in calls:
            if c.tool == tool:
                if c is current or (raw is not None and c.raw == raw):
                    same.append(c)
                    continue
                other = c.canon
                if other is None and canon is None and differ(current, c):
                    equal = False
                else:
                    if other is None:
                        other = canonical(c)
                    if canon is None:
                        canon = canonical(current)
                    equal = other == canon
                if equal:
                    same.append(c)
                else:
                    # Stop as soon as too few calls can still share the signature.
                    possible -= 1
                    if possible < limit:
                        return None
        return same if len(same) >= limit else None
