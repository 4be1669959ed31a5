"""Calibration replays exactly the steps ``audit`` judges: nested spans of one call count once in both."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_loopguard.cli.calibrate import read_traces
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.calibrate import replay
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.otlp_write import write_otlp_json

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _tool(tool: str, args: dict[str, str], result: str) -> dict[str, str]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result}


def _nested_run(path: Path, calls: int) -> Path:
    """One agent run of ``calls`` calls, each an outer tool span with a nested span of the same tool inside it
    (two instrumentations recording one call), written as OTLP JSON."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("nested-test")
    root = tracer.start_span("invoke_agent bot", start_time=T0,
                             attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"})
    for k in range(calls):
        base = T0 + 10 * k * S
        attrs = _tool("fetch_page", {"url": f"https://example.test/{k}"}, f"page {k}")
        outer = tracer.start_span("execute_tool fetch_page", context=set_span_in_context(root),
                                  start_time=base + S, attributes=attrs)
        inner = tracer.start_span("execute_tool fetch_page", context=set_span_in_context(outer),
                                  start_time=base + 2 * S, attributes=attrs)
        inner.end(end_time=base + 3 * S)
        outer.end(end_time=base + 4 * S)
    root.end(end_time=T0 + 10 * calls * S)
    write_otlp_json(exporter.get_finished_spans(), str(path))
    return path


def test_six_nested_calls_are_six_for_calibrate_and_audit(tmp_path: Path) -> None:
    """Six calls, each an outer tool span with a nested span of the same tool: 6 calls for both, not 12."""
    path = _nested_run(tmp_path / "nested.json", 6)
    config = LoopGuardConfig()
    collector = TraceCollector(LoopEngine(config))
    list(collector.add_all(read_spans(str(path)), str(path)))
    [report] = collector.finish()
    assert report.steps_used == 6
    reading = read_traces([(str(path), "healthy")], config)
    [trace] = reading.traces
    assert trace.calls == 6
    assert replay(trace, LoopEngine(config)).steps == 6


def test_calibrate_reads_calls_derived_from_model_spans_as_audit_does(tmp_path: Path) -> None:
    """A model-only trace whose calls live in the model spans' messages: calibrate's replay has audit's calls."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "model_spans"
    path = next(iter(sorted(fixture.glob("openai_genai_span__*.json"))))
    config = LoopGuardConfig()
    collector = TraceCollector(LoopEngine(config))
    list(collector.add_all(read_spans(str(path)), str(path)))
    reports = collector.finish()
    reading = read_traces([(str(path), None)], config)
    assert [t.calls for t in reading.traces] == [r.steps_used for r in reports]
    assert sum(t.calls for t in reading.traces) > 0
