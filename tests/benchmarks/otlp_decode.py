"""Micro-benchmark: OTLP/JSON decoding cost on top of ``json.loads``, and protobuf decoding.

Run: ``.venv/bin/python tests/benchmarks/otlp_decode.py [spans]``. Builds realistic GenAI tool spans with a real
TracerProvider (about 10 attributes, one a 200-byte JSON argument string), writes them as OTLP/JSON Lines (one
request of 100 spans per line, like the Collector's file exporter), then times, interleaved over several rounds:

* ``loads``: ``json.loads`` of every line;
* ``decode``: ``decode_json_request`` of every line's bytes (what ``serve`` does with a JSON request: the typed
  msgspec path, or parsing and the general decoder for requests outside the common shape);
* ``proto``: ``decode_proto_request`` of the same spans serialised as protobuf;
* ``file``: reading the JSON Lines file and ``json.loads`` of each line, against ``read_spans`` of the same file.

The ratio printed is ``loads / decode``: above 1 when parsing and decoding to records costs less than ``json.loads``
alone; the audit target is >= 0.5 for the whole audit, so decoding must stay well above that.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard.otlp.proto import decode_proto_request
from otel_loopguard.otlp.read import decode_json_request, read_spans
from otel_loopguard.sdk.otlp_write import spans_to_otlp_dict

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
    total = len(spans)
    print(f"{total} spans, {len(lines)} lines, {sum(map(len, lines)) / total:.0f} JSON bytes/span")
    # An audit process does not hold the SDK spans; keeping them alive would
    # make every full garbage collection (which json.loads triggers) walk them.
    del spans, chunks
    gc.collect()

    handle, path = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(handle, "wb") as fh:
        fh.write(b"\n".join(lines) + b"\n")
    try:
        times: dict[str, list[float]] = {"loads": [], "decode": [], "proto": [], "file_loads": [], "file_read": []}
        for _ in range(rounds):
            t0 = time.perf_counter()
            for line in lines:
                json.loads(line)
            t1 = time.perf_counter()
            decoded = 0
            for line in lines:
                decoded += len(decode_json_request(line))
            t2 = time.perf_counter()
            for blob in blobs:
                decode_proto_request(blob)
            t3 = time.perf_counter()
            with open(path, "rb") as fh:
                for line in fh:
                    json.loads(line)
            t4 = time.perf_counter()
            read = sum(1 for _ in read_spans(path))
            t5 = time.perf_counter()
            assert decoded == read == total
            for name, value in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                times[name].append(value)
    finally:
        os.unlink(path)
    loads, both, proto, file_loads, file_read = (statistics.median(t) for t in times.values())
    per = 1e6 / total
    print(f"json.loads          {loads * per:6.2f} us/span")
    print(f"decode (from bytes) {both * per:6.2f} us/span")
    print(f"protobuf decode     {proto * per:6.2f} us/span")
    print(f"file: lines+loads   {file_loads * per:6.2f} us/span,  read_spans {file_read * per:6.2f} us/span")
    print(f"ratio loads/decode = {loads / both:.2f};  file ratio = {file_loads / file_read:.2f}")

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
