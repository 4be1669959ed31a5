"""OTLP protobuf spans of a GenAI agent trace (an ``invoke_agent`` root and ``execute_tool`` children), for serve's
benchmarks and tests."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2


def kv(key: str, value: str) -> common_pb2.KeyValue:
    """A string attribute."""
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def tool_span(trace_no: int, index: int, t0: int, *, arguments: str, result: str,
              error: str | None = None) -> trace_pb2.Span:
    """The ``index``-th GenAI tool span of trace ``trace_no`` (a child of the trace's agent root)."""
    start = t0 + index * 1_000_000
    span = trace_pb2.Span(
        trace_id=trace_no.to_bytes(16, "big"), span_id=(trace_no * 64 + 2 + index).to_bytes(8, "big"),
        parent_span_id=(trace_no * 64 + 1).to_bytes(8, "big"), name="execute_tool search",
        start_time_unix_nano=start, end_time_unix_nano=start + 500_000,
        attributes=[kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "search"),
                    kv("gen_ai.tool.call.arguments", arguments), kv("gen_ai.tool.call.result", result)],
    )
    if error is not None:
        span.status.code = trace_pb2.Status.STATUS_CODE_ERROR
        span.status.message = error
    return span


def root_span(trace_no: int, t0: int, calls: int) -> trace_pb2.Span:
    """The agent root of trace ``trace_no``, ending after ``calls`` tool spans."""
    return trace_pb2.Span(
        trace_id=trace_no.to_bytes(16, "big"), span_id=(trace_no * 64 + 1).to_bytes(8, "big"),
        name="invoke_agent researcher", start_time_unix_nano=t0 - 1_000, end_time_unix_nano=t0 + calls * 1_000_000,
        attributes=[kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "researcher")],
    )


def request_bytes(spans: Sequence[trace_pb2.Span], service: str = "loopguard-agent") -> bytes:
    """One serialised ExportTraceServiceRequest holding ``spans``."""
    request = trace_service_pb2.ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service))
    rs.scope_spans.add().spans.extend(spans)
    return request.SerializeToString()
