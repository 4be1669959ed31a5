"""The per-trace record of the paths reading decoded spans (``serve``'s table, ``audit``'s reader): one task outcome
for both, whatever the order or number of deliveries.

The recorded fixture ``pydantic_ai__errors_then_success.json`` (``tests/fixtures/generate/pydantic_ai_runs.py``),
read by eye: one trace whose root is the agent span ``invoke_agent research_agent`` (``gen_ai.agent.name``
``research_agent``, from 1796282931645914553 to 1796282931674266133 ns, status unset), four ``chat scripted-model``
spans with token usage, and three ``execute_tool get_quote`` spans of which the first two have error status and an
``exception`` event. So its task: ``success`` (three calls stop nothing), agent ``research_agent``, 4 turns, 3 tool
calls, 2 tool errors, no cost (no price table), 0.02835158 s (the root span's end minus its start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.intake import SpanTrace
from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import Step
from otel_loopguard.core.outcome import TaskOutcome
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.serve.table import TraceTable

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "pydantic_ai__errors_then_success.json"
#: (outcome, agent, turns, tool calls, tool errors, cost) of the fixture's task, read by eye (module docstring).
EXPECTED = ("success", "research_agent", 4, 3, 2, None)
#: Its duration in seconds: 1796282931674266133 - 1796282931645914553 ns.
DURATION_S = 28_351_580e-9


def _figures(task: TaskOutcome | None) -> tuple[object, ...]:
    assert task is not None
    return (task.outcome, task.agent, task.turns, task.tool_calls, task.tool_errors, task.cost_usd)


def _audit_task(spans: list[SpanRecord]) -> TaskOutcome | None:
    collector = TraceCollector(LoopEngine(LoopGuardConfig()))
    list(collector.add_all(iter(spans), str(FIXTURE)))
    [report] = collector.finish()
    return report.task


def test_audit_task_names_the_agent_and_counts_tool_errors() -> None:
    """``audit``'s task outcome of the fixture names its agent span's agent and counts its two failed tool calls."""
    task = _audit_task(list(read_spans(str(FIXTURE))))
    assert _figures(task) == EXPECTED
    assert task is not None and task.duration_s == pytest.approx(DURATION_S)


def test_audit_task_is_the_same_reversed_and_delivered_twice() -> None:
    """The fixture's spans reversed and each delivered twice give ``audit`` the same task outcome."""
    spans = list(read_spans(str(FIXTURE)))
    assert _figures(_audit_task([s for span in reversed(spans) for s in (span, span)])) == EXPECTED


def test_serve_gives_the_same_task_as_audit() -> None:
    """``serve``'s table, given the fixture in one request, finishes the trace with the task ``audit`` reports."""
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=3600)
    table.add(read_spans(str(FIXTURE)), now=0.0)
    _, [finished] = table.finish_all()
    assert _figures(finished.task) == EXPECTED
    assert finished.task is not None and finished.task.duration_s == pytest.approx(DURATION_S)


def _agent(span_id: int, name: str, start_ns: int, end_ns: int, parent: int | None) -> SpanRecord:
    return SpanRecord(1, span_id, parent, f"invoke_agent {name}", start_ns, end_ns,
                      {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name})


@pytest.mark.parametrize("order", ["outer first", "inner first"])
def test_outermost_agent_names_the_task_without_a_root(order: str) -> None:
    """Without a root span read, the agent span that starts first (10-90 ns, before the inner 20-30) names the task
    and gives its duration, 80 ns, in either order."""
    outer, inner = _agent(2, "planner", 10, 90, 1), _agent(3, "coder", 20, 30, 2)
    record = SpanTrace()
    extractor = Extractor()
    for span in (outer, inner) if order == "outer first" else (inner, outer):
        assert record.agent_span(span, extractor) is not None
    assert record.agent_span(inner, extractor) is None  # delivered again: read once
    task = record.task(None)
    assert (task.agent, task.duration_s) == ("planner", pytest.approx(80e-9))


def test_a_structure_span_that_gave_a_step_is_read() -> None:
    """An OpenInference ``CHAIN`` span no convention reads counts for the unread note (one span, structure only,
    its key named) unless it gave a step (a hand-off or a model call), which reads it: then no cause."""
    chain = SpanRecord(1, 5, None, "workflow", 0, 10, {"openinference.span.kind": "CHAIN"})
    alone = SpanTrace()
    alone.other_read(chain, None)
    [cause] = alone.unread_now().causes()
    assert (cause.reason, cause.spans, cause.structure_only, cause.keys) == (
        "no_tool_calls", 1, True, ("openinference.span.kind",))
    stepped = SpanTrace()
    stepped.other_read(chain, Step(span_id=5, parent_span_id=None, start_ns=0, end_ns=10))
    assert stepped.unread_now().causes() == []


def test_audit_drops_a_trace_judge_and_turns_once_reported() -> None:
    """A reported trace keeps neither its judge nor its model turns (audit's peak memory), and the report still
    counts the fixture's four model calls and three tool calls."""
    collector = TraceCollector(LoopEngine(LoopGuardConfig()))
    list(collector.add_all(read_spans(str(FIXTURE)), str(FIXTURE)))
    [held] = collector._held.values()
    assert held.judge is not None and held.turns is not None
    [report] = collector.finish()
    assert held.judge is None and held.turns is None
    assert _figures(report.task)[2:4] == (4, 3)
