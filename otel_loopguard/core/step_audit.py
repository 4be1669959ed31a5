"""The step audit: a step budget and maximal runs of identical consecutive calls, with an exact output format.

Two forms of one check. :func:`audit_trace` is the reference, over a whole list of steps (dicts with ``tool`` and
``args``). :class:`StepAudit` gives the same answer incrementally, one :class:`ToolCall` at a time, remembering only
the current run (its start, one of its calls and, once computed, its signature) and the violations found, so a
trace of any length costs the same memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .jsontext import REFUSED, loads, parsed
from .model import ToolCall

#: Violations kept per trace at most; a trace with more runs than this (each at least ``repeat_limit`` calls) keeps
#: the first ones found, and :attr:`StepAudit.dropped` counts the runs that ended beyond them (a run still open when
#: the result is read is left out of both: the result is a read, and the trace is not ``ok`` either way).
MAX_VIOLATIONS = 1000


def step_signature(step: Mapping[str, Any]) -> str:
    """``tool|k1=v1,k2=v2`` with the argument names sorted and each value rendered by ``str()``.

    Missing or ``None`` arguments mean no arguments.
    """
    args = step.get("args") or {}
    return f"{step['tool']}|" + ",".join(f"{k}={args[k]}" for k in sorted(args))


def audit_trace(steps: Iterable[Mapping[str, Any]], max_steps: int, repeat_limit: int) -> dict[str, Any]:
    """Audit a trace for the step limit and for runs of identical consecutive steps.

    Args:
        steps: dicts with ``tool`` and optional ``args``.
        max_steps: more steps than this is a ``step_limit:<n>`` violation.
        repeat_limit: every maximal run of at least this many identical steps is a
            ``repeat_loop:<signature>@<start index>`` violation.

    Returns:
        ``{"ok": bool, "steps_used": int, "violations": [str, ...]}`` with the violations sorted.
    """
    steps = list(steps)
    if not steps:
        return {"ok": True, "steps_used": 0, "violations": []}
    violations: list[str] = []
    if len(steps) > max_steps:
        violations.append(f"step_limit:{len(steps)}")
    run_start = 0
    previous: str | None = step_signature(steps[0])
    for index in range(1, len(steps) + 1):
        current = step_signature(steps[index]) if index < len(steps) else None
        if current == previous:
            continue
        # A run ends here (or at the end of the trace, where current is None).
        if index - run_start >= repeat_limit:
            violations.append(f"repeat_loop:{previous}@{run_start}")
        run_start, previous = index, current
    violations.sort()
    return {"ok": not violations, "steps_used": len(steps), "violations": violations}


def step_args(call: ToolCall) -> dict[str, Any]:
    """Arguments as the step audit signs them: a JSON object's members, else the raw value under ``input``."""
    args = call.arguments
    if isinstance(args, str):
        parsed_args: Any = args  # a str, or whatever JSON value it holds
        if args[:1] in ("{", "["):
            # The engine's fingerprint parsed this text moments ago, most of the time: parsed() remembers it.
            parsed_args = parsed(args)
            if parsed_args is REFUSED:
                try:
                    parsed_args = loads(args)
                except (ValueError, RecursionError):
                    parsed_args = args
        args = parsed_args
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    return {"input": args}


def call_signature(call: ToolCall) -> str:
    """The step audit's signature of a tool call (:func:`step_signature` of its :func:`step_args`)."""
    return step_signature({"tool": call.tool, "args": step_args(call)})


_NO_TAIL = ""  # the tail of a call whose signature's end says nothing (see _tail)


def _tail(call: ToolCall) -> str:
    """How a call's signature ends, when that is cheap to tell: the rendering of the value of its last argument (by
    sorted name), for arguments given as the text of a JSON object whose last value is a number, a string, a
    boolean or null rendered without ``=``; else "".

    A signature ends with ``=`` and that rendering, which holds no ``=``: the text after its last ``=``. So two
    calls whose tails are both known and differ have different signatures, told without building either (one tool
    called with a new query each time: the common case).
    """
    args = call.arguments
    if args.__class__ is not str or args[:1] != "{":
        return _NO_TAIL
    value = parsed(args)
    if value.__class__ is not dict or not value:
        return _NO_TAIL
    last = value[max(value)]  # keys of a JSON object are strings: max is the last of sorted()
    cls = last.__class__
    if cls is str:
        text = last
    elif cls is int or cls is float or cls is bool or last is None:
        text = f"{last}"
    else:
        return _NO_TAIL
    return _NO_TAIL if "=" in text or not text else text


def _differ(a: ToolCall, b: ToolCall) -> bool:
    """Whether the two calls surely have different signatures, told by their tails."""
    x = _tail(a)
    if not x:
        return False
    y = _tail(b)
    return bool(y) and x != y


class StepAudit:
    """The step audit of one trace, fed one call at a time; equal to :func:`audit_trace` over the same calls.

    Runs of identical calls lie inside *stretches* of neighbours that may be equal: consecutive calls of one tool
    (or of tools named with ``|``, whose signatures may collide with another tool's). A stretch shorter than
    ``repeat_limit`` cannot hold a violation, so its calls are only buffered (never more than ``repeat_limit``)
    and never signed; once a stretch is that long, neighbours are compared one by one, without building
    signatures where equality is evident (one tool with the same raw arguments), and a run's signature is built
    at most once. Memory: the buffer, the current run's start and one of its calls, and the violations found.

    Args:
        max_steps: more calls than this is a ``step_limit:<n>`` violation.
        repeat_limit: every maximal run of at least this many identical calls is a
            ``repeat_loop:<signature>@<index of its first call>`` violation.
    """

    __slots__ = ("_last", "_last_tail", "_limit", "_max_steps", "_run_signature", "_run_start", "_stretch",
                 "_violations", "count", "dropped")

    def __init__(self, max_steps: int, repeat_limit: int) -> None:
        self._max_steps = max_steps
        self._limit = repeat_limit
        self.count = 0
        self.dropped = 0
        # The current stretch's calls while it is shorter than repeat_limit; None once it is being resolved.
        self._stretch: list[ToolCall] | None = []
        self._run_start = 0
        self._last: ToolCall | None = None  # the previous call (while resolving: a member of the current run)
        self._last_tail: str | None = None  # its _tail, once taken
        self._run_signature: str | None = None  # the current run's signature, once built
        self._violations: list[str] = []

    def add(self, call: ToolCall) -> None:
        """Count one more call (the next in the trace's order)."""
        index = self.count
        self.count = index + 1
        last = self._last
        self._last = call
        tail_known = self._last_tail
        self._last_tail = None
        if last is None:
            self._new_stretch(call, index)
            return
        a, b = last.tool, call.tool
        if a != b and "|" not in a and "|" not in b:
            # A new stretch: the one before ends here, and with it any run being resolved.
            if self._stretch is None:
                self._end_run(index, last, None)
            self._new_stretch(call, index)
            return
        stretch = self._stretch
        if stretch is not None:
            stretch.append(call)
            if len(stretch) >= self._limit:
                self._resolve(stretch, index)
            return
        if _evidently_equal(last, call):
            self._last_tail = tail_known  # the same arguments: the same tail
            return
        # The signatures' ends tell most unequal calls apart: each call's is taken once, while its text is the one
        # parsed last (by the engine's fingerprint).
        tail = self._last_tail = _tail(call)
        last_tail = tail_known if tail_known is not None else _tail(last)
        if tail and last_tail and tail != last_tail:
            self._end_run(index, last, None)  # the new run's signature is built when needed
            return
        signature = call_signature(call)
        if self._signature_of(last) == signature:
            return
        self._end_run(index, last, signature)

    def _new_stretch(self, call: ToolCall, index: int) -> None:
        stretch = self._stretch = [call]
        if self._limit <= 1:
            self._resolve(stretch, index)

    def _resolve(self, stretch: list[ToolCall], index: int) -> None:
        """The stretch (ending with call ``index``) became long enough to hold a run: find where the run of its
        last call starts (runs ending earlier in it are shorter than the limit)."""
        self._stretch = None
        start = len(stretch) - 1
        signature: str | None = None
        while start > 0:
            previous, current = stretch[start - 1], stretch[start]
            if not _evidently_equal(previous, current):
                if _differ(previous, current):
                    break
                if signature is None:
                    signature = call_signature(current)
                if call_signature(previous) != signature:
                    break
            start -= 1
        self._run_start = index - (len(stretch) - 1 - start)
        self._run_signature = signature

    def _signature_of(self, member: ToolCall) -> str:
        signature = self._run_signature
        if signature is None:
            signature = self._run_signature = call_signature(member)
        return signature

    def _end_run(self, index: int, last: ToolCall, next_signature: str | None) -> None:
        # The run of ``last`` ended just before call ``index``, which starts the next one.
        if index - self._run_start >= self._limit:
            self._violate(f"repeat_loop:{self._signature_of(last)}@{self._run_start}")
        self._run_start = index
        self._run_signature = next_signature

    def _violate(self, violation: str) -> None:
        if len(self._violations) < MAX_VIOLATIONS:
            self._violations.append(violation)
        else:
            self.dropped += 1

    def result(self) -> dict[str, Any]:
        """``{"ok": bool, "steps_used": int, "violations": [...]}`` as :func:`audit_trace` gives it (sorted)."""
        violations = list(self._violations)
        last = self._last
        if (last is not None and self._stretch is None and self.count - self._run_start >= self._limit
                and len(violations) < MAX_VIOLATIONS):
            violations.append(f"repeat_loop:{self._signature_of(last)}@{self._run_start}")
        if self.count > self._max_steps:
            violations.append(f"step_limit:{self.count}")
        violations.sort()
        return {"ok": not violations and not self.dropped, "steps_used": self.count, "violations": violations}


def _evidently_equal(a: ToolCall, b: ToolCall) -> bool:
    """Calls of one tool with the very same raw arguments (their signatures are then equal)."""
    if a.tool != b.tool:
        return False
    x, y = a.arguments, b.arguments
    return x is y or (x.__class__ is str and x == y)
