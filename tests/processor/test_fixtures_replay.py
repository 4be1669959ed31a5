"""Recorded framework traces replayed as live spans: the processor decides exactly what ``audit`` decides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard import cli
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness, HarnessFactory
from tests.support.recorded_fixtures import NO_CONTENT_SWITCH_SOURCES, PROCESSOR_SOURCES, judged_fixture_files
from tests.support.scenario_expectations import expected
from tests.support.span_replay import replay_spans

FILES = judged_fixture_files(PROCESSOR_SOURCES)
STUCK = ("same_call_loop", "ping_pong", "reordered_keys")
NEVER_STUCK = ("pagination", "healthy", "errors_then_success")


def _scenario(path: Path) -> str:
    return path.stem.split("__", 1)[1]


def _source(path: Path) -> str:
    return path.stem.split("__", 1)[0]


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert cli.main(["audit", "--json", str(path)]) in (0, 1, 2)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_fixture_set_covers_every_scenario() -> None:
    """The parametrisation below really spans all seven scenarios of every judged source (ADK adds one; a source
    without a content switch has no no_content)."""
    assert {_source(p) for p in FILES} == set(PROCESSOR_SOURCES)
    for source in PROCESSOR_SOURCES:
        scenarios = {_scenario(p) for p in FILES if _source(p) == source}
        want = {*STUCK, *NEVER_STUCK} | (set() if source in NO_CONTENT_SWITCH_SOURCES else {"no_content"})
        assert want <= scenarios <= want | {"parallel_calls"}, source
    assert len(FILES) == 7 * len(PROCESSOR_SOURCES) + 2 - len(NO_CONTENT_SWITCH_SOURCES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replay_matches_audit(path: Path, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    """Replayed through a real TracerProvider, each fixture yields audit's transitions, interventions and verdict."""
    audit = _audit(path, capsys)
    records = list(read_spans(str(path)))
    result = replay_spans(harness.provider, records, ids=harness.ids)

    [trace_id] = set(result.trace_ids.values())
    assert format(trace_id, "032x") == audit["trace_id"]
    events = [e for e in harness.events if e.trace_id == trace_id]
    assert len(events) == len(harness.events)
    # audit --json numbers each call from 1 beside its 0-based step, and gives a period only to a stuck verdict.
    transitions = [{"step": e.transition.step, "call": e.transition.step + 1, "from": e.transition.previous,
                    "to": e.verdict.kind, "rule": e.verdict.rule,
                    "period": e.verdict.period if e.verdict.kind == "stuck" else None}
                   for e in events if e.transition]
    interventions = [{**e.intervention.as_dict(), "call": e.intervention.step + 1} for e in events if e.intervention]
    assert transitions == audit["transitions"]
    assert interventions == audit["interventions"]
    final = events[-1].verdict.kind if events else "working"
    assert final == audit["verdict"]
    # The root ended, so the trace was released with the audit's step count.
    assert harness.processor.tracked_traces == 0
    steps = harness.metrics().get("loopguard.trace.steps", {"points": []})["points"]
    # A trace without a tool call records no step count (nothing read: see the unread counter).
    assert [(p["count"], p["sum"]) for p in steps] == ([(1, audit["steps_used"])] if audit["steps_used"] else [])
    unread = harness.metrics().get("loopguard.spans.unread", {"points": []})["points"]
    assert sorted(p["attributes"]["loopguard.unread.reason"] for p in unread) == sorted(
        u["reason"] for u in audit.get("unread", []))
    assert harness.processor.errors == 0

    # What the scenario table says (tests/support/scenario_expectations.py, derived by hand).
    expected(_source(path), _scenario(path)).check(audit)


@pytest.mark.parametrize("path", [p for p in FILES if expected(_source(p), _scenario(p)).interventions],
                         ids=lambda p: p.stem)
def test_replayed_loop_puts_span_event_on_agent_or_root(path: Path, make_harness: HarnessFactory) -> None:
    """Every verdict of a recorded loop is also a span event on an agent (or root) span of that trace, exported.

    The replay ends the agent span microseconds after the last tool span, so the processor judges inline here: a
    background thread may not get there first, and a span event can only be added while the span is open.
    """
    harness = make_harness(deferred=False)
    records = list(read_spans(str(path)))
    replay_spans(harness.provider, records, ids=harness.ids)
    by_id = {r.span_id: r for r in records}
    carriers = [s for s in harness.finished() if any(e.name == "loopguard.verdict" for e in s.events)]
    assert carriers, "no span carries a loopguard.verdict event"
    for span in carriers:
        record = by_id[span.context.span_id]
        kinds = {record.attributes.get(k) for k in ("gen_ai.operation.name", "openinference.span.kind",
                                                    "traceloop.span.kind")}
        assert record.parent_span_id is None or kinds & {"invoke_agent", "AGENT", "agent"}, record.name
    emitted = [dict(e.attributes) for s in carriers for e in s.events if e.name == "loopguard.verdict"]
    # At least the nudge (with the stuck transition) and the stop; one more where a closing call follows.
    assert len(emitted) == len(harness.verdict_records()) >= 2
    assert emitted == [dict(r.attributes) for r in harness.verdict_records()]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_replay_is_faithful(path: Path, harness: Harness) -> None:
    """Replayed spans keep ids, names, parents, times, status, events and attributes, and end in end-time order."""
    records = list(read_spans(str(path)))
    replay_spans(harness.provider, records, ids=harness.ids)
    exported = harness.finished()
    assert len(exported) == len(records)
    by_id = {r.span_id: r for r in records}
    for span in exported:
        record = by_id[span.context.span_id]
        assert span.context.trace_id == record.trace_id
        assert span.name == record.name
        assert (span.parent.span_id if span.parent else None) == record.parent_span_id
        assert (span.start_time, span.end_time) == (record.start_ns, record.end_ns)
        assert (span.status.status_code.name == "ERROR") == record.status_error
        # Loopguard's own verdict events are added on top of the recorded ones.
        assert [(e.name, e.timestamp, dict(e.attributes)) for e in span.events if e.name != "loopguard.verdict"] == [
            (n, t, dict(a)) for n, t, a in record.events]
        assert dict(span.attributes) == dict(record.attributes)
    # Spans end in end-time order, except that a parent always ends after its children: a parent recorded as
    # ending before one of its children (a JavaScript child by up to 1 ms; AutoGen's OpenInference agent span 5 ms
    # after the native invoke_agent span around it) was ended first all the same, so it ends right after them.
    position = {s.context.span_id: i for i, s in enumerate(exported)}
    for s in exported:
        if s.parent is not None and s.parent.span_id in position:
            assert position[s.context.span_id] < position[s.parent.span_id], s.name
    ended_before_a_child = {r.parent_span_id for r in records
                            if r.parent_span_id in by_id and r.end_ns > by_id[r.parent_span_id].end_ns}
    late = [(a.name, b.name) for a, b in zip(exported, exported[1:])
            if b.end_time < a.end_time and b.context.span_id not in ended_before_a_child]
    assert late == []


def test_replay_keeps_kvlist_attributes(harness: Harness) -> None:
    """Dict (OTLP kvlist) attribute values survive the replay, as dicts or JSON text, and are judged."""
    from otel_loopguard.conventions.span import SpanRecord

    root = SpanRecord(7, 1, None, "invoke_agent a", 10, 100, {"gen_ai.operation.name": "invoke_agent"})
    tools = [
        SpanRecord(7, 2 + i, 1, "execute_tool search", 20 + 10 * i, 25 + 10 * i, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": {"q": "x", "n": 1}, "gen_ai.tool.call.result": "r"})
        for i in range(3)
    ]
    result = replay_spans(harness.provider, [root, *tools], ids=harness.ids)
    live_args = result.spans[2].attributes["gen_ai.tool.call.arguments"]
    assert live_args == {"q": "x", "n": 1} or json.loads(live_args) == {"q": "x", "n": 1}
    assert [e.intervention.action for e in harness.events if e.intervention] == ["nudge"]
    assert harness.processor.errors == 0
