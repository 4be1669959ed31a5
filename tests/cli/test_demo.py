"""``otel-loopguard demo``: scripted runs through the real SDK and processor, in simulated time."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_loopguard.cli import main
from otel_loopguard.cli.demo_agent import DEMO_CONFIG_PATH, DEMO_CONFIG_TOML, EXPECTED, DemoResult, run_demo
from tests.support.otlp_receiver import RecordingOTLPReceiver

TITLES = (
    "same-call loop", "search/read ping-pong", "pagination that makes progress",
    "rate-limited call retried with backoff", "approval wait with an owner and a deadline",
    "repeated calls whose content is not recorded", "a run that exceeds its cost budget",
)
# The scripted runs follow a simulated clock: their printed timeline spans about 175 s (retry backoffs, approval
# polls 20 s apart). The command itself takes well under a second (0.3-0.6 s with three busy loops on two cores), so
# a 30 s limit holds on a loaded machine and still fails a demo that waits its timeline out in real time. That it
# is fast is checked on CPU time, which a busy machine does not stretch the way it stretches wall time (this
# process used 0.05-0.4 s for the command, imports included).
WALL_LIMIT_S = 30.0
CPU_LIMIT_S = 5.0


@pytest.fixture(scope="module")
def demo() -> tuple[DemoResult, str]:
    """One in-process demo run and its printed timeline."""
    stream = io.StringIO()
    return run_demo(stream=stream), stream.getvalue()


def _audit_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict]:
    capsys.readouterr()
    status = main(["audit", "--json", *args])
    assert status in (0, 1)
    lines = capsys.readouterr().out.splitlines()
    return {d["trace_id"]: d for d in map(json.loads, lines)}


def test_cli_demo_runs_in_simulated_time_prints_every_scenario_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command is fast and does not wait out its simulated timeline, prints every scenario and the summary, and
    exits 0."""
    started, cpu_started = time.perf_counter(), time.process_time()
    status = main(["demo", "--no-color"])
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    out = capsys.readouterr().out
    assert status == 0
    timeline = max(float(t) for t in re.findall(r"t\+\s*([0-9.]+)s", out))
    assert timeline > 5 * WALL_LIMIT_S, timeline  # so the limit below tells simulated time from real waiting
    assert elapsed < WALL_LIMIT_S, elapsed
    assert cpu < CPU_LIMIT_S, cpu
    for title in TITLES:
        assert title in out
    assert "summary" in out and "\x1b[" not in out
    assert out.count("verdict working -> stuck") == 2
    assert "nudge delivered in this tool result" in out


def test_final_verdicts_and_interventions_are_as_intended(demo: tuple[DemoResult, str]) -> None:
    """Each scenario ends in its intended verdict with exactly the intended nudges and stops."""
    result, _ = demo
    got = {s.key: (s.verdict, s.interventions) for s in result.scenarios}
    assert got == EXPECTED
    by_key = {s.key: s for s in result.scenarios}
    assert by_key["loop"].stop_rule == "period" and by_key["loop"].period == 1
    assert by_key["loop"].transitions == ("working", "stuck")
    assert by_key["ping_pong"].rule == "frequency"
    assert by_key["pagination"].rule == "progress" and by_key["pagination"].transitions == ("working",)
    assert by_key["retry"].rule == "retry"
    assert by_key["waiting"].rule == "lease"
    assert by_key["uncertain"].rule == "evidence"
    assert by_key["cost"].stop_rule == "cost_limit" and by_key["cost"].cost_usd > result.config.max_cost_usd
    assert all(s.cost_usd < result.config.max_cost_usd for s in result.scenarios if s.key != "cost")


def test_spans_follow_the_genai_conventions(demo: tuple[DemoResult, str]) -> None:
    """Tool spans carry gen_ai tool attributes (none for the unrecorded scenario), failures error.type, leases their owner."""
    result, _ = demo
    tools = [s for s in result.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    chats = [s for s in result.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    roots = [s for s in result.spans if s.parent is None]
    assert len(roots) == 7 and all(r.attributes["gen_ai.operation.name"] == "invoke_agent" for r in roots)
    assert len(tools) == sum(s.calls for s in result.scenarios)
    assert all(isinstance(c.attributes["gen_ai.usage.input_tokens"], int) for c in chats)
    for span in tools:
        name = span.attributes["gen_ai.tool.name"]
        if name == "run_sql":
            assert "gen_ai.tool.call.arguments" not in span.attributes
            assert "gen_ai.tool.call.result" not in span.attributes
        elif name == "get_invoice":
            assert span.attributes["error.type"] == "RateLimitError"
        else:
            assert isinstance(json.loads(span.attributes["gen_ai.tool.call.arguments"]), dict)
        if name == "check_approval":
            assert span.attributes["loopguard.wait.owner"] == "alice@acme.example"
            assert isinstance(span.attributes["loopguard.wait.deadline"], float)
    retries = sorted((s for s in tools if s.attributes["gen_ai.tool.name"] == "get_invoice"), key=lambda s: s.start_time)
    gaps = [(b.start_time - a.end_time) / 1e9 for a, b in zip(retries, retries[1:])]
    # The demo waits the policy's backoff (1 s, 2 s, 4 s) plus at most 0.3 s of jitter before each retry.
    assert len(gaps) == 3 and all(m - 1e-6 <= g <= m + 0.3 + 1e-6 for g, m in zip(gaps, (1.0, 2.0, 4.0))), gaps


def test_out_file_audits_to_the_same_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``demo --out`` writes OTLP/JSON that ``audit`` judges with the same verdicts, rules and transitions."""
    out = tmp_path / "demo.json"
    stream = io.StringIO()
    result = run_demo(out=str(out), stream=stream)
    assert f"wrote {len(result.spans)} spans to {out}" in stream.getvalue()
    audited = _audit_json(capsys, str(out))
    assert set(audited) == {s.trace_id for s in result.scenarios}
    for s in result.scenarios:
        a = audited[s.trace_id]
        assert (a["verdict"], a["rule"], a["steps_used"]) == (s.verdict, s.rule, s.calls), s.key
        assert tuple(["working"] + [t["to"] for t in a["transitions"]]) == s.transitions, s.key


def test_out_file_with_the_demo_config_reproduces_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the demo's configuration (the example file shipped in the package), ``audit`` prices the usage exactly
    as the demo did and stops the costly run."""
    out, config = tmp_path / "demo.jsonl", DEMO_CONFIG_PATH
    assert config.parent.name == "examples" and config.parent.parent.name == "otel_loopguard"
    stream = io.StringIO()
    result = run_demo(out=str(out), stream=stream)
    assert f"--config {config}" in stream.getvalue()
    audited = _audit_json(capsys, str(out), "--config", str(config))
    for s in result.scenarios:
        assert audited[s.trace_id]["cost_usd"] == pytest.approx(s.cost_usd, abs=1e-6), s.key
    cost = next(s for s in result.scenarios if s.key == "cost")
    assert [i["rule"] for i in audited[cost.trace_id]["interventions"]] == ["cost_limit"]


def test_out_file_with_the_demo_config_gives_the_same_interventions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the demo's configuration, ``audit`` finds exactly the nudges and stops the live processor made."""
    out, config = tmp_path / "demo.json", tmp_path / "demo.toml"
    config.write_text(DEMO_CONFIG_TOML)
    result = run_demo(out=str(out), stream=io.StringIO())
    audited = _audit_json(capsys, str(out), "--config", str(config))
    for s in result.scenarios:
        assert tuple(i["action"] for i in audited[s.trace_id]["interventions"]) == s.interventions, s.key


def test_in_process_metrics_and_events(demo: tuple[DemoResult, str]) -> None:
    """Injected providers receive the verdict metrics and one event per observation with a transition or intervention."""
    reader = InMemoryMetricReader()
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    run_demo(meter_provider=MeterProvider(metric_readers=[reader]), logger_provider=logger_provider,
             stream=io.StringIO())
    points: dict[str, list] = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    interventions = {(p.attributes["loopguard.intervention"], p.attributes["loopguard.rule"]): p.value
                     for p in points["loopguard.interventions"]}
    assert interventions == {("nudge", "period"): 1, ("stop", "period"): 1, ("nudge", "frequency"): 1,
                             ("stop", "cost_limit"): 1}
    into = {}
    for p in points["loopguard.verdicts"]:
        into[p.attributes["loopguard.verdict"]] = into.get(p.attributes["loopguard.verdict"], 0) + p.value
    assert into == {"stuck": 2, "retrying": 1, "waiting": 1, "uncertain": 1}
    assert sum(p.value for p in points["loopguard.tool_calls"]) == 29
    records = [r.log_record for r in logs.get_finished_logs()]
    # One event per observation: the loop's stuck+nudge, its stop, ping-pong's stuck+nudge, the cost stop,
    # and the retrying, waiting and uncertain transitions.
    assert len(records) == 7
    assert {r.event_name for r in records} == {"loopguard.verdict"}


def test_exports_over_otlp_grpc_when_an_endpoint_is_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, spans, verdict events and metrics reach a real OTLP/gRPC receiver."""
    with RecordingOTLPReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{receiver.endpoint}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        assert main(["demo", "--no-color"]) == 0
        assert receiver.wait_for(lambda r: len(r.spans()) >= 59 and r.log_records() and r.metric_points())
        spans, records, metrics = receiver.spans(), receiver.log_records(), receiver.metric_points()
    assert len(spans) == 59
    assert {s["resource"]["service.name"] for s in spans} == {"otel-loopguard-demo"}
    assert sum(1 for r in records if r["event_name"] == "loopguard.verdict") == 7
    assert "loopguard.verdicts" in {m["name"] for m in metrics}
    assert "exported spans, verdict events and metrics" in capsys.readouterr().out


def test_variant_reproduces_ids_and_timeline() -> None:
    """The same variant gives the same trace ids and timeline; another variant gives other ids."""
    a, b, c = io.StringIO(), io.StringIO(), io.StringIO()
    ra, rb, rc = run_demo(stream=a, variant=1), run_demo(stream=b, variant=1), run_demo(stream=c, variant=2)
    assert [s.trace_id for s in ra.scenarios] == [s.trace_id for s in rb.scenarios]
    assert a.getvalue() == b.getvalue()
    assert {s.trace_id for s in ra.scenarios}.isdisjoint(s.trace_id for s in rc.scenarios)
    assert [s.verdict for s in rc.scenarios] == [s.verdict for s in ra.scenarios]


def test_colour_only_when_asked() -> None:
    """ANSI colours appear with color=True and never without."""
    plain, coloured = io.StringIO(), io.StringIO()
    run_demo(stream=plain)
    run_demo(stream=coloured, color=True)
    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[31mstuck\x1b[0m" in coloured.getvalue()
