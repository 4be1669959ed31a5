"""A trace read through hand-offs, sub-agent invocations or model turns gets no ``no_tool_calls`` note, in the
processor (counter ``loopguard.spans.unread``), ``serve`` and ``audit`` alike; tools offered or model turns without
their input keep it.

Expectations, read by eye from the recorded files:

* ``openai_agents_openinference__chat_repeat``: four OpenInference LLM spans, each with ``llm.input_messages.*``
  and no ``llm.tools.*`` (a chat-only agent), judged as model turns: no note;
* ``adk_openinference__loop_repeat``: AGENT spans ``writer_agent``/``critic_agent`` under ``review_loop``, no model
  span and no tool definition, judged as sub-agent invocations: no note;
* ``haystack_openllmetry__healthy``: model spans with only ``gen_ai.completion.0.content = "replies"`` (no input
  recorded), so their turns say too little: ``no_tool_calls``;
* ``litellm_parent_span__healthy``: its model span offers ``get_quote`` (``llm.request.functions.0.name``) and its
  final answer is a model turn with its input: tool calls happened unread, ``no_tool_calls``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.processor import LoopGuardSpanProcessor
from otel_loopguard.serve.server import Server
from tests.support.span_replay import ReplayIdGenerator, replay_spans

OTLP = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
#: fixture -> the unread reasons of its one trace (module docstring).
CASES = {
    "agents/openai_agents_openinference__chat_repeat.json": [],
    "agents/adk_openinference__loop_repeat.json": [],
    "obs_sdk/haystack_openllmetry__healthy.json": ["no_tool_calls"],
    "model_spans/litellm_parent_span__healthy.json": ["no_tool_calls"],
}
PARAMS = pytest.mark.parametrize(("name", "reasons"), CASES.items(), ids=lambda v: str(v).rsplit("/", 1)[-1])


@PARAMS
def test_audit(name: str, reasons: list[str]) -> None:
    """``audit``'s report of the trace carries exactly the expected unread reasons."""
    path = str(OTLP / name)
    collector = TraceCollector(LoopEngine(LoopGuardConfig()))
    list(collector.add_all(read_spans(path), path))
    [report] = [r for r in collector.finish() if r.trace_id]
    assert [u["reason"] for u in report.unread or ()] == reasons


@PARAMS
def test_serve(name: str, reasons: list[str]) -> None:
    """``serve``'s report of the trace carries exactly the expected unread reasons."""
    logger_provider, meter_provider = LoggerProvider(), MeterProvider()
    server = Server(LoopGuardConfig(), grpc_address=None, http_address=None, idle=3600,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    reports: list = []
    server.add_report_listener(reports.append)
    try:
        server.ingest(list(read_spans(str(OTLP / name))))
        server.finish_all()
    finally:
        logger_provider.shutdown()
        meter_provider.shutdown()
    [report] = reports
    assert [u["reason"] for u in report.unread or ()] == reasons


@PARAMS
def test_processor(name: str, reasons: list[str]) -> None:
    """The processor counts ``loopguard.spans.unread`` for exactly the expected reasons."""
    ids = ReplayIdGenerator()
    reader = InMemoryMetricReader()
    provider, meter_provider = TracerProvider(id_generator=ids), MeterProvider(metric_readers=[reader])
    logger_provider = LoggerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logger_provider,
                                       meter_provider=meter_provider, deferred=False)
    provider.add_span_processor(processor)
    try:
        replay_spans(provider, list(read_spans(str(OTLP / name))), ids=ids)
        provider.force_flush()
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
        logger_provider.shutdown()
        meter_provider.shutdown()
    counted = sorted({str(p.attributes["loopguard.unread.reason"])
                      for rm in (data.resource_metrics if data else ()) for sm in rm.scope_metrics
                      for m in sm.metrics if m.name == "loopguard.spans.unread" for p in m.data.data_points})
    assert counted == reasons
