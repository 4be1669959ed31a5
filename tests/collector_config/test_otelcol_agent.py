"""collector-config/agent.yaml in the real Collector: the Python SDK's OTLP exporters -> agent.yaml -> backends.

The file runs as shipped; an overlay only moves its listeners to free ports, and TEMPO_OTLP_ENDPOINT,
JAEGER_OTLP_ENDPOINT and LOKI_OTLP_ENDPOINT (its documented variables) point at recording backends. The expected
redaction is derived from the file's comments, not from the Collector's output: a string
``gen_ai.tool.call.arguments``/``result`` becomes the lowercase hex SHA-256 of its UTF-8 bytes (OTTL ``SHA256``),
a non-string one is deleted, and messages and OpenInference/Traceloop input/output are deleted from span
attributes, span-event attributes (the GenAI keys) and log attributes. Everything else, the ``loopguard.verdict``
span events and log events in particular, must arrive unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_loopguard import LoopGuardSpanProcessor
from tests.support.otelcol import RecordingOTLPHTTPReceiver, scrape
from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._collector import RULES_FILE, Running, load_yaml, run_shipped

WAIT = 60.0  # generous: agent.yaml batches for 5 s, and the machine may be loaded; waits end on arrival

# Distinctive raw values: none of them may reach a backend.
ARGS = '{"query": "refund policy for order SECRET-ARGS-41"}'
RESULT = '{"rows": [], "note": "SECRET-RESULT-41"}'
MESSAGES_IN = '[{"role": "user", "parts": [{"type": "text", "content": "SECRET-PROMPT-41"}]}]'
MESSAGES_OUT = '[{"role": "assistant", "parts": [{"type": "text", "content": "SECRET-ANSWER-41"}]}]'
OI_INPUT = '{"url": "https://intranet.example/SECRET-OI-IN-41"}'
OI_OUTPUT = "SECRET-OI-OUT-41"
TL_INPUT = '{"inputs": {"path": "SECRET-TL-IN-41"}}'
TL_OUTPUT = '{"outputs": "SECRET-TL-OUT-41"}'
SECRETS = ("SECRET-ARGS-41", "SECRET-RESULT-41", "SECRET-PROMPT-41", "SECRET-ANSWER-41", "SECRET-OI-IN-41",
           "SECRET-OI-OUT-41", "SECRET-TL-IN-41", "SECRET-TL-OUT-41", "SECRET-LIST-41")  # fmt: skip

HASHED = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
DELETED_ON_SPANS_AND_LOGS = ("gen_ai.input.messages", "gen_ai.output.messages", "input.value", "output.value",
                             "traceloop.entity.input", "traceloop.entity.output")  # fmt: skip
DELETED_ON_SPAN_EVENTS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages",
                          "gen_ai.output.messages")  # fmt: skip


def sha256_hex(value: str) -> str:
    """What OTTL's SHA256 returns (pkg/ottl/ottlfuncs/func_sha256.go: hex.EncodeToString of sha256 of the bytes)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def redact_span_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """agent.yaml's span statements, as its comments state them."""
    out = {}
    for key, value in attributes.items():
        if key in HASHED:
            if isinstance(value, str):
                out[key] = sha256_hex(value)
        elif key not in DELETED_ON_SPANS_AND_LOGS:
            out[key] = value
    return out


def redact_event_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """agent.yaml's spanevent statements."""
    return {k: v for k, v in attributes.items() if k not in DELETED_ON_SPAN_EVENTS}


def redact_log_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """agent.yaml's log statements (tool arguments/results are deleted on logs, not hashed)."""
    return {k: v for k, v in attributes.items() if k not in (*HASHED, *DELETED_ON_SPANS_AND_LOGS)}


def _plain(value: Any) -> Any:
    """SDK attribute values as the recording backend decodes them (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value


@dataclass
class Agent:
    """SDK providers exporting over OTLP to the Collector, with in-memory copies of what they exported."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    meter_provider: MeterProvider
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter

    def flush(self) -> None:
        """Push everything out of the SDK now."""
        assert self.tracer_provider.force_flush(10_000)
        assert self.logger_provider.force_flush(10_000)
        assert self.meter_provider.force_flush(10_000)

    def shutdown(self) -> None:
        """Stop the export threads."""
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def _agent(protocol: str, running: Running) -> Agent:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        base = running.receiver("otlp", "grpc")
        span_exporter = OTLPSpanExporter(endpoint=base, insecure=True, timeout=10)
        log_exporter = OTLPLogExporter(endpoint=base, insecure=True, timeout=10)
        metric_exporter = OTLPMetricExporter(endpoint=base, insecure=True, timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        base = running.receiver("otlp", "http")
        span_exporter = OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=10)
        log_exporter = OTLPLogExporter(endpoint=f"{base}/v1/logs", timeout=10)
        metric_exporter = OTLPMetricExporter(endpoint=f"{base}/v1/metrics", timeout=10)
    resource = Resource.create({"service.name": f"agent-yaml-e2e-{protocol}"})
    logger_provider = LoggerProvider(resource=resource)
    logs = InMemoryLogRecordExporter()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    # Only force_flush exports metrics, so the scrape sees exactly this test's points.
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    tracer_provider = TracerProvider(resource=resource)
    # The public API: the processor judges inline so its span event lands on the still-open agent span.
    tracer_provider.add_span_processor(
        LoopGuardSpanProcessor(logger_provider=logger_provider, meter_provider=meter_provider, deferred=False)
    )
    spans = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return Agent(tracer_provider, logger_provider, meter_provider, spans, logs)


@pytest.fixture
def backends() -> Iterator[tuple[RecordingOTLPReceiver, RecordingOTLPReceiver, RecordingOTLPHTTPReceiver]]:
    """Tempo (gRPC), Jaeger (gRPC) and Loki (OTLP/HTTP) stand-ins, each recording what it receives."""
    with RecordingOTLPReceiver() as tempo, RecordingOTLPReceiver() as jaeger, RecordingOTLPHTTPReceiver() as loki:
        yield tempo, jaeger, loki


def _run_agent(agent: Agent) -> None:
    """Two traces: a same-call loop (4 identical search calls), and one span of every content-carrying shape."""
    tracer = agent.tracer_provider.get_tracer("agent-yaml-e2e")
    with tracer.start_as_current_span(
        "invoke_agent support",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                    "gen_ai.input.messages": MESSAGES_IN, "gen_ai.output.messages": MESSAGES_OUT},
    ):  # fmt: skip
        for i in range(4):
            with tracer.start_as_current_span(
                "execute_tool search",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                            "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": ARGS,
                            "gen_ai.tool.call.result": RESULT},
            ) as tool:  # fmt: skip
                tool.add_event("gen_ai.tool.call", {"gen_ai.tool.call.arguments": ARGS,
                                                    "gen_ai.tool.call.result": RESULT, "attempt": i})  # fmt: skip
    with tracer.start_as_current_span(
        "invoke_agent writer", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}
    ):
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
                        "gen_ai.input.messages": MESSAGES_IN, "gen_ai.output.messages": MESSAGES_OUT},
        ) as chat:  # fmt: skip
            chat.add_event("gen_ai.client.inference.operation.details",
                           {"gen_ai.input.messages": MESSAGES_IN, "gen_ai.output.messages": MESSAGES_OUT,
                            "gen_ai.response.finish_reasons": ("stop",)})  # fmt: skip
        # Non-string arguments/result (a string list): deleted, never passed through unhashed.
        with tracer.start_as_current_span(
            "execute_tool lookup",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.arguments": ("SECRET-LIST-41", "b"),
                        "gen_ai.tool.call.result": ("SECRET-LIST-41",)},
        ):  # fmt: skip
            pass
        with tracer.start_as_current_span(
            "fetch",
            attributes={"openinference.span.kind": "TOOL", "tool.name": "fetch",
                        "input.value": OI_INPUT, "output.value": OI_OUTPUT},
        ):  # fmt: skip
            pass
        with tracer.start_as_current_span(
            "read_file.tool",
            attributes={"traceloop.span.kind": "tool", "traceloop.entity.name": "read_file",
                        "traceloop.entity.input": TL_INPUT, "traceloop.entity.output": TL_OUTPUT},
        ) as traceloop_span:  # fmt: skip
            # A GenAI event through the Logs API, with content on its attributes.
            agent.logger_provider.get_logger("genai-events").emit(
                event_name="gen_ai.client.inference.operation.details",
                attributes={"gen_ai.request.model": "gpt-4.1", "gen_ai.input.messages": MESSAGES_IN,
                            "gen_ai.output.messages": MESSAGES_OUT, "gen_ai.tool.call.arguments": ARGS,
                            "gen_ai.tool.call.result": RESULT, "input.value": OI_INPUT, "output.value": OI_OUTPUT,
                            "traceloop.entity.input": TL_INPUT, "traceloop.entity.output": TL_OUTPUT},
                context=trace.set_span_in_context(traceloop_span),
            )  # fmt: skip
    agent.flush()


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == want for k, want in labels.items()))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_agent_yaml_redacts_content_and_keeps_verdicts(
    otelcol_bin: Path,
    tmp_path: Path,
    backends: tuple[RecordingOTLPReceiver, RecordingOTLPReceiver, RecordingOTLPHTTPReceiver],
    protocol: str,
) -> None:
    """Spans, logs and metrics cross agent.yaml; content is hashed or deleted as promised, verdicts intact."""
    tempo, jaeger, loki = backends
    env = {"TEMPO_OTLP_ENDPOINT": tempo.endpoint, "JAEGER_OTLP_ENDPOINT": jaeger.endpoint,
           "LOKI_OTLP_ENDPOINT": loki.http_endpoint}  # fmt: skip
    with run_shipped(otelcol_bin, tmp_path, ("agent.yaml",), env) as running:
        agent = _agent(protocol, running)
        try:
            _run_agent(agent)
        finally:
            agent.shutdown()
        sent_spans = agent.spans.get_finished_spans()
        sent_logs = [getattr(d, "log_record", d) for d in agent.logs.get_finished_logs()]
        assert len(sent_spans) == 10  # agent + 4 calls in the loop trace; agent + chat, lookup, fetch, read_file
        for backend in (tempo, jaeger):
            assert backend.wait_for(lambda r: len(r.spans()) >= len(sent_spans), WAIT), running.collector.diagnostics()
        assert loki.wait_for(lambda r: len(r.log_records()) >= len(sent_logs), WAIT), running.collector.diagnostics()

        # Metrics: the processor's loopguard.* instruments, translated by the prometheus exporter.
        def loop_counted() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            samples = scrape(running.prometheus_url)
            return samples if _value(samples, "loopguard_tool_calls_total", gen_ai_tool_name="search") == 4 else None

        deadline = time.monotonic() + WAIT
        samples = loop_counted()
        while samples is None and time.monotonic() < deadline:  # the exporter offers no push notification
            time.sleep(0.2)
            samples = loop_counted()
        assert samples is not None, f"loopguard_tool_calls_total never reached 4\n{running.collector.diagnostics()}"

    # Traces: each backend got exactly one copy of each span, redacted as the comments promise.
    for backend in (tempo, jaeger):
        received = {s["span_id"]: s for s in backend.spans()}
        assert len(backend.spans()) == len(received) == len(sent_spans)
        for span in sent_spans:
            got = received[format(span.context.span_id, "016x")]
            sent_attributes = {k: _plain(v) for k, v in span.attributes.items()}
            assert got["attributes"] == redact_span_attributes(sent_attributes), span.name
            expected_events = [(e.name, redact_event_attributes({k: _plain(v) for k, v in e.attributes.items()}))
                               for e in span.events]  # fmt: skip
            assert got["events"] == expected_events, span.name
    by_name = {s["name"]: s for s in tempo.spans()}
    # Spelled out once more for the two hashed keys, with the digest computed here from the raw value.
    search = by_name["execute_tool search"]["attributes"]
    assert search["gen_ai.tool.call.arguments"] == sha256_hex(ARGS)
    assert search["gen_ai.tool.call.result"] == sha256_hex(RESULT)
    assert len(search["gen_ai.tool.call.arguments"]) == 64
    assert set(by_name["execute_tool lookup"]["attributes"]) == {"gen_ai.operation.name", "gen_ai.tool.name"}
    assert set(by_name["fetch"]["attributes"]) == {"openinference.span.kind", "tool.name"}
    assert set(by_name["read_file.tool"]["attributes"]) == {"traceloop.span.kind", "traceloop.entity.name"}
    assert set(by_name["chat gpt-4.1"]["attributes"]) == {"gen_ai.operation.name", "gen_ai.request.model"}
    assert by_name["chat gpt-4.1"]["events"] == [
        ("gen_ai.client.inference.operation.details", {"gen_ai.response.finish_reasons": ["stop"]})
    ]

    # The verdict span event on the loop trace's agent span: present, and every attribute unchanged.
    agent_events = [attrs for name, attrs in by_name["invoke_agent support"]["events"] if name == "loopguard.verdict"]
    assert agent_events, by_name["invoke_agent support"]
    first = agent_events[0]
    # Hand-derived: the third identical call completes 3 repetitions of a period-1 cycle (defaults
    # min_repetitions=3, max_period=3) with the same result each time -> stuck by the period rule.
    assert (first["loopguard.verdict"], first["loopguard.verdict.previous"], first["loopguard.rule"]) == (
        "stuck", "working", "period")  # fmt: skip
    assert (first["loopguard.period"], first["loopguard.repetitions"], first["loopguard.steps"]) == (1, 3, 3)
    assert (first["gen_ai.tool.name"], first["gen_ai.agent.name"]) == ("search", "support")

    # Logs: verdict events unchanged with their trace context; the GenAI event keeps only non-content keys.
    records = loki.log_records()
    assert len(records) == len(sent_logs)
    assert set(loki.http_paths) == {"/v1/logs"}
    for sent in sent_logs:
        sent_attributes = {k: _plain(v) for k, v in (sent.attributes or {}).items()}
        [got] = [r for r in records if r["event_name"] == sent.event_name and
                 r["span_id"] == format(sent.span_id, "016x")]  # fmt: skip
        assert got["attributes"] == redact_log_attributes(sent_attributes)
        assert got["trace_id"] == format(sent.trace_id, "032x")
    verdicts = [r for r in records if r["event_name"] == "loopguard.verdict"]
    assert verdicts and all(r["attributes"]["loopguard.verdict"] for r in verdicts)
    [genai] = [r for r in records if r["event_name"] == "gen_ai.client.inference.operation.details"]
    assert genai["attributes"] == {"gen_ai.request.model": "gpt-4.1"}

    # Nothing raw anywhere: every request every backend received, as bytes.
    for backend in (tempo, jaeger, loki):
        raw = b"".join(r.request.SerializeToString() for r in backend.received())
        leaked = [s for s in SECRETS if s.encode() in raw]
        assert not leaked, leaked

    # Metrics, with the values the SDK recorded: 4 search calls; one entry into stuck for agent "support".
    stuck_events = [r for r in verdicts if r["attributes"]["loopguard.verdict"] == "stuck"
                    and r["attributes"]["loopguard.verdict.previous"] != "stuck"]  # fmt: skip
    assert len(stuck_events) == 1
    assert _value(samples, "loopguard_verdicts_total", loopguard_verdict="stuck", loopguard_verdict_previous="working",
                  loopguard_rule="period", gen_ai_agent_name="support") == 1  # fmt: skip
    assert {lbl["job"] for lbl, _ in samples["loopguard_tool_calls_total"]} == {f"agent-yaml-e2e-{protocol}"}


def _rule_metric_names() -> set[str]:
    """Every metric name the alert and recording rules read (recording rules' own names excluded)."""
    from ._support import promql_names  # the suite's PromQL name extractor (imported late: see _collector.py)

    names: set[str] = set()
    for group in load_yaml(RULES_FILE)["groups"]:
        for rule in group["rules"]:
            names |= {m for m in promql_names(rule["expr"]).metrics if ":" not in m}
    return names


def _header_metric_names() -> set[str]:
    """The series names of the table in the rules file's header (``otel.name -> prom_name{labels}``)."""
    names: set[str] = set()
    for line in RULES_FILE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"#\s+[\w.]+(?: \(\w+\))?\s+->\s+(\w+?)(_\{bucket,sum,count\})?(?:\{|$)", line)
        if match:
            base, histogram = match.groups()
            names |= {f"{base}_{s}" for s in ("bucket", "sum", "count")} if histogram else {base}
    return names


def test_agent_yaml_prometheus_exporter_serves_every_name_the_rules_use(otelcol_bin: Path, tmp_path: Path) -> None:
    """``otel-loopguard demo`` exports through agent.yaml; a scrape of its exporter has every name the rules read.

    Both the names in the rules' expressions and the whole name table in the rules file's header are checked.
    The demo's scenarios produce every instrument except the two that only count trouble (evicted traces and
    processor errors); those two are recorded here with the OTel name, kind and unit the README's table gives,
    so the Collector's translation of each of them is checked too.
    """
    rule_names = _rule_metric_names()
    header_names = _header_metric_names()
    # Hand lists (loopguard-rules.yaml), so an extraction that finds nothing cannot pass.
    assert {"loopguard_verdicts_total", "loopguard_interventions_total", "loopguard_trace_cost_USD_sum",
            "loopguard_trace_cost_USD_count", "loopguard_trace_steps_sum", "loopguard_trace_steps_count"} <= rule_names
    assert len(header_names) == 6 + 4 * 3  # 6 counters/gauges, 4 histograms with 3 series each
    assert {"loopguard_traces_active", "loopguard_processor_errors_total", "loopguard_trace_cost_USD_bucket",
            "gen_ai_invoke_agent_tool_calls_bucket", "loopguard_traces_evicted_total"} <= header_names
    wanted = rule_names | header_names
    with RecordingOTLPHTTPReceiver() as backend:
        env = {"TEMPO_OTLP_ENDPOINT": backend.endpoint, "JAEGER_OTLP_ENDPOINT": backend.endpoint,
               "LOKI_OTLP_ENDPOINT": backend.http_endpoint}  # fmt: skip
        with run_shipped(otelcol_bin, tmp_path, ("agent.yaml",), env) as running:
            demo_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
            demo_env["OTEL_EXPORTER_OTLP_ENDPOINT"] = running.receiver("otlp", "grpc")
            demo = subprocess.run(
                [str(Path(sys.executable).parent / "otel-loopguard"), "demo", "--no-color"],
                env=demo_env, capture_output=True, text=True, timeout=300, check=False,
            )
            assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]

            resource = Resource.create({"service.name": "agent-yaml-trouble-counters"})
            reader = PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=running.receiver("otlp", "grpc"), insecure=True, timeout=10),
                export_interval_millis=600_000,
            )
            provider = MeterProvider(resource=resource, metric_readers=[reader])
            meter = provider.get_meter("otel_loopguard")
            evicted = meter.create_counter("loopguard.traces.evicted", unit="{trace}")
            evicted.add(1, {"loopguard.eviction.reason": "idle"})
            meter.create_counter("loopguard.processor.errors", unit="{error}").add(1, {"error.type": "queue_full"})
            assert provider.force_flush(10_000)
            provider.shutdown()

            deadline = time.monotonic() + WAIT
            served: set[str] = set()
            while time.monotonic() < deadline:  # the exporter offers no push notification
                served = set(scrape(running.prometheus_url))
                if wanted <= served:
                    break
                time.sleep(0.2)
    assert wanted <= served, sorted(wanted - served)
