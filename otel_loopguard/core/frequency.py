"""The frequency detector: one call seen at least ``frequency_limit`` times in the window (rule ``frequency``).

The rule for repetition that is not periodic (``A x A y A``). It keeps counts, never scans the window: each
call is counted on three levels, each refining the one before, and a call moves down a level only when the rule is
asked about a call whose count at that level reached the tool's limit (below it, no signature there can be
frequent):

1. calls per tool, counted as calls arrive;
2. calls per fingerprint (:meth:`~.window.Signatures.bucket`: equal signatures have equal fingerprints), computed
   once the tool is frequent;
3. calls per signature (the canonical arguments), computed once the fingerprint is frequent.

Every call is refined at most once, so the work is O(1) amortised per call whatever the window size, and only when
the rule is asked (the decision order asks only when no period was found). The calls waiting at a level are kept
oldest first, so the call leaving a full window is always the first of its list. The repeated calls' evidence is
compared only when the decision order asks for it.

>>> from otel_loopguard.core.engine import LoopEngine
>>> from otel_loopguard.core.model import ToolCall
>>> engine = LoopEngine()
>>> state = engine.new_state()
>>> calls = [ToolCall("search", {"q": q}, result="none", result_captured=True) for q in ["a", "b", "a", "c", "a"]]
>>> [(o.verdict.kind, o.verdict.rule, o.verdict.repetitions) for o in (engine.observe(state, c) for c in calls)][-1]
('stuck', 'frequency', 3)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .model import RULE_FREQUENCY
from .window import Call, Repetition, Signatures

__all__ = ["FrequencyDetector", "FrequencyState"]


class _Group:
    """The window's calls with one signature, oldest first, and how many lack evidence or are not permanent failures."""

    __slots__ = ("calls", "incomplete", "not_permanent")

    def __init__(self) -> None:
        self.calls: deque[Call] = deque()
        self.incomplete = 0
        self.not_permanent = 0


class FrequencyState:
    """One trace's counts: per tool, per fingerprint, per signature, with the calls not refined yet."""

    __slots__ = ("bucket_wait", "buckets", "groups", "tool_wait", "tools")

    def __init__(self) -> None:
        self.tools: dict[str, int] = {}
        self.tool_wait: dict[str, deque[Call]] = {}
        self.buckets: dict[tuple[str, Any], int] = {}
        self.bucket_wait: dict[tuple[str, Any], deque[Call]] = {}
        self.groups: dict[tuple[str, str], _Group] = {}


class FrequencyDetector:
    """Counts calls in the window and finds the latest call's signature at its tool's frequency limit.

    Args:
        signatures: fingerprints and canonical arguments of calls.
    """

    def __init__(self, signatures: Signatures) -> None:
        self._signatures = signatures
        self._bucket = signatures.bucket
        self._canonical = signatures.canonical

    @staticmethod
    def new_state() -> FrequencyState:
        """Counts of a new trace."""
        return FrequencyState()

    def update(self, state: FrequencyState, call: Call, evicted: Call | None) -> None:
        """Count a call that entered the window, and uncount the one that left it (always the oldest), if any."""
        if evicted is not None and not evicted.rules.exempt:
            # The oldest call of the window is the oldest of its tool, of its fingerprint and of its signature, so
            # it is the first of whichever list holds it.
            tool = evicted.tool
            _decrement(state.tools, tool)
            key = evicted.bucket
            if key is None:
                _pop_first(state.tool_wait, tool)
            else:
                _decrement(state.buckets, key)
                group_key = evicted.group
                if group_key is None:
                    _pop_first(state.bucket_wait, key)
                else:
                    group = state.groups[group_key]
                    group.calls.popleft()
                    if evicted.incomplete:
                        group.incomplete -= 1
                    if not evicted.permanent:
                        group.not_permanent -= 1
                    if not group.calls:
                        del state.groups[group_key]
        if call.rules.exempt:  # never judged by frequency, so never counted
            return
        tool = call.tool
        state.tools[tool] = state.tools.get(tool, 0) + 1
        waiting = state.tool_wait.get(tool)
        if waiting is None:
            state.tool_wait[tool] = deque((call,))
        else:
            waiting.append(call)

    def find(self, state: FrequencyState, current: Call) -> Repetition | None:
        """The repetition of ``current`` (the newest call) in the window, or None."""
        rules = current.rules
        if rules.exempt:
            return None
        limit = rules.limit
        tool = current.tool
        if state.tools[tool] < limit:
            return None  # its signature cannot be more frequent than its tool
        buckets = state.buckets
        waiting = state.tool_wait.get(tool)
        if waiting is not None:
            bucket_of = self._bucket
            target = (tool, bucket_of(current))
            _settle(waiting, target, buckets.get(target, 0), limit, current, lambda call: (tool, bucket_of(call)),
                    self._to_bucket, state)
            if not waiting:
                del state.tool_wait[tool]
            if current.bucket is None:
                return None  # too few of the tool's calls can share its fingerprint
        bucket = current.bucket
        if buckets[bucket] < limit:
            return None  # nor more frequent than its fingerprint
        groups = state.groups
        waiting = state.bucket_wait.get(bucket)
        if waiting is not None:
            canonical = self._canonical
            target = current.group or (tool, canonical(current))
            group = groups.get(target)
            _settle(waiting, target, 0 if group is None else len(group.calls), limit, current,
                    lambda call: (tool, canonical(call)), self._to_group, state)
            if not waiting:
                del state.bucket_wait[bucket]
            if current.group is None:
                return None
        group = groups[current.group]
        same = group.calls
        if len(same) < limit:
            return None
        one_evidence = self._signatures.one_evidence
        return Repetition(
            RULE_FREQUENCY, None, len(same), same[0].index, current,
            incomplete=group.incomplete > 0,
            retry_applies=True,
            permanent=group.not_permanent == 0,
            unchanged=lambda: one_evidence(same),
        )

    @staticmethod
    def _to_bucket(state: FrequencyState, call: Call, key: Any) -> None:
        call.bucket = key
        buckets = state.buckets
        buckets[key] = buckets.get(key, 0) + 1
        waiting = state.bucket_wait.get(key)
        if waiting is None:
            state.bucket_wait[key] = deque((call,))
        else:
            waiting.append(call)

    @staticmethod
    def _to_group(state: FrequencyState, call: Call, key: Any) -> None:
        call.group = key
        group = state.groups.get(key)
        if group is None:
            group = state.groups[key] = _Group()
        group.calls.append(call)
        if call.incomplete:
            group.incomplete += 1
        if not call.permanent:
            group.not_permanent += 1


def _settle(waiting: deque[Call], target: Any, known: int, limit: int, current: Call,
            key_of: Callable[[Call], Any], place: Callable[[FrequencyState, Call, Any], None],
            state: FrequencyState) -> None:
    """Move waiting calls (oldest first, ``current`` last) one level down until it is settled whether ``current``'s
    key (``target``) can hold ``limit`` calls: all of them when it can, else up to the point where too few can (the
    rest stay, in order, ``current`` among them).

    Args:
        known: calls already at the lower level with key ``target``.
    """
    possible = known + len(waiting)
    if possible < limit:
        return
    while waiting:
        call = waiting.popleft()
        key = target if call is current else key_of(call)
        place(state, call, key)
        if key != target:
            possible -= 1
            if possible < limit:
                return


def _decrement(counts: dict[Any, int], key: Any) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def _pop_first(waiting: dict[Any, deque[Call]], key: Any) -> None:
    calls = waiting[key]
    calls.popleft()
    if not calls:
        del waiting[key]
