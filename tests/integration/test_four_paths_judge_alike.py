"""Every recorded fixture judged through the processor, ``serve``, ``audit`` and ``calibrate`` gives one verdict
sequence: the four adapters share one assembler and one judge."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.calibrate import replay_judge
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.emit import VerdictEvent
from otel_loopguard.sdk.processor import LoopGuardSpanProcessor
from otel_loopguard.serve.server import Server
from tests.support.recorded_fixtures import FIXTURE_DIRS, judged_fixture_files
from tests.support.span_replay import ReplayIdGenerator, replay_spans

FILES = judged_fixture_files()
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


def _audit(path: Path, config: LoopGuardConfig) -> dict[str, Sequence]:
    collector = TraceCollector(LoopEngine(config))
    list(collector.add_all(read_spans(str(path)), str(path)))
    return {r.trace_id: _sequence(r.transitions, r.interventions) for r in collector.finish() if r.trace_id}


def _calibrate(path: Path, config: LoopGuardConfig) -> dict[str, Sequence]:
    engine = LoopEngine(config)
    out = {}
    for trace in read_traces([(str(path), None)], config).traces:
        judge = replay_judge(trace, engine)
        assert trace.trace_id is not None
        out[trace.trace_id] = _sequence(judge.transitions, judge.interventions)
    return out


def _processor(paths: list[Path], config: LoopGuardConfig) -> dict[str, Sequence]:
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
        for path in paths:
            result = replay_spans(provider, list(read_spans(str(path))), ids=ids)
            traces.update(result.trace_ids.values())
        assert processor.errors == 0
    finally:
        provider.shutdown()
        logger_provider.shutdown()
        meter_provider.shutdown()
    return {f"{t:032x}": _events_sequence(e for e in events if e.trace_id == t) for t in traces}


def _serve(paths: list[Path], config: LoopGuardConfig) -> dict[str, Sequence]:
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    server = Server(config, grpc_address=None, http_address=None, idle=3600, logger_provider=logger_provider,
                    meter_provider=meter_provider)
    reports: list[Any] = []
    server.add_report_listener(reports.append)
    try:
        for path in paths:
            server.ingest(list(read_spans(str(path))))
            server.finish_all()
    finally:
        logger_provider.shutdown()
        meter_provider.shutdown()
    return {r.trace_id: _sequence(r.transitions, r.interventions) for r in reports}


@pytest.fixture(scope="module")
def four_paths() -> Iterator[dict[str, dict[str, Sequence]]]:
    """Every fixture judged by each path, by path name then trace id."""
    config = LoopGuardConfig()
    yield {
        "processor": _processor(FILES, config),
        "serve": _serve(FILES, config),
        "audit": {k: v for p in FILES for k, v in _audit(p, config).items()},
        "calibrate": {k: v for p in FILES for k, v in _calibrate(p, config).items()},
    }


def test_every_recorded_fixture_is_judged() -> None:
    """The differential below covers every recorded fixture file of every fixture folder."""
    assert [p for d in FIXTURE_DIRS for p in sorted(d.glob("*__*.json"))] == FILES
    assert len(FILES) == 302


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_four_paths_give_one_verdict_sequence(path: Path, four_paths: dict[str, dict[str, Sequence]]) -> None:
    """The processor, serve, audit and calibrate decide the same transitions and interventions at the same calls."""
    audit = _audit(path, LoopGuardConfig())
    assert audit, f"no trace read from {path.name}"
    for trace_id, expected in audit.items():
        got = {name: judged.get(trace_id) for name, judged in four_paths.items()}
        assert got == dict.fromkeys(four_paths, expected), trace_id
