"""The step audit: a step budget and maximal runs of identical consecutive calls, in one pass (exact output)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress, islice
from operator import attrgetter, ne
from typing import Any

from .jsontext import loads
from .model import ToolCall

_TOOL = attrgetter("tool")


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


def audit_calls(calls: list[ToolCall], max_steps: int, repeat_limit: int) -> dict[str, Any]:
    """The step audit of ``calls``: equal to ``audit_trace`` of their :func:`step_args` steps, but cheaper.

    Signatures are built only where equality is not evident: calls of different tools (names without ``|``)
    differ, and calls of the same tool with identical raw arguments are equal; only the rest (and the first
    call of each long run, for the message) pay for parsing the arguments, and only inside stretches of
    possibly equal neighbours long enough to hold a run of ``repeat_limit`` calls.
    """
    count = len(calls)
    if count == 0:
        return audit_trace([], max_steps, repeat_limit)
    sigs: list[str | None] = [None] * count

    def sig(i: int) -> str:
        s = sigs[i]
        if s is None:
            s = sigs[i] = step_signature({"tool": calls[i].tool, "args": step_args(calls[i])})
        return s

    def same_as_previous(i: int) -> bool:
        a, b = calls[i - 1], calls[i]
        if a.tool == b.tool:
            if a.arguments is b.arguments or (a.arguments.__class__ is str and a.arguments == b.arguments):
                return True
        elif "|" not in a.tool and "|" not in b.tool:
            return False
        return sig(i - 1) == sig(i)

    violations: list[str] = []
    if count > max_steps:
        violations.append(f"step_limit:{count}")
    # A run of equal calls lies inside a stretch of calls whose neighbours may be equal (same tool, or a name
    # with "|" that could collide with another signature); only stretches long enough to hold a violating run
    # are compared call by call.
    tools = list(map(_TOOL, calls))
    stretches: Iterable[tuple[int, int]]
    if "|" in "".join(tools):
        stretches = _stretches_with_pipes(tools)
    else:
        # Stretches are runs of one tool name: their boundaries are where the name changes, found in C.
        bounds = [0, *compress(range(1, count), map(ne, islice(tools, 1, None), tools)), count]
        stretches = zip(bounds, islice(bounds, 1, None))
    for start, end in stretches:
        if end - start >= repeat_limit:
            run_start = start
            for index in range(start + 1, end + 1):
                if index < end and same_as_previous(index):
                    continue
                if index - run_start >= repeat_limit:
                    violations.append(f"repeat_loop:{sig(run_start)}@{run_start}")
                run_start = index
    violations.sort()
    return {"ok": not violations, "steps_used": count, "violations": violations}


def _stretches_with_pipes(tools: list[str]) -> list[tuple[int, int]]:
    """Stretches of possibly equal neighbours when a name holds "|" (its signature may equal another tool's)."""
    out = []
    count = len(tools)
    start = 0
    while start < count:
        end = start + 1
        while end < count and (tools[end] == tools[end - 1] or "|" in tools[end] or "|" in tools[end - 1]):
            end += 1
        out.append((start, end))
        start = end
    return out
