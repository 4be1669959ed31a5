"""The task-outcome rules (loopguard-operations.yaml): promtool runs for real, and every name is one the code emits."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from otel_loopguard.conventions import names as n

from ._support import (
    CONFIG_DIR,
    GENERIC_LABELS,
    Instrument,
    load_yaml,
    prom_label,
    prom_series_names,
    promql_names,
    require_binary,
    run_tool,
)

OPERATIONS_FILE = CONFIG_DIR / "prometheus" / "loopguard-operations.yaml"
OPERATIONS_TEST_FILE = CONFIG_DIR / "prometheus" / "loopguard-operations.test.yaml"
RULES = load_yaml(OPERATIONS_FILE)
RECORDED = {rule["record"] for group in RULES["groups"] for rule in group["rules"] if "record" in rule}
ALERTS = {rule["alert"]: rule for group in RULES["groups"] for rule in group["rules"] if "alert" in rule}
TASK_LABELS = (n.LOOPGUARD_OUTCOME, n.GEN_AI_AGENT_NAME, *n.VERSION_ATTRIBUTES.values())
#: The task instruments as the code makes them (sdk/emit.py), for their Prometheus names.
TASK_INSTRUMENTS = (
    Instrument(n.METRIC_TASK_OUTCOMES, n.UNIT_TASK, "counter", TASK_LABELS),
    Instrument(n.METRIC_TASK_TURNS, n.UNIT_TURN, "histogram", TASK_LABELS),
    Instrument(n.METRIC_TASK_TOOL_CALLS, n.UNIT_TOOL_CALL, "histogram", TASK_LABELS),
    Instrument(n.METRIC_TASK_COST, n.UNIT_USD, "histogram", TASK_LABELS),
)
def test_promtool_check_rules_accepts_the_operations_file() -> None:
    """`promtool check rules` parses all 16 rules (10 recorded figures, 6 alerts)."""
    result = run_tool([require_binary("promtool"), "check", "rules", str(OPERATIONS_FILE)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 16 rules found" in result.stdout
    assert (len(RECORDED), len(ALERTS)) == (10, 6)


def test_promtool_unit_tests_pass() -> None:
    """`promtool test rules` runs the firing and not-firing cases of every operations alert."""
    result = run_tool([require_binary("promtool"), "test", "rules", OPERATIONS_TEST_FILE.name],
                  cwd=OPERATIONS_TEST_FILE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    """Each of the six alerts appears with alerts expected and with none."""
    firing: set[str] = set()
    silent: set[str] = set()
    for case in load_yaml(OPERATIONS_TEST_FILE)["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert firing == silent == set(ALERTS) == {
        "LoopGuardTaskSuccessDropped", "LoopGuardTaskErrorsRising", "LoopGuardTaskRefusalsRising",
        "LoopGuardLoopStopsRising", "LoopGuardTaskTurnsRising", "LoopGuardTaskCostRising"}


def test_every_alert_compares_with_yesterday_and_the_seven_day_baseline() -> None:
    """Each alert reads a one-day-earlier figure and a 7-day one, and needs 20 tasks in the hour."""
    for name, rule in ALERTS.items():
        assert "_offset1d" in rule["expr"] and "7d_offset1d" in rule["expr"], name
        assert "loopguard:tasks:increase1h >= 20" in rule["expr"], name


def test_rules_use_only_emitted_series_and_labels() -> None:
    """Metric and label names in the rules translate back to the task instruments' names (or recorded rules)."""
    series = {name for inst in TASK_INSTRUMENTS for name in prom_series_names(inst)}
    labels = frozenset(prom_label(a) for a in TASK_LABELS) | GENERIC_LABELS
    assert {"loopguard_task_outcomes_total", "loopguard_task_cost_USD_sum", "loopguard_task_turns_count"} <= series
    for group in RULES["groups"]:
        for rule in group["rules"]:
            found = promql_names(rule["expr"])
            assert found.metrics <= series | RECORDED, (rule["expr"], found.metrics - series - RECORDED)
            assert found.grouping_labels <= labels, (rule["expr"], found.grouping_labels - labels)
            for _, used in found.selector_labels:
                assert used <= labels, (rule["expr"], used - labels)


# --- the dashboard's task-outcome row ----------------------------------------------------------------------------

#: The row's panels and, for agent "planner" of the promtool cases at 196h, each target's value by hand (see the
#: header of loopguard-operations.test.yaml): the last hour has the changed rate (shares .40/.20/.20/.20, 10 turns,
#: $0.30 a task), the same hour yesterday and the 7 days before that day the baseline (.88/.04/.04/.04, 5, $0.10).
ROW_PANELS = {
    "Task success share": (0.4, 0.88, 0.88),
    "Task error share": (0.2, 0.04, 0.04),
    "Task refusal share": (0.2, 0.04, 0.04),
    "Task stop share (loop, step and cost stops)": (0.2, 0.04, 0.04),
    "Turns per task (mean)": (10, 5, 5),
    "Cost per task (mean)": (0.3, 0.1, 0.1),
}


def _row_targets() -> list[tuple[str, str, str]]:
    dashboard = load_yaml(CONFIG_DIR / "grafana" / "loopguard.json")
    return [(p["title"], t["refId"], t["expr"]) for p in dashboard["panels"] if p["title"] in ROW_PANELS
            for t in p["targets"]]


def test_task_outcome_panels_show_now_yesterday_and_baseline(tmp_path: Path) -> None:
    """Each panel of the row, its variables set to job "agents" and agent "planner", evaluated by promtool over the
    alert cases' series at 196h, gives the hand-derived last hour, same hour yesterday and 7-day baseline."""
    targets = _row_targets()
    assert {(title, ref) for title, ref, _ in targets} == {(t, r) for t in ROW_PANELS for r in "ABC"}
    cases = load_yaml(OPERATIONS_TEST_FILE)
    checks = []
    for title, ref, expr in targets:
        expr = expr.replace("$job", "agents").replace("$agent", "planner")
        name = expr.split("{")[0]
        labels = ", ".join(['job="agents"', 'gen_ai_agent_name="planner"',
                            *re.findall(r'loopguard_outcome="\w+"', expr)])
        checks.append({"expr": expr, "eval_time": "196h", "exp_samples": [
            {"labels": f"{name}{{{labels}}}", "value": ROW_PANELS[title]["ABC".index(ref)]}]})
    suite = {"rule_files": [str(OPERATIONS_FILE)], "evaluation_interval": "1h", "tests": [
        {"interval": cases["tests"][0]["interval"], "input_series": cases["tests"][0]["input_series"],
         "promql_expr_test": checks}]}
    path = tmp_path / "panels.test.yaml"
    path.write_text(yaml.safe_dump(suite), encoding="utf-8")
    result = run_tool([require_binary("promtool"), "test", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(checks) == 18
