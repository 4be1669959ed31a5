"""The dashboard's row by kind of step: its panels split verdicts and interventions by ``loopguard_step_kind``, and
their queries give hand-derived values on synthetic series under a real ``promtool``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from ._support import DASHBOARD_FILE, require_binary, run_tool

DASHBOARD = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
ROW_TITLE = "By kind of step (tool calls, hand-offs, sub-agents, model turns)"


def _row_panels() -> list[dict[str, Any]]:
    """The panels under the step-kind row: those after it up to the next row."""
    panels = DASHBOARD["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == ROW_TITLE)
    out = []
    for panel in panels[start + 1:]:
        if panel["type"] == "row":
            break
        out.append(panel)
    return out


def _expr(title: str) -> str:
    """A panel's query with the dashboard variables set as the test series need (any job, any agent, 5m)."""
    [panel] = [p for p in _row_panels() if p["title"] == title]
    [target] = panel["targets"]
    return str(target["expr"]).replace("$__rate_interval", "5m").replace("$job", ".*").replace("$agent", ".*")


def test_the_row_splits_verdicts_and_interventions_by_step_kind() -> None:
    """The row holds three Prometheus panels, each grouping by loopguard_step_kind: stuck transitions, all
    transitions, and nudges and stops."""
    panels = _row_panels()
    assert [p["title"] for p in panels] == ["Transitions into stuck by step kind", "Verdict transitions by step kind",
                                            "Nudges and stops by step kind"]
    metrics = []
    for panel in panels:
        [target] = panel["targets"]
        assert panel["datasource"]["type"] == "prometheus"
        assert re.search(r"sum by \(loopguard_step_kind\b", target["expr"]), panel["title"]
        assert "{{loopguard_step_kind}}" in target["legendFormat"]
        metrics.append(re.findall(r"\b(loopguard_\w+_total)\b", target["expr"])[0])
    assert metrics == ["loopguard_verdicts_total", "loopguard_verdicts_total", "loopguard_interventions_total"]


def _series(kind: str, values: str, **labels: str) -> dict[str, str]:
    base = {"job": "app", "gen_ai_agent_name": "triage", "loopguard_step_kind": kind, **labels}
    selector = ", ".join(f'{k}="{v}"' for k, v in base.items())
    return {"series": f"loopguard_verdicts_total{{{selector}}}", "values": values}


def test_stuck_by_step_kind_counts_each_kind_under_promtool(tmp_path: Path) -> None:
    """Counters sampled every minute: hand-off stuck transitions growing by 1 a minute, a model-turn one counted once
    at 7m, tool calls never stuck; at 10m the 5-minute panel shows handoff 5, model 1, tool 0 (samples 5m..10m
    span the whole window, so increase() extrapolates nothing)."""
    promtool = require_binary("promtool")
    stuck = {"loopguard_verdict": "stuck", "loopguard_verdict_previous": "working", "loopguard_rule": "period"}
    series = [
        _series("handoff", "0+1x12", **stuck),
        _series("model", "0 0 0 0 0 0 0 1 1 1 1 1 1", **stuck),
        _series("tool", "0+0x12", **stuck),
        # A transition into working must not count as stuck.
        _series("handoff", "0+3x12", loopguard_verdict="working", loopguard_verdict_previous="stuck",
                loopguard_rule="recovered"),
    ]
    expected = [{"labels": f'{{loopguard_step_kind="{kind}"}}', "value": value}
                for kind, value in (("handoff", 5), ("model", 1), ("tool", 0))]
    (tmp_path / "empty.yaml").write_text("groups: []\n", encoding="utf-8")
    test = {"rule_files": ["empty.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{"expr": _expr("Transitions into stuck by step kind"), "eval_time": "10m",
                              "exp_samples": expected}]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test), encoding="utf-8")
    result = run_tool([promtool, "test", "rules", "test.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
