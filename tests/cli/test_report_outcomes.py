"""``report`` derives each stored trace's task outcome as the processor and ``serve`` do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.cli import main
from otel_loopguard.sdk.otlp_write import write_otlp_json
from tests.cli.test_report import LOOP, NORMAL, T0, S

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"}


class _Runs:
    """Agent runs through a real TracerProvider, each ended in a chosen way, with explicit times."""

    def __init__(self, processor: LoopGuardSpanProcessor | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "agent", "service.version": "2.0"}))
        if processor is not None:
            provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("outcome-test")
        self.now = T0

    def tick(self) -> int:
        self.now += S
        return self.now

    def run(self, calls: list[tuple[str, str, bool]], *, finish: str = "stop", root_error: str = "",
            agent_under_root: bool = False) -> None:
        """One run: a model call with ``finish`` as its finish reason, then ``calls``; the root (or the agent
        span under a plain root) ends with an exception event (``root_error="event"``) or error status."""
        root = self.tracer.start_span("job" if agent_under_root else "invoke_agent bot", start_time=self.tick(),
                                      attributes={} if agent_under_root else AGENT)
        agent = self.tracer.start_span("invoke_agent bot", context=set_span_in_context(root), start_time=self.tick(),
                                       attributes=AGENT) if agent_under_root else root
        ctx = set_span_in_context(agent)
        chat = self.tracer.start_span("chat model-a", context=ctx, start_time=self.tick(), attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-a", "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 5, "gen_ai.response.finish_reasons": (finish,)})
        chat.end(end_time=self.tick())
        for tool, query, _ in calls:
            span = self.tracer.start_span(f"execute_tool {tool}", context=ctx, start_time=self.tick(), attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": json.dumps({"q": query}), "gen_ai.tool.call.result": "same"})
            span.end(end_time=self.tick())
        if root_error == "event":
            agent.add_event("exception", {"exception.type": "RuntimeError"}, timestamp=self.now)
        elif root_error == "status":
            agent.set_status(Status(StatusCode.ERROR, "boom"))
        if agent is not root:
            agent.end(end_time=self.tick())
        root.end(end_time=self.tick())


def _record(r: _Runs) -> None:
    """Ten runs: 4 succeed, 2 end in error (an exception event on the root; error status on an agent span under a
    plain root), 2 are refused (content_filter), 2 loop and are stopped, one of them also ending in error."""
    for _ in range(4):
        r.run(NORMAL)
    r.run(NORMAL, root_error="event")
    r.run(NORMAL, root_error="status", agent_under_root=True)
    r.run([], finish="content_filter")
    r.run([], finish="refusal")
    r.run(LOOP)
    r.run(LOOP, root_error="status")


@pytest.fixture()
def runs(tmp_path: Path) -> str:
    """The ten runs written as an OTLP/JSON file."""
    r = _Runs()
    _record(r)
    path = tmp_path / "runs.json"
    write_otlp_json(r.exporter.get_finished_spans(), str(path))
    return str(path)


def test_outcome_shares_follow_the_processor_order(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Shares by hand: success 4/10, error 2/10, refused 2/10, stopped 2/10 (a stop beats the error it caused)."""
    assert main(["report", runs, "--by", "service.version", "--json"]) == 0
    (group,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert (group["traces"], group["success_share"], group["error_share"], group["refused_share"],
            group["stopped_share"]) == (10, 0.4, 0.2, 0.2, 0.2)


def test_turns_and_calls_quantiles(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One model call per run; tool calls 3,3,3,3,3,3,0,0,4,4 -> sorted 0,0,3,3,3,3,3,3,4,4: median 3, p90 at
    position 8.1 -> 4; one loop verdict in each looping run: 20 per 100 tasks."""
    assert main(["report", runs, "--by", "service.version", "--json"]) == 0
    (group,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert (group["turns_median"], group["turns_p90"], group["tool_calls_median"], group["tool_calls_p90"],
            group["loop_verdicts_per_100"]) == (1.0, 1.0, 3.0, 4.0, 20.0)


def test_report_counts_the_outcomes_the_processor_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same ten runs, judged live by the processor (its task metrics) and stored then read by report, give the
    same tasks per outcome (4 success, 2 error, 2 refused, 2 stopped), the same turns (10) and tool calls
    (6 x 3 + 2 x 4 = 26)."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    r = _Runs(LoopGuardSpanProcessor(LoopGuardConfig(), meter_provider=meters, deferred=False))
    _record(r)
    live: dict[str, dict[str, float]] = {}
    for metric in (m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
                   for m in sm.metrics if m.name.startswith("loopguard.task.")):
        for point in metric.data.data_points:
            outcome = str(point.attributes["loopguard.outcome"])
            live.setdefault(metric.name, {})[outcome] = getattr(point, "value", None) or point.sum
    path = tmp_path / "runs.json"
    write_otlp_json(r.exporter.get_finished_spans(), str(path))
    meters.shutdown()
    assert main(["report", str(path), "--by", "service.version", "--json"]) == 0
    (group,) = map(json.loads, capsys.readouterr().out.splitlines())
    stored = {outcome: round(group[f"{share}_share"] * group["traces"])
              for outcome, share in (("success", "success"), ("error", "error"), ("refused", "refused"),
                                     ("stopped", "stopped"))}
    assert live["loopguard.task.outcomes"] == stored == {"success": 4, "error": 2, "refused": 2, "stopped": 2}
    assert sum(live["loopguard.task.turns"].values()) == 10
    assert sum(live["loopguard.task.tool_calls"].values()) == group["tool_calls"] == 26
