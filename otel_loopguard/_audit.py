"""The seed-000 audit: a step budget and maximal runs of identical calls, in one pass."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


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
    run_start, previous = 0, step_signature(steps[0])
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
