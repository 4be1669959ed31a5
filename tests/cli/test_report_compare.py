"""``report --compare A B``: each figure's change with a 95 % interval; exactly the changed figures are flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.cli import main
from otel_loopguard.cli.compare import bootstrap_difference, newcombe, quantile, wilson
from tests.cli.test_report import CONFIG, LOOP, NORMAL, _Writer


def test_wilson_interval_of_two_in_ten() -> None:
    """2/10: centre (0.2 + 1.96²/20) / (1 + 1.96²/10) = 0.28326, half-width 0.22658 -> (0.0567, 0.5098)."""
    low, high = wilson(2, 10)
    assert (round(low, 4), round(high, 4)) == (0.0567, 0.5098)


def test_newcombe_interval_matches_the_published_example() -> None:
    """Newcombe (1998), 56/70 against 48/80, method 10: difference 0.2, interval 0.0524 to 0.3339."""
    d, low, high = newcombe(48, 80, 56, 70)
    assert (round(d, 4), round(low, 4), round(high, 4)) == (0.2, 0.0524, 0.3339)


def test_quantiles_interpolate_between_order_statistics() -> None:
    """1, 2, 3, 4: median at position 1.5 = 2.5, p90 at position 2.7 = 3.7; one value is every quantile; none is NaN."""
    assert (quantile([4, 1, 3, 2], 0.5), round(quantile([4, 1, 3, 2], 0.9), 9)) == (2.5, 3.7)
    assert quantile([7], 0.9) == 7
    assert quantile([], 0.5) != quantile([], 0.5)


def test_bootstrap_of_a_median_without_spread_is_exact() -> None:
    """Constant groups (3s against 5s): every resample's median differs by 2, so the interval is [2, 2]."""
    assert bootstrap_difference([3] * 9, [5] * 7, statistic=lambda xs: quantile(xs, 0.5)) == (2, 2, 2)


@pytest.fixture()
def versions(tmp_path: Path) -> tuple[str, str]:
    """Twenty healthy runs under prompt v1, twenty looping runs (one more tool call each) under v2, and prices."""
    writer = _Writer("1.0.0")
    for _ in range(20):
        writer.trace(NORMAL, "v1")
    for _ in range(20):
        writer.trace(LOOP, "v2")
    config = tmp_path / "prices.toml"
    config.write_text(CONFIG)
    return writer.write(tmp_path / "runs.json"), str(config)


def test_compare_flags_exactly_the_changed_figures(versions: tuple[str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """v1 -> v2: success goes from 20/20 to 0/20 and stop, stuck and nudged from 0/20 to 20/20 (Newcombe: 1,
    [0.7721, 1]); tool calls go from 3 to 4 in every run (median and p90: no spread, [+1, +1]) and loop verdicts
    from 0 to 100 per 100 tasks; errors, refusals, the tool error rate (0 of 60, 0 of 80), turns (1 model call
    each) and the cost do not change, and are not flagged."""
    path, config = versions
    assert main(["report", path, "--by", "app.prompt.version", "--config", config,
                 "--compare", "v1", "v2", "--json"]) == 0
    rows = {r["metric"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert {m for m, r in rows.items() if r["clear"]} == {
        "success share", "stop share", "stuck share", "nudged share", "tool calls median", "tool calls p90",
        "loop verdicts per 100 tasks"}
    success = rows["success share"]
    assert (success["a"], success["b"], success["difference"], success["low"], round(success["high"], 4)) == (
        1.0, 0.0, -1.0, -1.0, -0.7721)
    stuck = rows["stuck share"]
    assert (stuck["a"], stuck["b"], stuck["difference"], round(stuck["low"], 4), stuck["high"]) == (
        0.0, 1.0, 1.0, 0.7721, 1.0)
    calls = rows["tool calls median"]
    assert (calls["a"], calls["b"], calls["difference"], calls["low"], calls["high"]) == (3.0, 4.0, 1.0, 1.0, 1.0)
    loops = rows["loop verdicts per 100 tasks"]
    assert (loops["a"], loops["b"], loops["low"], loops["high"]) == (0.0, 100.0, 100.0, 100.0)
    assert rows["tool error rate"]["difference"] == 0.0 and rows["cost (USD) median"]["difference"] == 0.0
    assert len(rows) == 7 + 3 * 2 + 1


def test_compare_table_marks_clear_changes(versions: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The table has one row per figure; clear ones end with a star, and a legend says what it means."""
    path, config = versions
    assert main(["report", path, "--by", "app.prompt.version", "--config", config, "--compare", "v1", "v2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "v1", "v2", "B", "-", "A", "95%", "interval"]
    starred = [line.split("  ")[0] for line in lines[1:-1] if line.endswith("*")]
    assert starred == ["success share", "stop share", "stuck share", "nudged share", "tool calls median",
                       "tool calls p90", "loop verdicts per 100 tasks"]
    assert lines[-1] == "* the 95% interval excludes 0: a clear change"


def test_compare_with_an_unknown_value_is_a_one_line_error(versions: tuple[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A value no trace has: exit 2 and one line naming it and the values seen."""
    path, _ = versions
    assert main(["report", path, "--by", "app.prompt.version", "--compare", "v1", "v9"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["otel-loopguard: error: report --compare: no trace has app.prompt.version = v9 "
                   "(values seen: v1, v2)"]
