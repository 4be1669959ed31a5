"""What a user sees of the demo in real backends, through the shipped ``agent.yaml``: Jaeger v2's API, every
dashboard panel evaluated by a real Prometheus scraping with the documented ``prometheus.yml``, and the verdict
log records as Loki's OTLP mapping stores them.

Every expected value is derived by hand from the demo's seven scripts (``otel_loopguard/cli/demo_agent.py``) and
its configuration (stuck after 3 repetitions, nudge first, stop at the next repeat; a cost budget of $0.25):

================  ===================================================  =====  ==============================
agent             script                                               calls  verdict events
================  ===================================================  =====  ==============================
support-bot       get_ticket, then search_kb x4 (stuck at the 3rd,     5      working->stuck (period, nudge);
                  stopped at the 4th)                                         stuck->stuck (stop)
research-bot      web_search/read_page alternating; the 3rd identical  5      working->stuck (frequency, nudge)
                  web_search is the stuck call; it then answers
triage-bot        list_open_issues x4, each a new page                 4      none (progress)
billing-bot       get_invoice x4 failing with backoff                  4      working->retrying
deploy-bot        request_approval, check_approval x4 with a lease     5      working->waiting
ops-bot           run_sql x4 with no content recorded                  4      working->uncertain
analyst-bot       read_file x2, the model's cost passes the budget     2      stop (cost_limit), no transition
================  ===================================================  =====  ==============================

Set ``LOOPGUARD_BACKENDS_RECORD=<file.json>`` to write what the backends answered (the figures of
``docs/backends.md``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.external import unavailable
from tests.support.jaeger import JAEGER_ENV, jaeger_get

from ._demo_stack import DEMO_SERVICE, DemoStack, demo_stack, search, verdict_logs
from ._loki import LABEL_NAME, LokiEntry, loki_entry, select
from ._prometheus import get_json, instant
from ._support import DASHBOARD_FILE, load_yaml
from .test_rules_and_dashboard import explore_query, trace_links

JAEGER_OVERRIDE = os.environ.get(JAEGER_ENV) or None
RECORD = os.environ.get("LOOPGUARD_BACKENDS_RECORD") or None
DASHBOARD = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
# What the dashboard's variables become in the test: the demo's job picked, every agent, Grafana's windows.
VARIABLES = {"$job": DEMO_SERVICE, "$agent": ".*", "$__rate_interval": "5m", "$__range": "1h"}

# Tool calls per tool, from the table above.
TOOL_CALLS = {"get_ticket": 1, "search_kb": 4, "web_search": 3, "read_page": 2, "list_open_issues": 4,
              "get_invoice": 4, "request_approval": 1, "check_approval": 4, "run_sql": 4, "read_file": 2}
STEPS = [5, 5, 4, 4, 5, 4, 2]  # tool calls per trace, the "calls" column


def _q(rank: float, lower: float, upper: float, below: float, count: float) -> float:
    """Prometheus's histogram_quantile inside one bucket: linear from ``lower`` to ``upper``."""
    return lower + (upper - lower) * (rank - below) / count


# The task outcome of each demo run: two are stopped (the loop at its 4th search_kb, the cost budget at the third
# gpt-4.1 call), the others end without error or refusal. Turns are the model calls made before the run ended;
# costs are the demo's price table applied to them (gpt-4.1-mini $0.4/$1.6, gpt-4.1 $2/$8 per million tokens):
# support-bot 2400/120 + 4 x 2900/90 = $0.006368; research-bot 3 x 3100/110 + 2 x 3600/90 + the answer 1800/220
# = $0.008488; triage-bot 2600..3800/80 + the answer = $0.006704; billing-bot 2000/70 = $0.000912; deploy-bot
# 2600/150 = $0.00128; ops-bot 2100/60 + the answer = $0.002008; analyst-bot 42000, 45000, 48000/900 = $0.2916.
OUTCOMES = {"support-bot": "stopped", "research-bot": "success", "triage-bot": "success", "billing-bot": "success",
            "deploy-bot": "success", "ops-bot": "success", "analyst-bot": "stopped"}
TURNS = {"support-bot": 5, "research-bot": 6, "triage-bot": 5, "billing-bot": 1, "deploy-bot": 1, "ops-bot": 2,
         "analyst-bot": 3}
COSTS = {"support-bot": 0.006368, "research-bot": 0.008488, "triage-bot": 0.006704, "billing-bot": 0.000912,
         "deploy-bot": 0.00128, "ops-bot": 0.002008, "analyst-bot": 0.2916}


def _recorded(name: str, values: dict[str, float], outcome: str | None = None) -> dict[Any, float]:
    """Expected series of a recorded figure: one per agent, labelled as the operations rules keep them."""
    extra = (("loopguard_outcome", outcome),) if outcome else ()
    return {(("__name__", name), ("gen_ai_agent_name", agent), ("job", DEMO_SERVICE), *extra): value
            for agent, value in values.items()}


def _operations() -> dict[tuple[str, str], dict[Any, float]]:
    """The task-outcome row: each agent ran once in the last hour, so each share is 1 for its one outcome (no
    series for an outcome no run had) and the means are that run's figures; the demo's Prometheus holds nothing
    of a day earlier, so the two comparison targets are empty."""
    out: dict[tuple[str, str], dict[Any, float]] = {}
    for title, outcome in (("Task success share", "success"), ("Task error share", "error"),
                           ("Task refusal share", "refused"),
                           ("Task stop share (loop, step and cost stops)", "stopped")):
        out[(title, "A")] = _recorded("loopguard:task_outcome:ratio1h",
                                      {a: 1.0 for a, o in OUTCOMES.items() if o == outcome}, outcome)
    out[("Turns per task (mean)", "A")] = _recorded("loopguard:task_turns:mean1h", TURNS)
    out[("Cost per task (mean)", "A")] = _recorded("loopguard:task_cost_usd:mean1h", COSTS)
    for title, _ in list(out):
        out[(title, "B")] = out[(title, "C")] = {}
    return out


OPERATIONS = _operations()

# Each Prometheus target of the dashboard -> its expected result {series labels: value}, by (panel, refId).
# Histograms: steps per trace [2, 4, 4, 4, 5, 5, 5] fill buckets le=2: 1 and le=5: 7; costs (summary printed by
# the demo) 0.0009 | 0.0013 0.0020 0.0064 0.0067 0.0085 | 0.2916 fill le=0.001: 1, le=0.01: 6, le=0.5: 7;
# detection delays (calls from the cycle's first call to the stuck call): support-bot calls 2..4 = 3 (its first
# search_kb to the third), research-bot calls 1..5 = 5 (first to third web_search).
PANELS: dict[tuple[str, str], dict[tuple[tuple[str, str], ...], float]] = {
    ("Verdict transitions by verdict", "A"): {
        (("loopguard_verdict", "stuck"),): 2, (("loopguard_verdict", "retrying"),): 1,
        (("loopguard_verdict", "waiting"),): 1, (("loopguard_verdict", "uncertain"),): 1},
    ("Traces currently in each state", "A"): {
        ((("loopguard_verdict", v),)): 0 for v in ("working", "stuck", "retrying", "waiting", "uncertain")},
    ("Nudges and stops", "A"): {
        (("loopguard_intervention", "nudge"), ("loopguard_rule", "period")): 1,
        (("loopguard_intervention", "nudge"), ("loopguard_rule", "frequency")): 1,
        (("loopguard_intervention", "stop"), ("loopguard_rule", "period")): 1,
        (("loopguard_intervention", "stop"), ("loopguard_rule", "cost_limit")): 1},
    ("Transitions into stuck by rule and agent", "A"): {
        (("gen_ai_agent_name", "support-bot"), ("loopguard_rule", "period")): 1,
        (("gen_ai_agent_name", "research-bot"), ("loopguard_rule", "frequency")): 1},
    ("Tool calls by tool (top 10)", "A"): {(("gen_ai_tool_name", t),): n for t, n in TOOL_CALLS.items()},
    ("Tool calls per trace", "A"): {(): _q(3.5, 2, 5, 1, 6)},  # 3.25
    ("Tool calls per trace", "B"): {(): _q(6.3, 2, 5, 1, 6)},  # 4.65
    ("Tool calls per trace", "C"): {(): _q(6.93, 2, 5, 1, 6)},  # 4.965
    ("Cost per trace", "A"): {(): _q(3.5, 0.001, 0.01, 1, 5)},  # 0.0055
    ("Cost per trace", "B"): {(): _q(6.3, 0.25, 0.5, 6, 1)},  # 0.325
    ("Cost per trace", "C"): {(): _q(6.93, 0.25, 0.5, 6, 1)},  # 0.4825
    # One invocation per agent: p90 of one value v lies 90% of the way through v's bucket (1, 2, 4, 8, ...).
    ("Tool calls per agent invocation (p90)", "A"): {
        (("gen_ai_agent_name", a),): _q(0.9, *{5: (4, 8), 4: (2, 4), 2: (1, 2)}[calls], 0, 1)
        for a, calls in {"support-bot": 5, "research-bot": 5, "triage-bot": 4, "billing-bot": 4, "deploy-bot": 5,
                         "ops-bot": 4, "analyst-bot": 2}.items()},
    ("Detection delay", "A"): {(): _q(1.0, 2, 3, 0, 1)},  # 3.0
    ("Detection delay", "B"): {(): _q(1.8, 4, 6, 1, 1)},  # 5.6
    ("Detection delay", "C"): {(): _q(1.98, 4, 6, 1, 1)},  # 5.96
    ("Processor errors and evicted traces", "A"): {},  # no error: no series
    ("Processor errors and evicted traces", "B"): {},  # nothing evicted: sum() of no series is empty
    **OPERATIONS,
    # Every step of the demo is a tool call: the step-kind row shows the rows above under "tool" only.
    ("Transitions into stuck by step kind", "A"): {(("loopguard_step_kind", "tool"),): 2},
    ("Verdict transitions by step kind", "A"): {
        (("loopguard_step_kind", "tool"), ("loopguard_verdict", v)): n
        for v, n in {"stuck": 2, "retrying": 1, "waiting": 1, "uncertain": 1}.items()},
    ("Nudges and stops by step kind", "A"): {  # nudges: support, research; stops: support (period), analyst (cost)
        (("loopguard_step_kind", "tool"), ("loopguard_intervention", "nudge")): 2,
        (("loopguard_step_kind", "tool"), ("loopguard_intervention", "stop")): 2},
}  # fmt: skip


@pytest.fixture(scope="module")
def recorded() -> Iterator[dict[str, Any]]:
    """What the tests saw, written to ``LOOPGUARD_BACKENDS_RECORD`` at the end when that is set."""
    seen: dict[str, Any] = {}
    yield seen
    if RECORD:
        Path(RECORD).write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def stack(otelcol_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoStack]:
    """The demo run once through agent.yaml into Jaeger, Prometheus and the Loki stand-in."""
    binary = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)  # fmt: skip
    missing = None if binary else "prometheus not installed (apt-get install -y prometheus)"
    with demo_stack(otelcol_bin, tmp_path_factory.mktemp("backends"), binary, missing, JAEGER_OVERRIDE) as running:
        yield running


def _jaeger(stack: DemoStack) -> str:
    if stack.jaeger_api is None:
        unavailable(stack.jaeger_missing or "Jaeger unavailable")
    return stack.jaeger_api


def _prometheus(stack: DemoStack) -> str:
    if stack.prometheus is None:
        unavailable(stack.prometheus_missing or "Prometheus unavailable")
    return stack.prometheus


def _verdict_events(span: dict[str, Any]) -> list[dict[str, Any]]:
    """A Jaeger span's ``loopguard.verdict`` events (Jaeger shows span events as logs) as field maps."""
    events = [{f["key"]: f["value"] for f in log["fields"]} for log in span.get("logs", [])]
    return [e for e in events if e.get("event") == "loopguard.verdict"]


def test_jaeger_shows_each_verdict_event_on_its_agent_span(stack: DemoStack, recorded: dict[str, Any]) -> None:
    """Through agent.yaml, /api/traces holds the 7 demo traces and each verdict event on its invoke_agent span."""
    traces = search(_jaeger(stack), {})
    assert {t["traceID"] for t in traces} == set(stack.traces.values())
    seen: dict[str, list[tuple[str, str, str, str]]] = {}
    for trace in traces:
        for span in trace["spans"]:
            events = _verdict_events(span)
            if events:
                agent = span["operationName"].removeprefix("invoke_agent ")
                assert stack.traces[agent] == trace["traceID"]
                seen[agent] = [(e["loopguard.verdict.previous"], e["loopguard.verdict"], e["loopguard.rule"],
                                e["loopguard.intervention"]) for e in events]  # fmt: skip
    recorded["jaeger_verdict_events"] = seen
    assert seen == {
        "support-bot": [("working", "stuck", "period", "nudge"), ("stuck", "stuck", "period", "stop")],
        "research-bot": [("working", "stuck", "frequency", "nudge")],
        "billing-bot": [("working", "retrying", "retry", "none")],
        "deploy-bot": [("working", "waiting", "lease", "none")],
        "ops-bot": [("working", "uncertain", "evidence", "none")],
        "analyst-bot": [("working", "working", "cost_limit", "stop")],
    }


def test_jaeger_tag_search_finds_the_stuck_traces(stack: DemoStack, recorded: dict[str, Any]) -> None:
    """Searching Jaeger for tags={"loopguard.verdict":"stuck"} answers the two looping agents' traces only."""
    found = search(_jaeger(stack), {"tags": json.dumps({"loopguard.verdict": "stuck"})})
    recorded["jaeger_stuck_search"] = sorted(t["traceID"] for t in found)
    assert {t["traceID"] for t in found} == {stack.traces["support-bot"], stack.traces["research-bot"]}


def test_jaeger_trace_link_from_a_stuck_log_record_opens_its_trace(stack: DemoStack) -> None:
    """The dashboard's Jaeger link, filled with a stuck record's trace_id, asks Jaeger for exactly that trace."""
    api = _jaeger(stack)
    [record] = [r for r in verdict_logs(stack.loki) if r["attributes"]["loopguard.verdict.previous"] == "working"
                and r["attributes"]["loopguard.verdict"] == "stuck" and r["attributes"]["gen_ai.agent.name"]
                == "research-bot"]  # fmt: skip
    datasource, query = explore_query(trace_links()["Open trace in Jaeger"], record["trace_id"])
    assert datasource == "${DS_JAEGER}" and "queryType" not in query
    # Grafana's Jaeger datasource answers a query without a query type with GET /api/traces/<query>.
    [trace] = jaeger_get(api, f"/api/traces/{query['query']}")["data"]
    assert trace["traceID"] == stack.traces["research-bot"]
    [agent] = [s for s in trace["spans"] if _verdict_events(s)]
    assert agent["spanID"] != record["span_id"]  # the log record names the tool span that caused it
    assert record["span_id"] in {s["spanID"] for s in trace["spans"]}


def test_tempo_trace_link_asks_traceql_for_an_id_tempo_received(stack: DemoStack) -> None:
    """The Tempo link holds the stuck record's trace id as a TraceQL query, an id among the spans Tempo got."""
    [record] = [r for r in verdict_logs(stack.loki) if r["attributes"]["loopguard.intervention"] == "stop"
                and r["attributes"]["gen_ai.agent.name"] == "support-bot"]  # fmt: skip
    _, query = explore_query(trace_links()["Open trace in Tempo"], record["trace_id"])
    assert query["queryType"] == "traceql" and query["query"] == stack.traces["support-bot"]


def _fill(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(name, value)
    return expr


def _prometheus_targets() -> list[tuple[str, str, str]]:
    return [(p["title"], t["refId"], t["expr"]) for p in DASHBOARD["panels"] for t in p.get("targets", [])
            if t["datasource"]["type"] == "prometheus"]  # fmt: skip


def test_every_prometheus_panel_has_an_expected_result() -> None:
    """The table of expected results covers exactly the dashboard's Prometheus targets (none is left unchecked)."""
    assert {(title, ref) for title, ref, _ in _prometheus_targets()} == set(PANELS)


@pytest.mark.parametrize(("title", "ref", "expr"), _prometheus_targets(), ids=lambda v: str(v)[:40])
def test_dashboard_panel_on_the_demo(stack: DemoStack, recorded: dict[str, Any], title: str, ref: str,
                                     expr: str) -> None:
    """Each panel's PromQL, variables filled in, evaluated by Prometheus, gives the hand-derived values."""
    result = instant(_prometheus(stack), _fill(expr))
    got = {tuple(sorted((k, v) for k, v in r["metric"].items())): float(r["value"][1]) for r in result}
    recorded.setdefault("panels", {})[f"{title} / {ref}"] = {
        ", ".join(f"{k}={v}" for k, v in key) or "-": value for key, value in sorted(got.items())}
    want = {tuple(sorted(key)): value for key, value in PANELS[(title, ref)].items()}
    assert set(got) == set(want), (got, want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, got[key], value)


def test_plain_increase_misses_a_new_series(stack: DemoStack, recorded: dict[str, Any]) -> None:
    """Why the panels changed: increase() alone shows nothing of the 2 new stuck transitions."""
    plain = instant(_prometheus(stack), 'sum(increase(loopguard_verdicts_total{loopguard_verdict="stuck"}[5m]))')
    recorded["plain_increase_stuck"] = plain
    assert sum(float(r["value"][1]) for r in plain) < 2


def test_documented_prometheus_yml_keeps_the_agent_as_job(stack: DemoStack, recorded: dict[str, Any]) -> None:
    """With honor_labels the series name the demo's service as job, and the dashboard's job variable offers it."""
    url = _prometheus(stack)
    config = load_yaml(DASHBOARD_FILE.parents[1] / "prometheus" / "prometheus.yml")
    assert config["scrape_configs"][0]["honor_labels"] is True
    jobs = get_json(f"{url}/api/v1/label/job/values", {"match[]": "loopguard_verdicts_total"})["data"]
    exported = get_json(f"{url}/api/v1/label/exported_job/values")["data"]
    recorded["job_values"] = jobs
    assert jobs == [DEMO_SERVICE]
    assert exported == []


def _loki_entries(stack: DemoStack) -> list[LokiEntry]:
    return [loki_entry(r) for r in verdict_logs(stack.loki)]


def _loki_target(title: str) -> str:
    [panel] = [p for p in DASHBOARD["panels"] if p["title"] == title]
    return panel["targets"][0]["expr"]


def test_loki_stores_verdict_records_under_the_names_the_dashboard_reads(stack: DemoStack,
                                                                         recorded: dict[str, Any]) -> None:
    """Under Loki's OTLP mapping the records carry every field the dashboard and the derived field name."""
    entries = _loki_entries(stack)
    assert len(entries) == 7  # the verdict events of the table in the module docstring
    for entry in entries:
        assert all(LABEL_NAME.match(name) for name in (*entry.labels, *entry.metadata)), entry
        assert entry.labels["service_name"] == DEMO_SERVICE
        assert entry.metadata["trace_id"] in stack.traces.values() and len(entry.metadata["span_id"]) == 16
    [table] = [p for p in DASHBOARD["panels"] if p["title"] == "Verdict events with trace links"]
    columns = set(table["transformations"][1]["options"]["includeByName"]) - {"Time"}
    assert columns <= {name for e in entries for name in e.metadata}
    provisioning = load_yaml(DASHBOARD_FILE.parent / "loki-datasource.yaml")
    assert provisioning["datasources"][0]["jsonData"]["derivedFields"][0]["matcherRegex"] == "trace_id"
    stuck = next(e for e in entries if e.metadata["loopguard_intervention"] == "nudge"
                 and e.metadata["gen_ai_agent_name"] == "support-bot")  # fmt: skip
    recorded["loki_stuck_entry"] = {"labels": sorted(stuck.labels), "metadata": sorted(stuck.metadata)}
    assert stuck.metadata["loopguard_period"] == "1" and stuck.metadata["loopguard_repetitions"] == "3"


def test_loki_panels_on_the_demo(stack: DemoStack, recorded: dict[str, Any]) -> None:
    """The Loki panels' queries over the mapped records: stuck events by tool, and the default verdict filter."""
    entries = _loki_entries(stack)
    loops = _loki_target("Top tools in loops (stuck verdict events)")
    inner = loops.split("count_over_time(", 1)[1].rsplit("[$__range]", 1)[0]
    by_tool: dict[str, int] = {}
    for entry in select(entries, inner):
        tool = entry.metadata["gen_ai_tool_name"]
        by_tool[tool] = by_tool.get(tool, 0) + 1
    # support-bot's nudge and stop events (both verdict stuck), research-bot's nudge.
    assert by_tool == {"search_kb": 2, "web_search": 1}
    # The verdict variable's default [stuck, uncertain], as Grafana writes a multi-value into a regex.
    shown = select(entries, _loki_target("Verdict events").replace("$verdict", "(stuck|uncertain)"))
    agents = sorted(e.metadata["gen_ai_agent_name"] for e in shown)
    recorded["loki_panels"] = {"top_tools_in_loops": by_tool, "verdict_events_default": agents}
    assert agents == ["ops-bot", "research-bot", "support-bot", "support-bot"]
