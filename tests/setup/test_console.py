"""The human-readable verdict line: exact words, bounded and escaped names, level by severity."""

from __future__ import annotations

import logging
import re

import pytest

from otel_loopguard import Intervention, Transition, Verdict
from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.sdk.console import ConsoleLines, console_line
from otel_loopguard.sdk.providers import exporter_names, exporters_for

_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736


def _event(verdict: Verdict, previous: str | None = "working", intervention: Intervention | None = None,
           agent: str | None = "weather_agent") -> VerdictEvent:
    transition = Transition(verdict.step, previous, verdict) if previous else None  # type: ignore[arg-type]
    return VerdictEvent(trace_id=_TRACE, span_context=None, verdict=verdict, transition=transition,
                        intervention=intervention, tool=verdict.tool, agent=agent, conversation=None,
                        signature_digest=None, steps=verdict.step + 1, timestamp_ns=None)


def test_stuck_with_a_nudge_reads_as_one_line() -> None:
    """A period-1 stuck transition with its nudge gives the documented line, trace id cut to 8 hex digits."""
    stuck = Verdict("stuck", "period", 2, period=1, repetitions=3, cycle_start=0, tool="search")
    line = console_line(_event(stuck, intervention=Intervention("nudge", "try something else", "period", 2, stuck)))
    assert line == "loopguard: trace 4bf92f35\u2026 agent weather_agent: working -> stuck (period 1, search x3) nudge"


def test_a_stop_without_a_change_names_its_rule() -> None:
    """A budget stop on a working trace says the verdict, the action and the rule, with no agent when unknown."""
    working = Verdict("working", "none", 7)
    line = console_line(_event(working, previous=None, intervention=Intervention("stop", "budget", "step_limit", 7),
                               agent=None))
    assert line == "loopguard: trace 4bf92f35\u2026: working, stop (step_limit)"


def test_names_are_escaped_and_bounded() -> None:
    """An agent name with an escape sequence and a newline stays one line without control characters, bounded."""
    stuck = Verdict("stuck", "frequency", 9, repetitions=4, tool="t\x1b[2J")
    line = console_line(_event(stuck, agent="evil\nagent" + "x" * 500))
    assert "\n" not in line and "\x1b" not in line
    # A long name or one with a control character becomes an escaped prefix and a digest of the whole name: the
    # first 115 characters ("evil", newline, "agent", 105 x) escaped (the newline as the 4 characters \x0a) are 118,
    # so they are cut to 114 and an ellipsis: "evil\x0aagent" (13) and 101 x; then "~" and 12 hex digits.
    assert re.search(r" agent evil\\x0aagentx{101}\u2026~[0-9a-f]{12}: ", line), line
    assert re.search(r"\(frequency, t\\x1b\[2J~[0-9a-f]{12} x4\)$", line), line


@pytest.mark.parametrize(("kind", "level"), [("stuck", logging.WARNING), ("retrying", logging.INFO)])
def test_level_follows_severity(kind: str, level: int, caplog: pytest.LogCaptureFixture) -> None:
    """Stuck lines are WARNING, other transitions INFO, on the otel_loopguard logger."""
    caplog.set_level(logging.INFO, logger="otel_loopguard")
    ConsoleLines()(_event(Verdict(kind, "period", 3, period=1, repetitions=3, tool="a")))  # type: ignore[arg-type]
    assert [(r.name, r.levelno) for r in caplog.records] == [("otel_loopguard", level)]


def test_exporter_names_follow_the_variables() -> None:
    """Unset means otlp (as opentelemetry-instrument), none means nothing, a list is split and lower-cased."""
    assert exporter_names("logs", {}) == ["otlp"]
    assert exporter_names("logs", {"OTEL_LOGS_EXPORTER": "none"}) == []
    assert exporter_names("traces", {"OTEL_TRACES_EXPORTER": " Console , otlp"}) == ["console", "otlp"]


def test_console_and_unknown_exporters(caplog: pytest.LogCaptureFixture) -> None:
    """``console`` is loaded from the SDK's entry point; an unknown name is warned about and skipped."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    (exporter,) = exporters_for("traces", {"OTEL_TRACES_EXPORTER": "console,nosuch"})
    assert isinstance(exporter, ConsoleSpanExporter)
    assert any("ignoring OTEL_TRACES_EXPORTER='nosuch'" in r.getMessage() for r in caplog.records)
