"""Micro-benchmark: OTLP/JSON decoding cost on top of ``json.loads``, and protobuf decoding.

Run: ``.venv/bin/python tests/benchmarks/otlp_decode.py [spans]``. Builds realistic GenAI tool spans with a real
TracerProvider (about 10 attributes, one a 200-byte JSON argument string), writes them as OTLP/JSON Lines (one request of
100 spans per line, like the Collector's file exporter), then times, interleaved over several rounds:

* ``loads``: ``json.loads`` of every line;
* ``loads+decode``: ``json.loads`` then ``decode_json_request`` of every line;
* ``proto``: ``decode_proto_request`` of the same spans serialised as protobuf.

The ratio printed is ``loads / (loads+decode)``; the audit target is >= 0.5 for the whole audit, so decoding alone
must stay well above that.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard._otlp_json import decode_json_request
from otel_loopguard._otlp_proto import decode_proto_request
from otel_loopguard._otlp_write import spans_to_otlp_dict

PER_LINE = 100


def _make_spans(count: int) -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    args = json.dumps({"query": "weather in Paris " + "x" * 130, "limit": 10, "filters": {"lang": "en"}})
    assert 190 <= len(args) <= 210, len(args)
    with tracer.start_as_current_span("invoke_agent research") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        for i in range(count):
            with tracer.start_as_current_span("execute_tool search") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "search")
                span.set_attribute("gen_ai.tool.call.id", f"call_{i}")
                span.set_attribute("gen_ai.tool.call.arguments", args)
                span.set_attribute("gen_ai.tool.call.result", f"result {i % 7}")
                span.set_attribute("gen_ai.agent.name", "research_agent")
                span.set_attribute("gen_ai.conversation.id", "conv-0001")
                span.set_attribute("gen_ai.usage.input_tokens", 120 + i % 5)
                span.set_attribute("gen_ai.usage.output_tokens", 18)
                span.set_attribute("tool.retry", i % 3 == 0)
                if i % 10 == 0:
                    span.set_status(Status(StatusCode.ERROR, "timeout"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def main(count: int = 200_000, rounds: int = 5) -> None:
    """Print timings and the loads/(loads+decode) ratio for ``count`` tool spans."""
    spans = _make_spans(count)
    chunks = [spans[i : i + PER_LINE] for i in range(0, len(spans), PER_LINE)]
    lines = [json.dumps(spans_to_otlp_dict(chunk), separators=(",", ":")).encode() for chunk in chunks]
    blobs = [encode_spans(chunk).SerializeToString() for chunk in chunks]
    print(f"{len(spans)} spans, {len(lines)} lines, {sum(map(len, lines)) / len(spans):.0f} JSON bytes/span")

    loads_t, both_t, proto_t = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for line in lines:
            json.loads(line)
        t1 = time.perf_counter()
        decoded = 0
        for line in lines:
            decoded += len(decode_json_request(json.loads(line)))
        t2 = time.perf_counter()
        for blob in blobs:
            decode_proto_request(blob)
        t3 = time.perf_counter()
        assert decoded == len(spans)
        loads_t.append(t1 - t0)
        both_t.append(t2 - t1)
        proto_t.append(t3 - t2)
    loads, both, proto = (statistics.median(t) for t in (loads_t, both_t, proto_t))
    per = 1e6 / len(spans)
    print(f"json.loads          {loads * per:6.2f} us/span")
    print(f"loads + decode      {both * per:6.2f} us/span  (decode alone {(both - loads) * per:.2f} us/span)")
    print(f"protobuf decode     {proto * per:6.2f} us/span")
    print(f"ratio loads/(loads+decode) = {loads / both:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
