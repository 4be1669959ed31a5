"""The frequency detector: one call seen at least ``frequency_limit`` times in the window (rule ``frequency``).

The rule for repetition that is not periodic (``A x A y A``). It keeps counts and never scans the window: each
call is counted on up to three levels, each refining the one before, and only where the level above reached the
tool's limit (below it, no signature there can be frequent):

1. calls per tool, counted as calls arrive;
2. calls per fingerprint (:meth:`~.window.Signatures.bucket`: equal signatures have equal fingerprints), taken
   when the rule is asked about a call of a frequent tool (the decision order asks only when no period was found,
   so a loop's calls are mostly never sorted);
3. calls per signature (the canonical arguments), taken when the rule is asked about a call whose fingerprint is
   frequent, until it is settled whether that call's signature can be.

Every call moves down a level at most once, so the work is O(1) amortised per call whatever the window size. The
calls waiting at a level are kept oldest first, so the call leaving a full window is always the first of its list.
The repeated calls' evidence is compared only when the decision order asks for it.

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

from msgspec import Struct, field

from .model import RULE_FREQUENCY
from .window import Call, Repetition, Signatures

__all__ = ["FrequencyDetector", "FrequencyState"]


class _Count(Struct, gc=False):
    """Calls of one tool (or of one fingerprint) in the window, and those of them not sorted a level down yet (oldest
    first). A struct built in C: one is made per fingerprint of a frequent tool's calls."""

    count: int = 0
    waiting: deque[Call] = field(default_factory=deque)


class _Group(Struct, gc=False):
    """The window's calls with one signature, oldest first, and how many lack evidence or are not permanent failures."""

    calls: deque[Call] = field(default_factory=deque)
    incomplete: int = 0
    not_permanent: int = 0


class FrequencyState:
    """One trace's counts: per tool, per fingerprint, per signature."""

    __slots__ = ("buckets", "groups", "tools")

    def __init__(self) -> None:
        self.tools: dict[str, _Count] = {}
        # A fingerprint held by one call maps to that call (most fingerprints of a tool with many arguments).
        self.buckets: dict[tuple[str, Any], _Count | Call] = {}
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

    def add(self, state: FrequencyState, call: Call, evicted: Call | None, ask: bool) -> Repetition | bool | None:
        """Count a call that entered the window, and uncount the one that left it (always the oldest), if any; then,
        when ``ask``, the repetition of ``call`` (:meth:`find`), else False (not looked for)."""
        tools = state.tools
        if evicted is not None and not evicted.rules.exempt:
            # The oldest call of the window is the oldest of its tool, of its fingerprint and of its signature, so
            # it is the first of whichever list holds it.
            tool = evicted.tool
            counted = tools[tool]
            counted.count -= 1
            key = evicted.bucket
            if key is None:
                counted.waiting.popleft()
            elif state.buckets[key] is evicted:  # the only call with its fingerprint
                del state.buckets[key]
            else:
                _forget(state, evicted, key)
            if not counted.count:
                del tools[tool]
        rules = call.rules
        if rules.exempt:  # never judged by frequency, so never counted
            return None if ask else False
        tool = call.tool
        entry = tools.get(tool)
        if entry is None:
            entry = tools[tool] = _Count()
        entry.count += 1
        entry.waiting.append(call)
        if not ask:
            return False
        if entry.count < rules.limit:
            return None  # its signature cannot be more frequent than its tool
        return self.find(state, call)

    def _sort_waiting(self, waiting: deque[Call], tool: str, buckets: dict[tuple[str, Any], Any]) -> None:
        """Sort a frequent tool's waiting calls by fingerprint, oldest first (a loop's calls often repeat the same
        raw text, whose fingerprint is taken once)."""
        bucket_of = self._bucket
        last_raw: str | None = None
        key: tuple[str, Any] = (tool, None)
        while waiting:
            call = waiting.popleft()
            raw = call.raw
            if raw is None or raw != last_raw:
                key = (tool, bucket_of(call))
                last_raw = raw
            call.bucket = key
            held = buckets.get(key)
            if held is None:
                buckets[key] = call
            elif isinstance(held, _Count):
                held.count += 1
                held.waiting.append(call)
            else:
                buckets[key] = _Count(2, deque((held, call)))

    def find(self, state: FrequencyState, current: Call) -> Repetition | None:
        """The repetition of ``current`` (the newest call) in the window, or None."""
        rules = current.rules
        if rules.exempt:
            return None
        limit = rules.limit
        tool = current.tool
        counted = state.tools[tool]
        if counted.count < limit:
            return None  # its signature cannot be more frequent than its tool
        buckets = state.buckets
        if counted.waiting:
            self._sort_waiting(counted.waiting, tool, buckets)
        bucket = current.bucket
        held = buckets[bucket]
        if not isinstance(held, _Count):
            return None  # the only call with its fingerprint (a limit is at least 2: the configuration says so)
        fingerprint = held
        if fingerprint.count < limit:
            return None  # nor more frequent than its fingerprint
        groups = state.groups
        waiting = fingerprint.waiting
        if waiting:
            canonical = self._canonical
            target = current.group or (tool, canonical(current))
            group = groups.get(target)
            _settle(waiting, target, 0 if group is None else len(group.calls), limit, current,
                    lambda call: (tool, canonical(call)), _to_group, state)
            if current.group is None:
                return None  # too few of the fingerprint's calls can share its signature
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
            _unchanged=lambda: one_evidence(same),  # compared when asked
        )


def _forget(state: FrequencyState, call: Call, key: Any) -> None:
    """Uncount a call sorted by fingerprint (key ``key``) that left the window."""
    buckets = state.buckets
    fingerprint = buckets[key]
    assert isinstance(fingerprint, _Count)  # a lone call is uncounted by the caller
    fingerprint.count -= 1
    group_key = call.group
    if group_key is None:
        fingerprint.waiting.popleft()
    else:
        group = state.groups[group_key]
        group.calls.popleft()
        if call.incomplete:
            group.incomplete -= 1
        if not call.permanent:
            group.not_permanent -= 1
        if not group.calls:
            del state.groups[group_key]
    if not fingerprint.count:
        del buckets[key]


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
