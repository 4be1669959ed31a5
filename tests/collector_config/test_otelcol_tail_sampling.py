"""collector-config/tail-sampling.yaml in the real Collector: which traces it keeps.

The shipped policies run unchanged but for two values, set by the overlay, and here is why:
- the ``baseline`` policy's ``sampling_percentage`` is 0 instead of 5: the probabilistic policy keeps a trace by a
  salted FNV-1a hash of its id, so which of the ordinary traces make the 5% is fixed but not derivable by hand;
  at 0 the expectation is exact ("ordinary traces are not kept"), and the other policies are untouched. The
  Collector replaces lists from a later ``--config`` whole, so the overlay carries the file's own policy list,
  read from the file, with that one number changed;
- ``decision_wait`` is 1 s instead of 60 s, so the test does not idle for a minute per run.

The verdict span events come from the real processor (public API) in this process; completion is decided by the
processor's own decision counters, not by time.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_loopguard import LoopGuardSpanProcessor
from tests.support.otelcol import scrape
from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._collector import CONFIG_DIR, load_yaml, run_shipped

WAIT = 90.0
DECISIONS = "otelcol_processor_tail_sampling_global_count_traces_sampled_total"
PER_POLICY = "otelcol_processor_tail_sampling_count_traces_sampled_total"


def _overlay() -> dict:
    shipped = load_yaml(CONFIG_DIR / "tail-sampling.yaml")["processors"]["tail_sampling"]
    policies = copy.deepcopy(shipped["policies"])
    [baseline] = [p for p in policies if p["type"] == "probabilistic"]
    assert baseline["probabilistic"]["sampling_percentage"] == 5  # what the file ships
    baseline["probabilistic"]["sampling_percentage"] = 0
    return {"processors": {"tail_sampling": {"decision_wait": "1s", "policies": policies}}}


def _sum(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == want for k, want in labels.items()))


def test_tail_sampling_keeps_verdict_and_error_traces_only(otelcol_bin: Path, tmp_path: Path) -> None:
    """Traces with a loopguard.verdict span event and error traces arrive whole; the others do not arrive."""
    with RecordingOTLPReceiver() as tempo:
        env = {"TEMPO_OTLP_ENDPOINT": tempo.endpoint}
        with run_shipped(otelcol_bin, tmp_path, ("tail-sampling.yaml",), env, extra=_overlay()) as running:
            memory = InMemorySpanExporter()
            provider = TracerProvider(resource=Resource.create({"service.name": "tail-sampling-e2e"}))
            provider.add_span_processor(LoopGuardSpanProcessor(
                logger_provider=LoggerProvider(), meter_provider=MeterProvider(), deferred=False))  # fmt: skip
            provider.add_span_processor(SimpleSpanProcessor(memory))
            provider.add_span_processor(BatchSpanProcessor(
                OTLPSpanExporter(endpoint=running.receiver("otlp", "grpc"), insecure=True, timeout=10)))  # fmt: skip
            tracer = provider.get_tracer("tail-sampling-e2e")
            kinds: dict[str, str] = {}

            def agent_trace(kind: str, i: int) -> None:
                with tracer.start_as_current_span(
                    "invoke_agent triage", attributes={"gen_ai.operation.name": "invoke_agent",
                                                       "gen_ai.agent.name": "triage"},
                ) as agent:  # fmt: skip
                    for k in range(3):
                        page = 0 if kind == "loop" else k  # the loop repeats one call; pagination moves on
                        with tracer.start_as_current_span("execute_tool list_tickets", attributes={
                            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "list_tickets",
                            "gen_ai.tool.call.arguments": f'{{"queue": {i}, "page": {page}}}',
                            "gen_ai.tool.call.result": f'{{"rows": ["T-{i}-{page}"]}}'}):  # fmt: skip
                            pass
                kinds[format(agent.get_span_context().trace_id, "032x")] = kind

            def plain_trace(kind: str) -> None:
                with tracer.start_as_current_span("GET /orders") as root:
                    with tracer.start_as_current_span("SELECT orders") as child:
                        if kind == "error":
                            child.set_status(Status(StatusCode.ERROR, "deadlock"))
                kinds[format(root.get_span_context().trace_id, "032x")] = kind

            for i in range(3):
                agent_trace("loop", i)
                agent_trace("pagination", i)
            for _ in range(2):
                plain_trace("error")
            for _ in range(6):
                plain_trace("ok")
            assert provider.force_flush(30_000)
            provider.shutdown()

            # Hand-derived: a loop trace's third identical call makes it stuck (period 1, 3 repetitions), so
            # the processor puts a loopguard.verdict event on its agent span; pagination stays working (no
            # transition, no event); plain traces have no GenAI spans at all.
            with_event = {format(s.context.trace_id, "032x") for s in memory.get_finished_spans()
                          if any(e.name == "loopguard.verdict" for e in s.events)}  # fmt: skip
            assert with_event == {t for t, k in kinds.items() if k == "loop"}
            keep = {t for t, k in kinds.items() if k in ("loop", "error")}
            assert len(kinds) == 14 and len(keep) == 5

            deadline = time.monotonic() + WAIT
            samples = scrape(running.telemetry_url)
            while _sum(samples, DECISIONS) < len(kinds):  # the processor's decision counters; no notification
                assert time.monotonic() < deadline, running.collector.diagnostics()
                time.sleep(0.2)
                samples = scrape(running.telemetry_url)
        # Stopped: the batch processor flushed, so Tempo holds all the Collector will ever send.

    assert _sum(samples, DECISIONS, sampled="true") == len(keep)
    assert _sum(samples, DECISIONS, sampled="false") == len(kinds) - len(keep)
    assert _sum(samples, PER_POLICY, policy="loopguard-verdict", sampled="true") == 3
    assert _sum(samples, PER_POLICY, policy="loopguard-stuck-or-uncertain", sampled="true") == 3
    assert _sum(samples, PER_POLICY, policy="errors", sampled="true") == 2
    assert _sum(samples, PER_POLICY, policy="baseline", sampled="true") == 0

    received = tempo.spans()
    assert {s["trace_id"] for s in received} == keep
    sent = [s for s in memory.get_finished_spans() if format(s.context.trace_id, "032x") in keep]
    assert sorted(s["span_id"] for s in received) == sorted(format(s.context.span_id, "016x") for s in sent)
