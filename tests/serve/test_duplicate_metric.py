"""A retried export shows in serve's ``loopguard.spans.duplicate`` counter, read by the SDK's metric reader."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import Metric, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.serve._support import Harness


def _agent_spans() -> tuple[ReadableSpan, ...]:
    """One agent invocation with three distinct tool calls (a healthy trace), recorded by the real SDK."""
    recorded = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent planner", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}):
        for page in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": f'{{"page": {page}}}',
                    "gen_ai.tool.call.result": f'{{"hits": [{page}]}}'}):
                pass
    provider.shutdown()
    return recorded.get_finished_spans()


def _duplicates(h: Harness) -> Metric | None:
    data = h.metrics.get_metrics_data()
    assert data is not None
    found = [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
             if m.name == "loopguard.spans.duplicate"]
    assert len(found) <= 1
    return found[0] if found else None


def test_the_same_export_delivered_twice_is_counted_in_the_duplicate_metric() -> None:
    """The SDK's OTLP/HTTP exporter sends the same four spans twice (a retry after a lost answer). The second
    delivery's three tool spans were all received before: the counter goes from 0 to 3 (the agent span is not a
    step of the judge, so it is not counted either time), the three calls are judged once, and the counter has
    no attributes (one series, whatever the traffic)."""
    spans = _agent_spans()
    assert len(spans) == 4
    with Harness(grpc_on=False) as h:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{h.server.http_port}/v1/traces")
        try:
            assert exporter.export(spans) is SpanExportResult.SUCCESS
            first = _duplicates(h)
            assert first is not None
            assert [p.value for p in first.data.data_points] == [0]

            assert exporter.export(spans) is SpanExportResult.SUCCESS
            second = _duplicates(h)
        finally:
            exporter.shutdown()
        assert second is not None
        assert second.unit == "{span}"
        assert isinstance(second.data, Sum) and second.data.is_monotonic
        [point] = second.data.data_points
        assert (point.value, dict(point.attributes or {})) == (3, {})
        assert h.server.stats().tool_calls == 3
