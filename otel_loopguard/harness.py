"""Helpers for agent harnesses: deliver nudges in tool results and stop runs that loopguard stopped."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from .core.model import Intervention
from .core.signature import NUDGE_MARKER

__all__ = ["NUDGE_MARKER", "guard_tool", "with_nudge"]

F = TypeVar("F", bound=Callable[..., Any])


class _Checks(Protocol):
    def check(self, trace_id: int | str | None = None) -> Intervention: ...


def with_nudge(result: Any, intervention: Intervention) -> Any:
    """Append a nudge to a tool result (text results only); other interventions leave it unchanged.

    The nudge follows :data:`NUDGE_MARKER`, which the engine strips from result evidence,
    so telling the model about a loop is not mistaken for progress.
    """
    if intervention.action != "nudge" or not isinstance(result, str):
        return result
    return f"{result}{NUDGE_MARKER}{intervention.message}"


def guard_tool(guard: _Checks) -> Callable[[F], F]:
    """Decorate a tool function so that loopguard's verdict reaches the model and the run.

    Before the tool runs, a trace that loopguard stopped raises :class:`LoopStopped`
    (ending the agent run with a clear status), and one waiting for a review raises
    :class:`ReviewPending` (the run pauses until the application answers with
    ``resolve``); after it runs, a pending nudge is
    appended to its text result. Works for plain and ``async`` functions, and keeps
    the signature so frameworks still derive the tool schema from it.

    Args:
        guard: a :class:`LoopGuardSpanProcessor` (anything with ``check()``).
    """

    def decorate(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                intervention = guard.check()
                intervention.raise_if_blocked()
                return with_nudge(await fn(*args, **kwargs), intervention)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            intervention = guard.check()
            intervention.raise_if_blocked()
            return with_nudge(fn(*args, **kwargs), intervention)

        return wrapper  # type: ignore[return-value]

    return decorate
