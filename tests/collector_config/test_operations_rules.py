"""The task-outcome rules (loopguard-operations.yaml): promtool runs for real, and every name is one the code emits."""

from __future__ import annotations

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
