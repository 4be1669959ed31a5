"""The step audit: a step budget and maximal runs of identical consecutive calls, with an exact output format.

Two forms of one check. :func:`audit_trace` is the reference, over a whole list of steps (dicts with ``tool`` and
``args``). :class:`StepAudit` gives the same answer incrementally, one :class:`ToolCall` at a time, remembering only
the current run (its start, one of its calls and, once computed, its signature) and the violations found, so a
trace of any length costs the same memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .jsontext import loads
from .model import ToolCall

#: Violations kept per trace at most; a trace with more runs than this (each at least ``repeat_limit`` calls) keeps
#: the first ones found, and :attr:`StepAudit.dropped` counts the rest.
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
        try:
            parsed = loads(args) if args[:1] in ("{", "[") else args
        except (ValueError, RecursionError):
            parsed = args
        args = parsed
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    return {"input": args}


def call_signature(call: ToolCall) -> str:
    """The step audit's signature of a tool call (:func:`step_signature` of its :func:`step_args`)."""
    return step_signature({"tool": call.tool, "args": step_args(call)})


class StepAudit:
    """The step audit of one trace, fed one call at a time; equal to :func:`audit_trace` over the same calls.

    Two neighbours are compared without building signatures where equality is evident: calls of different tools
    (names without ``|``, which cannot collide with another tool's signature) differ, and calls of one tool with
    the same raw arguments are equal. Only the rest parse their arguments, and a run's signature is built at most
    once.

    Args:
        max_steps: more calls than this is a ``step_limit:<n>`` violation.
        repeat_limit: every maximal run of at least this many identical calls is a
            ``repeat_loop:<signature>@<index of its first call>`` violation.
    """

    __slots__ = ("_last", "_limit", "_max_steps", "_run_signature", "_run_start", "_violations", "count", "dropped")

    def __init__(self, max_steps: int, repeat_limit: int) -> None:
        self._max_steps = max_steps
        self._limit = repeat_limit
        self.count = 0
        self.dropped = 0
        self._run_start = 0
        self._last: ToolCall | None = None  # the previous call: a member of the current run
        self._run_signature: str | None = None  # the current run's signature, once built
        self._violations: list[str] = []

    def add(self, call: ToolCall) -> None:
        """Count one more call (the next in the trace's order)."""
        index = self.count
        self.count = index + 1
        last = self._last
        self._last = call
        if last is None:
            return
        if last.tool == call.tool:
            a, b = last.arguments, call.arguments
            if a is b or (a.__class__ is str and a == b):
                return
        elif "|" not in last.tool and "|" not in call.tool:
            self._end_run(index, last, None)
            return
        signature = call_signature(call)
        if self._signature_of(last) == signature:
            return
        self._end_run(index, last, signature)

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
        if last is not None and self.count - self._run_start >= self._limit and len(violations) < MAX_VIOLATIONS:
            violations.append(f"repeat_loop:{self._signature_of(last)}@{self._run_start}")
        if self.count > self._max_steps:
            violations.append(f"step_limit:{self.count}")
        violations.sort()
        return {"ok": not violations and not self.dropped, "steps_used": self.count, "violations": violations}
