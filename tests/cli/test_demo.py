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
from otel_loopguard.cli.demo_agent import DEMO_CONFIG_PATH, DEMO_CONFIG_TOML, DemoResult, run_demo
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


# What each scripted run must end in, worked out from its script in cli/demo_agent.py and the README's rules with
# the demo's configuration (default detectors; retry: 3 attempts, 1 s, rate 2; cost budget $0.25; per million
# tokens gpt-4.1-mini 0.40 in / 1.60 out, gpt-4.1 2.00 in / 8.00 out), not taken from the demo module:
# (tool calls, final verdict, its rule, its period, interventions, rule of the stop, verdict kinds gone through,
#  cost in USD).
SCENARIOS = {
    # get_ticket, then the same search_kb call with the same result: the 3rd search (call 4) completes a period-1
    # cycle of 3 -> stuck, nudge; the 4th search is still stuck after the nudge (stop_after 1) -> stop, and the
    # harness ends the run: 5 calls. Chats: 2400/120, then 2900/90 before each of the 4 searches:
    # 2400*0.4 + 120*1.6 + 4 * (2900*0.4 + 90*1.6) = 1152 + 4 * 1304 = 6368 -> $0.006368.
    "loop": (5, "stuck", "period", 1, ("nudge", "stop"), "period", ("working", "stuck"), 0.006368),
    # web_search, read_page, web_search, read_page, web_search (the script stops at 5 calls): the 5th call is the
    # third web_search in the window (frequency limit 3) with the same result -> stuck by frequency, no period
    # (a period-2 cycle would need 3 full cycles); nudge, then the model answers. Chats: 3 x 3100/110,
    # 2 x 3600/90, the answer 1800/220: 3*1416 + 2*1584 + 1072 = 8488 -> $0.008488.
    "ping_pong": (5, "stuck", "frequency", None, ("nudge",), None, ("working", "stuck"), 0.008488),
    # The same list_open_issues call 4 times with a different page each time: a period-1 repetition whose
    # evidence changes -> working (rule progress, period 1), never stuck. Chats 2600..3800 in / 80 out, plus the
    # answer: (2600+3000+3400+3800+1800)*0.4 + (4*80+220)*1.6 = 5840 + 864 = 6704 -> $0.006704.
    "pagination": (4, "working", "progress", 1, (), None, ("working",), 0.006704),
    # get_invoice failing with RateLimitError 4 times (the first call and max_attempts = 3 retries), each retry after
    # the policy's gap (1, 2, 4 s, plus up to 0.3 s): retrying from the 3rd call on, period 1. One chat 2000/70:
    # 800 + 112 = 912 -> $0.000912.
    "retry": (4, "retrying", "retry", 1, (), None, ("working", "retrying"), 0.000912),
    # request_approval, then check_approval 4 times declaring a lease (owner alice, deadline 30 min ahead, polls
    # 20 s apart): waiting (rule lease) from the first check. One chat 2600/150: 1040 + 240 = 1280 -> $0.00128.
    "waiting": (5, "waiting", "lease", None, (), None, ("working", "waiting"), 0.00128),
    # run_sql 4 times with neither arguments nor result recorded: the repetition lacks evidence -> uncertain
    # (rule evidence, period 1) from the 3rd call. Chats 2100/60 and the answer 1800/220: 936 + 1072 = 2008.
    "uncertain": (4, "uncertain", "evidence", 1, (), None, ("working", "uncertain"), 0.002008),
    # gpt-4.1 chats of 42000, 45000, 48000 input and 900 output tokens before each read_file: 0.0912, 0.0972,
    # 0.1032 USD; after the third chat the total 0.2916 is over $0.25 -> stop (cost_limit) before the third read:
    # 2 calls, all different, working (rule none).
    "cost": (2, "working", "none", None, ("stop",), "cost_limit", ("working",), 0.2916),
}


def test_final_verdicts_and_interventions_are_as_intended(demo: tuple[DemoResult, str]) -> None:
    """Each scenario ends in its intended verdict with exactly the intended nudges, stops and cost."""
    result, _ = demo
    got = {s.key: (s.calls, s.verdict, s.rule, s.period, s.interventions, s.stop_rule, s.transitions)
           for s in result.scenarios}
    assert got == {key: expected[:7] for key, expected in SCENARIOS.items()}
    for s in result.scenarios:
        assert s.cost_usd == pytest.approx(SCENARIOS[s.key][7], abs=1e-9), s.key
    assert result.config.max_cost_usd == 0.25


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
