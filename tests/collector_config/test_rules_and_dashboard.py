"""Prometheus rules and the Grafana dashboard: promtool runs for real, and every name maps to what the code emits."""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from ._support import (
    DASHBOARD_FILE,
    RULES_FILE,
    RULES_TEST_FILE,
    all_emitted_labels,
    emitted_series,
    load_yaml,
    names_values,
    prom_label,
    promql_names,
    require_binary,
    run_tool,
)

RULES = load_yaml(RULES_FILE)
OPERATIONS_RULES = load_yaml(RULES_FILE.parent / "loopguard-operations.yaml")
DASHBOARD = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
RECORDED = {rule["record"] for group in RULES["groups"] for rule in group["rules"] if "record" in rule}
ALERTS = {rule["alert"]: rule for group in RULES["groups"] for rule in group["rules"] if "alert" in rule}

# Grafana's last schema version of the v1 dashboard API is 42 (grafana apps/dashboard/pkg/migration/schemaversion).
GRAFANA_SCHEMA_RANGE = range(39, 43)
# Loki fields that come from the OTLP envelope rather than from our attributes.
LOKI_ENVELOPE_FIELDS = frozenset({"service_name", "trace_id", "span_id", "Time", "severity_text"})


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _prometheus_exprs() -> list[str]:
    return [t["expr"] for p in _panels(DASHBOARD) for t in p.get("targets", []) if p["datasource"]["type"] == "prometheus"] + [
        v["definition"] for v in DASHBOARD["templating"]["list"] if v["type"] == "query"
    ]


def _loki_exprs() -> list[str]:
    return [t["expr"] for p in _panels(DASHBOARD) for t in p.get("targets", []) if p["datasource"]["type"] == "loki"]


def _check_names(expr: str, allowed_metrics: dict[str, frozenset[str]]) -> None:
    found = promql_names(expr)
    assert found.metrics, f"no metric found in {expr!r}"
    assert found.metrics <= set(allowed_metrics), (expr, found.metrics - set(allowed_metrics))
    any_label = all_emitted_labels()
    assert found.grouping_labels <= any_label, (expr, found.grouping_labels - any_label)
    for metric, labels in found.selector_labels:
        allowed = allowed_metrics.get(metric, any_label) if metric else any_label
        assert labels <= allowed, (expr, metric, labels - allowed)


_run = run_tool


# --- rules ----------------------------------------------------------------------------------------------------

def test_promtool_check_rules_accepts_the_rules_file() -> None:
    """`promtool check rules` parses every expression of the real rules file."""
    result = _run([require_binary("promtool"), "check", "rules", str(RULES_FILE)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RECORDED) + len(ALERTS)} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    """`promtool test rules` runs the firing and not-firing cases for every alert."""
    result = _run([require_binary("promtool"), "test", "rules", RULES_TEST_FILE.name], cwd=RULES_TEST_FILE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_cover_every_alert_firing_and_not_firing() -> None:
    """Each alert appears in the unit tests at least once with alerts expected and once with none."""
    tests = load_yaml(RULES_TEST_FILE)["tests"]
    firing: set[str] = set()
    silent: set[str] = set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert firing == set(ALERTS) and silent == set(ALERTS)


def test_every_rule_uses_only_emitted_metrics_and_labels() -> None:
    """Metric and label names in rule expressions translate back to names the code emits (or our own records)."""
    allowed = {**emitted_series(), **{name: all_emitted_labels() for name in RECORDED}}
    for group in RULES["groups"]:
        for rule in group["rules"]:
            _check_names(rule["expr"], allowed)


def test_alerts_have_severity_and_summary_description_runbook() -> None:
    """Alert metadata: a severity label and the three annotations, templating only labels that exist."""
    labels = all_emitted_labels()
    for name, rule in ALERTS.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}, name
        used = {m for text in rule["annotations"].values() for m in re.findall(r"\$labels\.(\w+)", text)}
        assert used <= labels, (name, used - labels)


def test_stuck_alert_is_transition_based_and_evidence_alert_is_info() -> None:
    """The stuck alert counts entries into `stuck`; `uncertain` via the evidence rule is severity info."""
    stuck = ALERTS["LoopGuardAgentStuck"]["expr"]
    assert 'loopguard_verdict="stuck"' in stuck and "loopguard:verdict_transitions:increase5m" in stuck
    transitions = next(r["expr"] for g in RULES["groups"] for r in g["rules"]
                       if r.get("record") == "loopguard:verdict_transitions:increase5m")
    assert "increase(loopguard_verdicts_total[5m])" in transitions
    evidence = ALERTS["LoopGuardEvidenceMissing"]
    assert 'loopguard_rule="evidence"' in evidence["expr"] and evidence["labels"]["severity"] == "info"
    for name in ("LoopGuardLoopStopsJump", "LoopGuardCostPerTraceJump", "LoopGuardToolCallsPerTraceJump"):
        assert "offset 1d" in ALERTS[name]["expr"], name


# --- dashboard -----------------------------------------------------------------------------------------------

def test_dashboard_is_importable_json_with_datasource_variables() -> None:
    """Current schemaVersion, unique panel ids, datasources only through ${DS_PROMETHEUS} / ${DS_LOKI}."""
    assert DASHBOARD["schemaVersion"] in GRAFANA_SCHEMA_RANGE
    assert DASHBOARD["uid"] and DASHBOARD["title"]
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["DS_LOKI"]["type"] == "datasource" and variables["DS_LOKI"]["query"] == "loki"
    panels = _panels(DASHBOARD)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] in {"${DS_PROMETHEUS}", "${DS_LOKI}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]


def test_dashboard_covers_the_required_views() -> None:
    """Transitions, current states, interventions, top tools, per-trace quantiles, delay, errors and a logs panel."""
    prom = "\n".join(_prometheus_exprs())
    for needle in ("loopguard_verdicts_total", "loopguard_traces_active", "loopguard_interventions_total",
                   "loopguard_tool_calls_total", "loopguard_trace_steps_bucket", "loopguard_trace_cost_USD_bucket",
                   "loopguard_detection_delay_bucket", "loopguard_processor_errors_total",
                   "loopguard_traces_evicted_total", "gen_ai_invoke_agent_tool_calls_bucket"):
        assert needle in prom, needle
    assert prom.count("histogram_quantile(") >= 4
    assert "logs" in {p["type"] for p in _panels(DASHBOARD)}


def _recorded_operations_series() -> dict[str, frozenset[str]]:
    """The operations rules' recorded series, each with the labels its rule groups by (plus ``job``)."""
    return {rule["record"]: frozenset(promql_names(rule["expr"]).grouping_labels) | {"job"}
            for group in OPERATIONS_RULES["groups"] for rule in group["rules"] if "record" in rule}


def test_dashboard_prometheus_queries_use_only_emitted_names() -> None:
    """Every PromQL metric and label in panels and variables is one the code emits, or a series the shipped
    operations rules record (with the labels they keep)."""
    allowed = {**emitted_series(), **_recorded_operations_series()}
    for expr in _prometheus_exprs():
        variable = re.match(r"label_values\((.*),\s*(\w+)\)$", expr)
        if variable:
            expr, label = variable.groups()
            assert label in all_emitted_labels(), label
        _check_names(expr, allowed)


def test_dashboard_prometheus_queries_parse(tmp_path: Path) -> None:
    """Every panel/variable PromQL expression parses: each becomes a recording rule checked by promtool."""
    promtool = require_binary("promtool")
    exprs = []
    for expr in _prometheus_exprs():
        if expr.startswith("label_values("):
            expr = re.match(r"label_values\((.*),\s*\w+\)$", expr).group(1)  # the selector inside
        expr = expr.replace("$__rate_interval", "5m").replace("$__range", "1h")
        exprs.append(re.sub(r"\$\w+", ".*", expr))
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = _run([promtool, "check", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_dashboard_loki_fields_are_attribute_names() -> None:
    """LogQL filters and table columns use our attribute names as Loki stores them (dots to underscores)."""
    allowed = {prom_label(v) for v in names_values()} | LOKI_ENVELOPE_FIELDS
    fields: set[str] = set()
    for expr in _loki_exprs():
        pipeline = expr.split("}", 1)[1]
        fields.update(re.findall(r"\b([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", pipeline))
        fields.update(promql_names(expr).grouping_labels)
    for panel in _panels(DASHBOARD):
        for transform in panel.get("transformations", []):
            fields.update(transform["options"].get("includeByName", {}))
    assert {"loopguard_verdict", "gen_ai_tool_name", "trace_id"} <= fields
    assert fields <= allowed, fields - allowed


def trace_links() -> dict[str, str]:
    """The events table's trace_id links by title: their URL templates."""
    return {link["title"]: link["url"] for p in _panels(DASHBOARD)
            for o in p.get("fieldConfig", {}).get("overrides", []) if o["matcher"]["options"] == "trace_id"
            for prop in o["properties"] if prop["id"] == "links" for link in prop["value"]}


def explore_query(url: str, value: str) -> tuple[str, dict]:
    """The datasource and the one query of an Explore link template with ``${__value.raw}`` set to ``value``."""
    panes = json.loads(urllib.parse.parse_qs(urllib.parse.urlsplit(url.replace("${__value.raw}", value)).query)[
        "panes"][0])
    [query] = panes["lg"]["queries"]
    return panes["lg"]["datasource"], query


def test_trace_id_links_query_tempo_and_jaeger_as_each_expects() -> None:
    """Tempo's link asks a TraceQL query of the trace id; Jaeger's sets no query type (its trace-id lookup)."""
    links = trace_links()
    assert set(links) == {"Open trace in Tempo", "Open trace in Jaeger"}
    assert {v["name"]: v["query"] for v in DASHBOARD["templating"]["list"] if v["type"] == "datasource"} == {
        "DS_PROMETHEUS": "prometheus", "DS_LOKI": "loki", "DS_TEMPO": "tempo", "DS_JAEGER": "jaeger"}
    assert explore_query(links["Open trace in Tempo"], "ab12") == ("${DS_TEMPO}", {
        "refId": "A", "datasource": {"type": "tempo", "uid": "${DS_TEMPO}"}, "queryType": "traceql", "query": "ab12"})
    assert explore_query(links["Open trace in Jaeger"], "ab12") == ("${DS_JAEGER}", {
        "refId": "A", "datasource": {"type": "jaeger", "uid": "${DS_JAEGER}"}, "query": "ab12"})
    provisioning = load_yaml(DASHBOARD_FILE.parent / "loki-datasource.yaml")
    derived = provisioning["datasources"][0]["jsonData"]["derivedFields"][0]
    assert derived["matcherType"] == "label" and derived["matcherRegex"] == "trace_id"


@pytest.mark.parametrize("panel_title", ["Verdict transitions by verdict", "Traces currently in each state"])
def test_named_panels_group_by_verdict(panel_title: str) -> None:
    """The verdict panels split by the loopguard_verdict label."""
    panel = next(p for p in _panels(DASHBOARD) if p["title"] == panel_title)
    assert "by (loopguard_verdict)" in panel["targets"][0]["expr"]
