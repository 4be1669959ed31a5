"""Every recorded fixture judged through the processor, ``serve``, ``audit`` and ``calibrate`` gives one verdict
sequence: the four adapters share one assembler and one judge.

The fixtures are the judged agent-framework recordings and the multi-agent ones (``otlp/agents``: hand-offs,
sub-agents, model turns). Each file is decoded once and its spans shared by the processor, ``serve`` and ``audit``
(``calibrate`` reads the file itself, through its own reader); the per-file tests compare what the one module-wide
run decided. A trace built here with the SDK checks the one order rule the live paths impose: calls derived from
model spans that never got a result are judged after the trace's other steps."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.calibrate import replay_judge
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.processor import LoopGuardSpanProcessor
from otel_loopguard.serve.server import Server
from tests.support.agent_step_fixtures import AGENT_FIXTURES
from tests.support.chat_traces import model_span_trace
from tests.support.recorded_fixtures import FIXTURE_DIRS, judged_fixture_files
from tests.support.span_replay import ReplayIdGenerator, replay_spans
from tests.support.three_paths import serve_batches

#: The multi-agent, sub-agent and model-turn recordings (``tests/support/agent_step_fixtures.py``).
AGENT_FILES = sorted(AGENT_FIXTURES.glob("*__*.json"))
FILES = judged_fixture_files() + AGENT_FILES
#: Decoded spans by fixture file, read once per module (the fixture below fills it).
Spans = dict[Path, list[Any]]
#: A trace's verdict sequence: ("t", call index, from, to, rule) per transition, ("i", call index, action, rule)
#: per intervention, in the order decided.
Sequence = list[tuple[Any, ...]]


def _sequence(transitions: Iterable[Any], interventions: Iterable[Any]) -> Sequence:
    out = [("t", t.step, t.previous, t.verdict.kind, t.verdict.rule) for t in transitions]
    return out + [("i", i.step, i.action, i.rule) for i in interventions]


def _events_sequence(events: Iterable[VerdictEvent]) -> Sequence:
    events = list(events)
    return _sequence([e.transition for e in events if e.transition is not None],
                     [e.intervention for e in events if e.intervention is not None])


def _audit(path: Path, spans: list[Any], config: LoopGuardConfig) -> dict[str, Sequence]:
    collector = TraceCollector(LoopEngine(config))
    list(collector.add_all(iter(spans), str(path)))
    return {r.trace_id: _sequence(r.transitions, r.interventions) for r in collector.finish() if r.trace_id}


def _calibrate(path: Path, config: LoopGuardConfig) -> dict[str, Sequence]:
    engine = LoopEngine(config)
    out = {}
    for trace in read_traces([(str(path), None)], config).traces:
        judge = replay_judge(trace, engine)
        assert trace.trace_id is not None
        out[trace.trace_id] = _sequence(judge.transitions, judge.interventions)
    return out


def _processor(spans: Spans, config: LoopGuardConfig) -> dict[str, Sequence]:
    ids = ReplayIdGenerator()
    provider = TracerProvider(id_generator=ids)
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    processor = LoopGuardSpanProcessor(config, logger_provider=logger_provider, meter_provider=meter_provider,
                                       deferred=False)
    events: list[VerdictEvent] = []
    processor.add_listener(events.append)
    provider.add_span_processor(processor)
    traces: set[int] = set()
    try:
        for records in spans.values():
            result = replay_spans(provider, records, ids=ids)
            traces.update(result.trace_ids.values())
        assert processor.errors == 0
    finally:
        provider.shutdown()
        logger_provider.shutdown()
        meter_provider.shutdown()
    return {f"{t:032x}": _events_sequence(e for e in events if e.trace_id == t) for t in traces}


def _serve(spans: Spans, config: LoopGuardConfig) -> dict[str, Sequence]:
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    server = Server(config, grpc_address=None, http_address=None, idle=3600, logger_provider=logger_provider,
                    meter_provider=meter_provider)
    reports: list[Any] = []
    server.add_report_listener(reports.append)
    try:
        for records in spans.values():
            server.ingest(records)
            server.finish_all()
    finally:
        logger_provider.shutdown()
        meter_provider.shutdown()
    return {r.trace_id: _sequence(r.transitions, r.interventions) for r in reports}


@pytest.fixture(scope="module")
def audited() -> dict[Path, dict[str, Sequence]]:
    """Each fixture file's traces as ``audit`` judges them, by file then trace id (each file decoded once)."""
    config = LoopGuardConfig()
    return {path: _audit(path, list(read_spans(str(path))), config) for path in FILES}


@pytest.fixture(scope="module")
def four_paths(audited: dict[Path, dict[str, Sequence]]) -> Iterator[dict[str, dict[str, Sequence]]]:
    """Every fixture judged by each path, by path name then trace id."""
    config = LoopGuardConfig()
    spans = {path: list(read_spans(str(path))) for path in FILES}
    yield {
        "processor": _processor(spans, config),
        "serve": _serve(spans, config),
        "audit": {k: v for judged in audited.values() for k, v in judged.items()},
        "calibrate": {k: v for p in FILES for k, v in _calibrate(p, config).items()},
    }


def test_every_recorded_fixture_is_judged() -> None:
    """The differential below covers every recorded fixture file of every fixture folder, the agents' included."""
    assert [p for d in (*FIXTURE_DIRS, AGENT_FIXTURES) for p in sorted(d.glob("*__*.json"))] == FILES
    assert (len(FILES), len(AGENT_FILES)) == (302 + 20, 20)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_four_paths_give_one_verdict_sequence(path: Path, audited: dict[Path, dict[str, Sequence]],
                                              four_paths: dict[str, dict[str, Sequence]]) -> None:
    """The processor, serve, audit and calibrate decide the same transitions and interventions at the same calls."""
    audit = audited[path]
    assert audit, f"no trace read from {path.name}"
    for trace_id, expected in audit.items():
        got = {name: judged.get(trace_id) for name, judged in four_paths.items()}
        assert got == dict.fromkeys(four_paths, expected), trace_id


def _asks_for_lookup(turn: int) -> tuple[str, dict[str, Any]]:
    """A model span (GenAI conventions, output only) asking for ``lookup_order({"order": 7})``."""
    output = [{"role": "assistant", "finish_reason": "tool_calls", "parts": [
        {"type": "tool_call", "id": f"call_{turn}", "name": "lookup_order", "arguments": {"order": 7}}]}]
    return "chat scripted-model", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-model",
                                   "gen_ai.output.messages": json.dumps(output)}


def _handoff(index: int) -> tuple[str, dict[str, Any]]:
    """Logfire's hand-off span, triage -> billing on even ``index``, billing -> triage on odd."""
    source, target = ("triage_agent", "billing_agent") if index % 2 == 0 else ("billing_agent", "triage_agent")
    return f"Handoff: {source} → {target}", {"from_agent": source, "to_agent": target}


#: The SDK-built trace below, judged: hand-offs 0-7 first (triage->billing seen a third time at hand-off 4, the
#: frequency limit 3: stuck, nudged; at 5 the period-2 suffix holds three cycles: still stuck after the nudge, stopped),
#: then, at the trace's end, the three lookups without a result (the third, tool call 2, repeats with no evidence:
#: uncertain). Judged in start order (the lookups end at 20, 40 and 60 ms, the first hand-off starts at 70 ms) the
#: uncertain would come first.
UNANSWERED_THEN_HANDOFFS = [("t", 4, "working", "stuck", "frequency"), ("t", 2, "working", "uncertain", "evidence"),
                            ("i", 4, "nudge", "frequency"), ("i", 5, "stop", "period")]


def _unanswered_calls_then_handoffs(tmp_path: Path) -> tuple[Path, list[Any]]:
    """One span after another (20 ms apart) written through the SDK: three model spans asking for the same lookup
    (none records its input, so no result ever comes), then eight hand-offs alternating triage/billing."""
    path = tmp_path / "sdk__unanswered_calls_then_handoffs.json"
    model_span_trace(path, [_asks_for_lookup(i) for i in range(3)] + [_handoff(i) for i in range(8)])
    return path, list(read_spans(str(path)))


def test_derived_calls_without_a_result_are_judged_last_on_every_path(tmp_path: Path) -> None:
    """Calls derived early from model spans, never answered, then a hand-off ping-pong: all four paths judge the
    hand-offs first and the unanswered calls at the end, as the live paths must."""
    path, spans = _unanswered_calls_then_handoffs(tmp_path)
    config = LoopGuardConfig()
    got = {"audit": _audit(path, spans, config), "calibrate": _calibrate(path, config),
           "processor": _processor({path: spans}, config), "serve": _serve({path: spans}, config)}
    assert {name: list(judged.values()) for name, judged in got.items()} == {
        name: [UNANSWERED_THEN_HANDOFFS] for name in got}


def test_serve_judging_again_exactly_keeps_unanswered_calls_last(tmp_path: Path) -> None:
    """``serve`` given the spans one per request, latest start first: the model spans come out of end order, so at
    the finish their calls are derived again and the trace judged again exactly, the unanswered calls still last."""
    _, spans = _unanswered_calls_then_handoffs(tmp_path)
    reports, stats = serve_batches([span] for span in sorted(spans, key=lambda s: s.start_ns, reverse=True))
    assert [_sequence(r.transitions, r.interventions) for r in reports] == [UNANSWERED_THEN_HANDOFFS]
    assert stats.rejudged_traces == 1
