"""Verdicts seen with no backend: one human-readable line per transition and intervention on a Python logger.

With no logs exporter configured, ``loopguard.verdict`` events go nowhere a newcomer can see; these lines go to the
``otel_loopguard`` logger (WARNING for stuck and stop, INFO otherwise), which :func:`attach_stderr` sends to
standard error unless the application configured logging itself. Every name in a line is bounded and escaped.
"""

from __future__ import annotations

import logging
import sys

from ..conventions import names as n
from ..conventions.verdicts import VerdictEvent
from ..core.escape import bounded_name, escaped
from ..core.model import RULE_FREQUENCY, RULE_PERIOD, STUCK

__all__ = ["ConsoleLines", "attach_stderr", "console_line"]

_logger = logging.getLogger(n.CONSOLE_LOGGER)
#: Hex digits of the trace id a line shows (the status page and events carry the full id).
TRACE_ID_DIGITS = 8
_ELLIPSIS = "\u2026"


def _name(text: str) -> str:
    return escaped(bounded_name(text))


def _change(event: VerdictEvent) -> str:
    """``working -> stuck (period 1, search x3)``, or the verdict alone when only an intervention happened."""
    verdict = event.verdict
    if event.transition is None:
        return verdict.kind
    detail = f"rule {verdict.rule}"
    if verdict.kind == STUCK and verdict.rule in (RULE_PERIOD, RULE_FREQUENCY):
        head = f"period {verdict.period}" if verdict.rule == RULE_PERIOD else RULE_FREQUENCY
        tool = verdict.tool or event.tool
        count = f" x{verdict.repetitions}" if verdict.repetitions is not None else ""
        detail = f"{head}, {_name(tool)}{count}" if tool else head
    return f"{event.transition.previous} -> {verdict.kind} ({detail})"


def console_line(event: VerdictEvent) -> str:
    """The event as one line: ``loopguard: trace 4bf92f35… agent weather_agent: working -> stuck (period 1,
    search x3) nudge``; an intervention without a change of verdict reads ``stuck, stop (step_limit)``."""
    trace = f"{event.trace_id:032x}"[:TRACE_ID_DIGITS] + _ELLIPSIS
    agent = f" agent {_name(event.agent)}" if event.agent else ""
    line = f"loopguard: trace {trace}{agent}: {_change(event)}"
    intervention = event.intervention
    if intervention is not None and intervention.action != "none":
        joiner = " " if event.transition is not None else ", "
        line += f"{joiner}{intervention.action}"
        if event.transition is None or intervention.rule != event.verdict.rule:
            line += f" ({escaped(intervention.rule)})"
    if event.provisional:
        line += " (provisional)"
    return line


def _level(event: VerdictEvent) -> int:
    stop = event.intervention is not None and event.intervention.action == "stop"
    return logging.WARNING if stop or event.verdict.kind == STUCK else logging.INFO


class ConsoleLines:
    """A verdict listener writing :func:`console_line` to the ``otel_loopguard`` logger."""

    def __init__(self, logger: logging.Logger = _logger) -> None:
        self._logger = logger

    def __call__(self, event: VerdictEvent) -> None:
        self._logger.log(_level(event), "%s", console_line(event))


def attach_stderr(logger: logging.Logger = _logger) -> logging.Handler | None:
    """Send ``logger``'s INFO lines to standard error, unless logging is configured already (the root logger or
    ``logger`` has a handler). Returns the handler it added, or None. Safe to call twice."""
    if logging.getLogger().handlers or logger.handlers:
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler
