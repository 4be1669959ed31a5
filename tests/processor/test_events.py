"""The ``loopguard.verdict`` event (Logs API) and span event: names, severity, ids, attribute types, no raw content."""

from __future__ import annotations

from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

from otel_loopguard import LoopGuardConfig
from tests.processor.conftest import Harness, HarnessFactory

SECRET_ARGS = '{"query": "SECRET-ARGUMENT-7f3a"}'
SECRET_RESULT = "SECRET-RESULT-91bc: nothing found"
SECRETS = ("SECRET-ARGUMENT-7f3a", "SECRET-RESULT-91bc", "nothing found")

INT_KEYS = {"loopguard.period", "loopguard.repetitions", "loopguard.cycle.start", "loopguard.steps"}
STUCK_KEYS = {
    "loopguard.verdict", "loopguard.verdict.previous", "loopguard.rule", "loopguard.steps", "loopguard.intervention",
    "loopguard.normalizer.version", "loopguard.period", "loopguard.repetitions", "loopguard.cycle.start",
    "loopguard.signature", "loopguard.message", "gen_ai.tool.name", "gen_ai.agent.name",
}


def _loop(h: Harness, calls: int, **agent_extra: Any) -> tuple[Any, list[Any]]:
    agent = h.agent(**agent_extra)
    tools = [h.tool(agent, args=SECRET_ARGS, result=SECRET_RESULT) for _ in range(calls)]
    return agent, tools


def _all_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _all_strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_all_strings(v))]
    return []


def test_stuck_event_names_severity_ids_and_types(harness: Harness) -> None:
    """The nudge event is WARN, tied to the triggering tool span, with exact attribute names and types."""
    h = harness
    agent, tools = _loop(h, 3)
    h.end(agent)
    [record] = h.verdict_records()
    assert record.event_name == "loopguard.verdict"
    assert record.severity_number == SeverityNumber.WARN
    assert record.severity_text == "WARN"
    trigger = tools[2].get_span_context()
    assert (record.trace_id, record.span_id) == (trigger.trace_id, trigger.span_id)
    assert record.timestamp == tools[2].end_time
    attrs = dict(record.attributes)
    assert set(attrs) == STUCK_KEYS
    for key, value in attrs.items():
        assert type(value) is (int if key in INT_KEYS else str), (key, value)
    assert attrs["loopguard.verdict"] == "stuck"
    assert attrs["loopguard.verdict.previous"] == "working"
    assert attrs["loopguard.rule"] == "period"
    assert attrs["loopguard.intervention"] == "nudge"
    assert (attrs["loopguard.period"], attrs["loopguard.repetitions"], attrs["loopguard.cycle.start"]) == (1, 3, 0)
    assert attrs["loopguard.steps"] == 3
    assert attrs["gen_ai.tool.name"] == "search"
    assert attrs["gen_ai.agent.name"] == "research_agent"
    assert attrs["loopguard.message"] == record.body
    assert "search" in record.body and "Try a different approach" in record.body
    assert h.processor.errors == 0


def test_stop_is_warn_and_recovery_is_info(harness: Harness) -> None:
    """A stop is WARN; a later transition back to working is INFO with intervention ``none`` and no message."""
    h = harness
    agent, tools = _loop(h, 4)
    h.tool(agent, tool="read", args='{"doc": "d1"}', result="text")
    h.end(agent)
    nudge, stop, recovery = h.verdict_records()
    assert nudge.attributes["loopguard.intervention"] == "nudge"
    assert stop.severity_number == SeverityNumber.WARN
    assert stop.attributes["loopguard.intervention"] == "stop"
    assert stop.attributes["loopguard.verdict.previous"] == "stuck"  # no transition: previous equals current
    assert stop.span_id == tools[3].get_span_context().span_id
    assert recovery.severity_number == SeverityNumber.INFO
    assert recovery.severity_text == "INFO"
    assert recovery.attributes["loopguard.verdict"] == "working"
    assert recovery.attributes["loopguard.verdict.previous"] == "stuck"
    assert recovery.attributes["loopguard.intervention"] == "none"
    assert "loopguard.message" not in recovery.attributes
    assert recovery.body == "trace is working (rule recovered)"


def test_uncertain_event_is_info(harness: Harness) -> None:
    """Repeated calls without captured arguments give an INFO ``uncertain`` event and no intervention."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        h.tool(agent, args=None, result=None)
    h.end(agent)
    [record] = h.verdict_records()
    assert record.severity_number == SeverityNumber.INFO
    assert record.attributes["loopguard.verdict"] == "uncertain"
    assert record.attributes["loopguard.rule"] == "evidence"
    assert record.attributes["loopguard.intervention"] == "none"


def test_no_raw_arguments_or_results_leave(harness: Harness) -> None:
    """No emitted attribute value, body or span-event attribute contains the call's arguments or results."""
    h = harness
    agent, _ = _loop(h, 4)
    h.end(agent)
    records = h.verdict_records()
    assert len(records) == 2
    emitted: list[str] = []
    for r in records:
        emitted += _all_strings(dict(r.attributes)) + _all_strings(r.body)
    [agent_span] = h.finished("invoke_agent research_agent")
    for event in agent_span.events:
        emitted += _all_strings(dict(event.attributes))
    for _, metric in h.metrics().items():
        for point in metric["points"]:
            emitted += _all_strings(point["attributes"])
    assert emitted
    for secret in SECRETS:
        assert not [s for s in emitted if secret in s], secret
    signature = records[0].attributes["loopguard.signature"]
    assert signature and signature not in SECRET_ARGS


def test_span_event_lands_on_open_agent_span(harness: Harness) -> None:
    """The span event goes on the still-open agent span (not the tool span) and reaches the span exporter."""
    h = harness
    root = h.start("POST /chat")
    agent, tools = _loop(h, 4, parent=root)
    h.end(agent)
    h.end(root)
    [agent_span] = h.finished("invoke_agent research_agent")
    events = [e for e in agent_span.events if e.name == "loopguard.verdict"]
    assert [e.attributes["loopguard.intervention"] for e in events] == ["nudge", "stop"]
    assert [e.timestamp for e in events] == [tools[2].end_time, tools[3].end_time]
    assert [dict(e.attributes) for e in events] == [dict(r.attributes) for r in h.verdict_records()]
    assert not [s for s in h.finished() if s is not agent_span and s.events]
    assert len(h.finished()) == 6


def test_span_event_falls_back_to_root(harness: Harness) -> None:
    """Without an agent span the span event goes on the trace's local root."""
    h = harness
    root = h.start("POST /chat")
    for _ in range(3):
        h.tool(root, args=SECRET_ARGS, result=SECRET_RESULT)
    h.end(root)
    [root_span] = h.finished("POST /chat")
    assert [e.name for e in root_span.events] == ["loopguard.verdict"]
    assert "gen_ai.agent.name" not in root_span.events[0].attributes


def test_conversation_id_is_on_the_event(harness: Harness) -> None:
    """A tool span's ``gen_ai.conversation.id`` is carried on the verdict event."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        h.tool(agent, **{"gen_ai.conversation.id": "conv-1"})
    h.end(agent)
    [record] = h.verdict_records()
    assert record.attributes["gen_ai.conversation.id"] == "conv-1"


class _RecordOnly(Sampler):
    """Records every span but samples none (exporters drop them; processors still see them)."""

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        return SamplingResult(Decision.RECORD_ONLY, attributes)

    def get_description(self) -> str:
        return "RecordOnly"


def test_recorded_but_unsampled_spans_are_judged(make_harness: HarnessFactory) -> None:
    """Spans a sampler records but does not sample are still judged: the loop is stopped and events emitted."""
    h = make_harness(LoopGuardConfig(), sampler=_RecordOnly())
    agent, tools = _loop(h, 4)
    assert not tools[0].get_span_context().trace_flags.sampled
    assert h.processor.check(tools[0].get_span_context().trace_id).action == "stop"
    h.end(agent)
    assert h.finished() == []  # the exporter honours sampling
    assert [r.attributes["loopguard.intervention"] for r in h.verdict_records()] == ["nudge", "stop"]
    assert [e.intervention.action for e in h.events if e.intervention] == ["nudge", "stop"]


def test_version_stamps_on_every_span(make_harness: HarnessFactory) -> None:
    """Configured versions are stamped on every span, GenAI or not, as ``app.<kind>.version``."""
    versions = {"prompt": "p1", "tools": "t2", "model": "m3", "harness": "h4"}
    h = make_harness(LoopGuardConfig(versions=versions))
    root = h.start("POST /chat")
    agent = h.agent(parent=root)
    h.tool(agent)
    h.start("db query", parent=agent).end()
    h.end(agent)
    h.end(root)
    spans = h.finished()
    assert len(spans) == 4
    expected = {"app.prompt.version": "p1", "app.tools.version": "t2", "app.model.version": "m3",
                "app.harness.version": "h4"}
    for span in spans:
        assert {k: span.attributes.get(k) for k in expected} == expected, span.name


def test_no_version_stamps_by_default(harness: Harness) -> None:
    """Without configured versions no ``app.*.version`` attribute is added."""
    h = harness
    h.tool(h.agent())
    assert not [k for s in h.finished() for k in s.attributes if k.startswith("app.")]
