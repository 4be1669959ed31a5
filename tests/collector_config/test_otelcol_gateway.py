"""collector-config/gateway.yaml in the real Collector, in front of two real ``otel-loopguard serve`` instances.

An agent WITHOUT the processor (plain SDK, OTLP/gRPC) sends 64 traces to the gateway. gateway.yaml runs as shipped;
an overlay only moves its listeners to free ports and lists the two ``serve`` instances (started here with the
installed console script on free ports) as the ``load_balancing`` exporter's static hostnames, as its comments
tell a user to. Each instance exports its verdict events and metrics to the gateway's ``otlp/verdicts`` receiver
(``OTEL_EXPORTER_OTLP_ENDPOINT``), marked by ``service.instance.id``; Tempo and Loki are recording backends.

The same traces, with the same ids, also go straight to one ``serve`` instance alone (the reference). All three
instances share ``LOOPGUARD_SIGNATURE_KEY``, so even the keyed signature digests must agree.

Completion is decided by counts, never by time: the SDK's flush returns when the gateway accepted the spans; the
gateway's own metrics say when the load balancer has passed every span on; a ``serve`` instance stopped with
SIGTERM drains, judges and flushes everything before it exits; the gateway stopped with SIGTERM flushes its batches.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tests.support.otelcol import RecordingOTLPHTTPReceiver, scrape
from tests.support.otlp_receiver import RecordingOTLPReceiver, free_port
from tests.support.processes import port_open, stop_process

from ._collector import listener_overlay, run_shipped

WAIT = 90.0  # generous deadline for each count to be reached; every wait ends as soon as it is
# The ring places each instance by a hash of its address, and the ports are free ones picked per run: how the traces
# split is a coin toss per trace. With 16 traces (8 loops, the only ones whose judge shows in the events) one run in
# about a hundred sent every loop to one instance; with 32 loops that is one in a billion.
TRACES = 64
CALLS = 4
SPANS = TRACES * (1 + CALLS)  # an agent span and four tool spans per trace
SIGNATURE_KEY = "gateway-test-shared-signature-key"


class _Ids(IdGenerator):
    """The same trace and span ids on every run, so the reference run judges the very same traces."""

    def __init__(self) -> None:
        self._n = 0

    def _next(self, bits: int) -> int:
        self._n += 1
        return int(hashlib.sha256(f"gateway-test-{self._n}".encode()).hexdigest(), 16) >> (256 - bits) or 1

    def generate_span_id(self) -> int:
        return self._next(64)

    def generate_trace_id(self) -> int:
        return self._next(128)


def _is_loop(i: int) -> bool:
    return i % 2 == 0


def _send_traces(endpoint: str) -> dict[str, bool]:
    """Send the traces over OTLP/gRPC; returns trace id (hex) -> whether it is a loop."""
    provider = TracerProvider(resource=Resource.create({"service.name": "ts-agent"}), id_generator=_Ids())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10)))
    tracer = provider.get_tracer("gateway-test")
    kinds: dict[str, bool] = {}
    for i in range(TRACES):
        with tracer.start_as_current_span(
            "invoke_agent orders",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders"},
        ) as agent:
            for k in range(CALLS):
                if _is_loop(i):  # the same call with the same result, again and again
                    tool, args, result = "lookup_order", f'{{"order": "A-{i}"}}', '{"status": "pending"}'
                else:  # pagination: every call asks for and gets something new
                    tool, args, result = "list_orders", f'{{"page": {k}}}', f'{{"rows": ["B-{i}-{k}"]}}'
                with tracer.start_as_current_span(
                    f"execute_tool {tool}",
                    attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result},
                ):  # fmt: skip
                    pass
        kinds[format(agent.get_span_context().trace_id, "032x")] = _is_loop(i)
    assert provider.force_flush(30_000), "the receiver did not accept every span"
    provider.shutdown()
    return kinds


class Serve:
    """``otel-loopguard serve`` as a child process, OTLP/gRPC only, on a free port."""

    def __init__(self, name: str, exporter_endpoint: str, environ: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = free_port()
        self.log = Path(tempfile.mkdtemp(prefix="serve-")) / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
        env.update({
            "OTEL_EXPORTER_OTLP_ENDPOINT": exporter_endpoint,
            "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={name}",
            "LOOPGUARD_SIGNATURE_KEY": SIGNATURE_KEY,
            **(environ or {}),
        })  # fmt: skip
        command = [str(Path(sys.executable).parent / "otel-loopguard"), "serve",
                   "--grpc", f"127.0.0.1:{self.port}", "--http", "", "--status", ""]  # fmt: skip
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + WAIT
        while not port_open(self.port):  # no readiness signal but the open port
            assert self.proc.poll() is None, f"serve {name} exited: {self.output()}"
            assert time.monotonic() < deadline, f"serve {name} not listening: {self.output()}"
            time.sleep(0.05)

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def output(self) -> str:
        """What the process printed."""
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM: serve stops receiving, judges what it holds, flushes its exporters and exits 0."""
        return stop_process(self.proc, WAIT)


@pytest.fixture
def serves() -> Iterator[Callable[..., Serve]]:
    """Start ``serve`` instances; every one still running is stopped at the end."""
    started: list[Serve] = []

    def start(name: str, exporter_endpoint: str, environ: dict[str, str] | None = None) -> Serve:
        instance = Serve(name, exporter_endpoint, environ)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def _verdicts(records: list[dict[str, Any]]) -> dict[str, list[tuple[str, tuple[tuple[str, Any], ...]]]]:
    """trace id -> sorted (span id, attributes) of every verdict event."""
    out: dict[str, list[tuple[str, tuple[tuple[str, Any], ...]]]] = defaultdict(list)
    for r in records:
        if r["event_name"] == "loopguard.verdict":
            out[r["trace_id"]].append((r["span_id"], tuple(sorted(r["attributes"].items()))))
    return {trace_id: sorted(events) for trace_id, events in out.items()}


def _poll(what: str, probe: Callable[[], Any], diagnostics: Callable[[], str]) -> Any:
    """Call probe() until it returns something truthy (the Collector's metrics offer no notification)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        result = probe()
        if result:
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}\n{diagnostics()}")


def _sum(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == want for k, want in labels.items()))


def test_gateway_shards_traces_over_two_serve_instances_like_one(
    otelcol_bin: Path, tmp_path: Path, serves: Callable[..., Serve]
) -> None:
    """Every trace is judged by exactly one of two instances, the verdicts equal one instance's, nothing loops."""
    # The reference: one serve instance alone, straight from the agent.
    with RecordingOTLPReceiver() as reference_backend:
        reference = serves("serve-alone", f"http://{reference_backend.endpoint}")
        kinds = _send_traces(f"http://{reference.address}")
        assert reference.stop() == 0, reference.output()
        expected = _verdicts(reference_backend.log_records())

    # Hand-derived expectations, so the comparison below cannot pass on two empty sets: each loop trace has four
    # identical calls with identical results, so the third completes 3 repetitions of a period-1 cycle (defaults)
    # and the trace enters `stuck` by the period rule; pagination traces never repeat a call, so never stuck.
    for trace_id, loop in kinds.items():
        verdicts = [dict(attrs)["loopguard.verdict"] for _, attrs in expected.get(trace_id, [])]
        assert ("stuck" in verdicts) == loop, (trace_id, verdicts)
    entering = [dict(a) for events in expected.values() for _, a in events
                if dict(a)["loopguard.verdict"] == "stuck" and dict(a)["loopguard.verdict.previous"] == "working"]
    assert len(entering) == TRACES // 2
    assert all((a["loopguard.rule"], a["loopguard.period"]) == ("period", 1) for a in entering)
    total_events = sum(len(events) for events in expected.values())

    with RecordingOTLPReceiver() as tempo, RecordingOTLPHTTPReceiver() as loki:
        listeners = listener_overlay("gateway.yaml")
        verdict_port = listeners[1].receivers["otlp/verdicts"]["grpc"]
        # Each instance exports its metrics every half second (the SDK's own variable; the default is a minute), so
        # its tool-call counter at the gateway says which spans it has received: see below.
        instances = [serves(name, f"http://127.0.0.1:{verdict_port}", {"OTEL_METRIC_EXPORT_INTERVAL": "500"})
                     for name in ("serve-a", "serve-b")]  # fmt: skip
        extra = {
            "exporters": {"load_balancing": {"resolver": {"static": {"hostnames": [s.address for s in instances]}}}},
        }
        env = {"TEMPO_OTLP_ENDPOINT": tempo.endpoint, "LOKI_OTLP_ENDPOINT": loki.http_endpoint}
        with run_shipped(otelcol_bin, tmp_path, ("gateway.yaml",), env, extra=extra, listeners=listeners) as gateway:
            diagnostics = gateway.collector.diagnostics
            assert _send_traces(gateway.receiver("otlp", "grpc")) == kinds

            # The load balancer passed every span on, once (the gateway's own exporter metrics).
            _poll("the load balancer to send every span",
                  lambda: _sum(scrape(gateway.telemetry_url), "otelcol_exporter_sent_spans_total",
                               exporter="load_balancing") >= SPANS, diagnostics)  # fmt: skip
            # That count is taken when the spans enter the per-instance `otlp` sub-exporters, whose sending queues
            # are on by default: it does not mean an instance has them. Stopping the instances then could lose the
            # spans still queued (a failure seen once on a loaded machine). Delivery is known from the receiving
            # side: every tool span counted by the instances (they count a tool call when its span is received).
            _poll("the instances to receive every tool span",
                  lambda: _sum(scrape(gateway.prometheus_url), "loopguard_tool_calls_total") >= TRACES * CALLS,
                  diagnostics)  # fmt: skip
            # Each instance drains, judges, and flushes its verdict events and metrics to otlp/verdicts.
            for instance in instances:
                assert instance.stop() == 0, instance.output()
            assert loki.wait_for(lambda r: len(r.log_records()) >= total_events, WAIT), diagnostics()
            samples = _poll(
                "the instances' tool-call counters at the prometheus exporter",
                lambda: (s := scrape(gateway.prometheus_url))
                and _sum(s, "loopguard_tool_calls_total") >= TRACES * CALLS and s,
                diagnostics,
            )
            telemetry = scrape(gateway.telemetry_url)
            # Tempo's copies pass the gateway's batch processor (5 s) and a sending queue: waited for here, while
            # the gateway runs, rather than trusting its shutdown to finish within the stop timeout.
            assert tempo.wait_for(lambda r: len(r.spans()) >= SPANS, WAIT), diagnostics()
        # Stopped: the gateway flushed its batches, so the backends now hold everything it will ever send.

    records = loki.log_records()
    # Nothing duplicated, nothing lost, nothing sent round again: as many events as one instance alone emits.
    assert len(records) == total_events
    assert _verdicts(records) == expected
    # Exactly one instance judged each trace, and the ring used both.
    judged_by: dict[str, set[str]] = defaultdict(set)
    for r in records:
        judged_by[r["trace_id"]].add(r["resource"]["service.instance.id"])
    assert all(len(names) == 1 for names in judged_by.values()), judged_by
    assert {name for names in judged_by.values() for name in names} == {"serve-a", "serve-b"}
    # Every tool span was judged exactly once: the instances' counters add up to the calls sent.
    assert _sum(samples, "loopguard_tool_calls_total") == TRACES * CALLS
    per_instance = {lbl["instance"] for lbl, v in samples["loopguard_tool_calls_total"] if v > 0}
    assert per_instance == {"serve-a", "serve-b"}
    # The gateway's own counts: the load balancer sent each agent span once; the verdict receiver took in only
    # what serve emitted (log records, metrics, no spans), and none of it reached the load balancer.
    assert _sum(telemetry, "otelcol_exporter_sent_spans_total", exporter="load_balancing") == SPANS
    assert _sum(telemetry, "otelcol_receiver_accepted_spans_total", receiver="otlp") == SPANS
    assert _sum(telemetry, "otelcol_receiver_accepted_spans_total", receiver="otlp/verdicts") == 0
    assert _sum(telemetry, "otelcol_receiver_accepted_log_records_total", receiver="otlp/verdicts") == total_events
    # Tempo got each agent span once, redacted (serve sends no spans back).
    spans = tempo.spans()
    assert len(spans) == len({s["span_id"] for s in spans}) == SPANS
    assert all(len(s["attributes"].get("gen_ai.tool.call.arguments", "x" * 64)) == 64 for s in spans)
