"""Spans of one trace reach ``serve`` in any order: through the OpenTelemetry SDK's own OTLP exporters, an agent
process and a tool service each export their spans, so the agent's root span can arrive before or after its tool
spans.

- "no tool call could be read" is said only when it is true: never because the root came first (the tool spans
  follow), always for a trace that had GenAI spans and no readable call (in the next answer to its sender, once
  the trace is finished, and as a WARNING);
- the verdict events name the enclosing agent span, whose attributes were set after its start (strands, ADK,
  OpenLLMetry do this), as the processor names it; the ``gen_ai.invoke_agent.tool_calls`` histogram too.

The agent process exports with a ``SimpleSpanProcessor`` (each span as it ends), the tool service with a
``BatchSpanProcessor`` whose schedule never fires in the test, so its spans leave exactly when it is flushed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from otel_loopguard.conventions.unread import NO_TOOL_CALLS
from tests.serve._support import Harness

LOGGER = "otel_loopguard.serve.server"
CALLS = 6  # the same call six times: stuck (the default rules call a repeated call stuck from its 3rd repeat)
NO_CALL = "no tool call could be read"


class Senders:
    """An agent process (HTTP exporter, span by span) and a tool service (gRPC exporter, on flush) sending to
    ``serve``; every answer serve gives is recorded (the HTTP ones from the wire, through the exporter's session)."""

    def __init__(self, h: Harness) -> None:
        self.http_answers: list[trace_service_pb2.ExportTraceServiceResponse] = []
        self.warnings: list[str | None] = []
        ingest = h.server.ingest

        def recording(spans: Any, peer: str = "", tenant: str = "") -> str | None:
            warning = ingest(spans, peer, tenant)
            self.warnings.append(warning)
            return warning

        # What the receivers answer (both call ingest): the gRPC exporter does not surface the answer.
        h.server.ingest = recording  # type: ignore[method-assign]
        session = requests.Session()
        session.hooks["response"].append(self._on_http_answer)
        self.agent = TracerProvider()
        self.agent.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(
            endpoint=f"http://127.0.0.1:{h.server.http_port}/v1/traces", session=session)))
        self.tools = TracerProvider()
        self.tools.add_span_processor(BatchSpanProcessor(
            GrpcSpanExporter(endpoint=f"127.0.0.1:{h.server.grpc_port}", insecure=True),
            schedule_delay_millis=3_600_000, max_export_batch_size=512))

    def _on_http_answer(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.http_answers.append(trace_service_pb2.ExportTraceServiceResponse.FromString(response.content))

    def http_partial_messages(self) -> list[str]:
        return [a.partial_success.error_message for a in self.http_answers if a.HasField("partial_success")]

    def shutdown(self) -> None:
        self.agent.shutdown()
        self.tools.shutdown()


@contextmanager
def senders(h: Harness) -> Iterator[Senders]:
    s = Senders(h)
    try:
        yield s
    finally:
        s.shutdown()


def _agent_span(provider: TracerProvider) -> trace.Span:
    """An agent span whose attributes are set after its start (as strands, ADK and OpenLLMetry do)."""
    span = provider.get_tracer("agent").start_span("invoke_agent")
    span.set_attribute("gen_ai.operation.name", "invoke_agent")
    span.set_attribute("gen_ai.agent.name", "planner")
    return span


def _tool_calls(provider: TracerProvider, parent: trace.Span) -> None:
    tracer = provider.get_tracer("tools")
    context = trace.set_span_in_context(parent)
    for _ in range(CALLS):
        with tracer.start_as_current_span("execute_tool search", context=context, attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": '{"query": "weather in Paris"}',
                "gen_ai.tool.call.result": '{"hits": []}'}):
            pass


def _agent_points(h: Harness) -> dict[str | None, tuple[int, int]]:
    """The ``gen_ai.invoke_agent.tool_calls`` histogram: agent name -> (invocations, calls)."""
    data = h.metrics.get_metrics_data()
    points = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "gen_ai.invoke_agent.tool_calls" for p in m.data.data_points]
    return {p.attributes.get("gen_ai.agent.name"): (int(p.count), int(p.sum)) for p in points}


def _unread_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and NO_CALL in r.getMessage()]


def test_root_first_no_false_warning_and_events_name_the_agent(caplog: pytest.LogCaptureFixture) -> None:
    """The agent ends and is exported before the tool service flushes its six calls (root first). No answer warns
    (the root alone is not "nothing readable"), nothing is logged or counted as unread, and every verdict event
    names the agent "planner", set on the agent span after its start."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with Harness() as h, senders(h) as s:
        root = _agent_span(s.agent)
        _tool_calls(s.tools, root)
        root.end()  # exported now, by the agent process
        assert s.warnings == [None] and h.server.stats().tool_calls == 0
        assert s.tools.force_flush()  # the tool spans, after their root
        assert h.server.stats().tool_calls == CALLS
        h.server.finish_all()
        assert h.wait_reports(1)
        # One more export from each sender: nothing is owed to them either.
        with s.agent.get_tracer("agent").start_as_current_span("unrelated"):
            pass
        assert s.warnings == [None, None, None]
        assert s.http_partial_messages() == [] and len(s.http_answers) == 2
        assert [r.verdict.kind for r in h.reports] == ["stuck"]
        assert "unread" not in h.reports[0].as_dict() or not h.reports[0].as_dict()["unread"]
        kinds = [e.verdict.kind for e in h.events]
        assert "stuck" in kinds
        assert {e.agent for e in h.events} == {"planner"}
        assert _agent_points(h) == {"planner": (1, CALLS)}
    assert _unread_logged(caplog) == []


def test_agent_last_names_the_agent_where_it_can() -> None:
    """The usual order: each tool span is exported as it ends, the agent span (still running meanwhile) last. The
    live events are made before the agent span exists for serve, so they carry no agent name (the tool spans name
    none); the histogram, recorded at the finish, counts the six calls under "planner"."""
    with Harness() as h, senders(h) as s:
        root = _agent_span(s.agent)
        _tool_calls(s.agent, root)  # the agent process's own tools: exported one by one
        assert h.server.stats().tool_calls == CALLS
        live = list(h.events)
        assert "stuck" in [e.verdict.kind for e in live]
        assert {e.agent for e in live} == {None}
        root.end()
        h.server.finish_all()
        assert h.wait_reports(1)
        assert _agent_points(h) == {"planner": (1, CALLS)}
        assert s.warnings == [None] * (CALLS + 1)


def test_one_export_with_the_agent_last_names_the_agent() -> None:
    """The tool service and its agent in one process, exported as one batch at the end (the agent span last in
    it): the agent span is read before the calls are judged, so every event names it."""
    with Harness() as h, senders(h) as s:
        root = _agent_span(s.tools)
        _tool_calls(s.tools, root)
        root.end()
        assert s.tools.force_flush()
        assert h.server.stats().tool_calls == CALLS
        assert "stuck" in [e.verdict.kind for e in h.events]
        assert {e.agent for e in h.events} == {"planner"}
        assert s.warnings == [None]


def test_an_unreadable_trace_is_still_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """An agent with three model calls whose content was not captured and no tool span, root first then the model
    spans: no answer warns while the trace is open; once it is finished, the next answer to the agent process
    carries the warning (on the wire: partial_success, 0 rejected), once; it is logged once and counted (4 spans:
    the agent span and three model spans)."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with Harness() as h, senders(h) as s:
        root = _agent_span(s.agent)
        tracer = s.tools.get_tracer("model")
        context = trace.set_span_in_context(root)
        for _ in range(3):
            with tracer.start_as_current_span("chat gpt-4o", context=context, attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}):
                pass
        root.end()
        assert s.tools.force_flush()
        assert s.warnings == [None, None]
        h.server.finish_all()
        assert h.wait_reports(1)
        for _ in range(2):
            with s.agent.get_tracer("agent").start_as_current_span("unrelated"):
                pass
        assert s.warnings[2] is not None and NO_CALL in s.warnings[2]
        assert s.warnings[3] is None
        [message] = s.http_partial_messages()
        assert message.startswith(f"4 GenAI span(s) but {NO_CALL}")
        assert [a.partial_success.rejected_spans for a in s.http_answers if a.HasField("partial_success")] == [0]
        assert [u["reason"] for u in h.reports[0].as_dict()["unread"]] == [NO_TOOL_CALLS]
    assert len(_unread_logged(caplog)) == 1


def test_nested_agents_each_call_counts_for_its_innermost_agent() -> None:
    """A supervisor agent span holding a researcher agent span that holds the first three of six identical calls
    (decoded spans, given to serve as one request, the agents last): events of the first three calls name the
    researcher, of the last three the supervisor; the histogram counts 3 calls for each (never both for one call).
    Hand-derived: calls at 1..6 s, researcher 0.5-3.5 s, supervisor 0-7 s."""
    from otel_loopguard.conventions.span import SpanRecord

    s = 10**9
    t0 = 1_767_225_600 * s
    trace_id, sup, res = 0x1234, 0x100, 0x200

    def agent(span_id: int, parent: int | None, name: str, start: float, end: float) -> SpanRecord:
        return SpanRecord(trace_id, span_id, parent, "invoke_agent", t0 + int(start * s), t0 + int(end * s),
                          {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name})

    tools = [SpanRecord(trace_id, 0x300 + i, res if i < 3 else sup, "execute_tool search",
                        t0 + (i + 1) * s, t0 + (i + 1) * s + s // 10, {
                            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                            "gen_ai.tool.call.arguments": '{"q": "x"}', "gen_ai.tool.call.result": "none"})
             for i in range(CALLS)]
    with Harness(grpc_on=False, http_on=False) as h:
        h.server.ingest([*tools, agent(res, sup, "researcher", 0.5, 3.5), agent(sup, None, "supervisor", 0, 7)])
        h.server.finish_all()
        assert h.wait_reports(1)
        named = {e.span_context.span_id: e.agent for e in h.events if e.span_context is not None}
        assert named and all(agent == ("researcher" if span_id < 0x303 else "supervisor")
                             for span_id, agent in named.items())
        assert set(named.values()) == {"researcher", "supervisor"}
        assert _agent_points(h) == {"researcher": (1, 3), "supervisor": (1, 3)}


def test_a_grpc_peer_is_named_by_its_host_as_the_http_receiver_names_it() -> None:
    """gRPC names peers ``ipv4:HOST:PORT`` / ``ipv6:[HOST]:PORT``; aiohttp gives the host alone: one sender is one
    name on both transports, whatever its connection's port."""
    from otel_loopguard.serve.request import peer_host

    assert peer_host("ipv4:127.0.0.1:50412") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:50412") == "::1"
    assert peer_host("unix:/tmp/otlp.sock") == "unix:/tmp/otlp.sock"
