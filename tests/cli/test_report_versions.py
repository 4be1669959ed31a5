"""``report --compare`` on two recorded versions of a real pydantic-ai agent flags exactly the figures that changed.

The files are recorded by ``tests/fixtures/generate/version_pair_runs.py`` (its docstring lists the forty tasks of
each version); the expected figures below are worked out from that task list, not from ``report``'s output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from otel_loopguard.cli import main
from tests.support.external import require_module

VERSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "otlp" / "versions"
#: $1 per million input tokens, $2 per million output tokens: 1000 in + 100 out = $0.0012 per model call.
PRICES = '[prices."scripted-model"]\ninput = 1.0\noutput = 2.0\n'


@pytest.fixture()
def prices(tmp_path: Path) -> str:
    """A configuration pricing the scripted model."""
    path = tmp_path / "prices.toml"
    path.write_text(PRICES)
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict]:
    capsys.readouterr()
    assert main(["report", str(VERSIONS), "--by", "service.version", *argv, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_figures_per_version(prices: str, capsys: pytest.CaptureFixture[str]) -> None:
    """1.0: 36 of 40 succeed, 2 errors, 2 refusals; turns 1,1,1,1 then 36 x 3 (median and p90 3), calls 2, cost
    3 x $0.0012. 1.1: 26 succeed, 10 loops stopped; turns 4 x 1, 26 x 4, 10 x 7 (median 4; p90 at position
    0.9 x 39 = 35.1, among the 7s), calls 4 x 0 or 1, 26 x 3, 10 x 6; one loop verdict per looping task."""
    v10, v11 = _run(capsys, "--config", prices)
    expected = {
        "1.0": (40, 0.9, 0.05, 0.05, 0.0, 3.0, 3.0, 2.0, 2.0, 0.0036, 0.0036, 0.0, round(1 / 37, 6)),
        "1.1": (40, 0.65, 0.05, 0.05, 0.25, 4.0, 7.0, 3.0, 6.0, 0.0048, 0.0084, 25.0, round(1 / 70, 6)),
    }
    for group in (v10, v11):
        assert (group["traces"], group["success_share"], group["error_share"], group["refused_share"],
                group["stopped_share"], group["turns_median"], group["turns_p90"], group["tool_calls_median"],
                group["tool_calls_p90"], group["cost_median_usd"], group["cost_p90_usd"],
                group["loop_verdicts_per_100"], group["error_rate"]) == expected[group["group"]]


def test_compare_flags_exactly_the_changed_figures(prices: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Errors (2 of 40 in both), refusals (2 of 40 in both) and the tool error rate (1/37 against 1/70, one failed
    read in 37 and 70 calls) are not flagged; every other figure changed and is. The success share falls 0.25
    with Newcombe's interval from Wilson(36/40) = [0.7695, 0.9604] and Wilson(26/40) = [0.4951, 0.7787]:
    -0.25 - hypot(0.65 - 0.4951, 0.9604 - 0.9) = -0.4163 to -0.25 + hypot(0.7787 - 0.65, 0.9 - 0.7695) = -0.0667."""
    rows = {r["metric"]: r for r in _run(capsys, "--config", prices, "--compare", "1.0", "1.1")}
    assert {m for m, r in rows.items() if not r["clear"]} == {"error share", "refusal share", "tool error rate"}
    assert len(rows) == 14
    success = rows["success share"]
    assert (success["a"], success["b"], success["difference"], round(success["low"], 4),
            round(success["high"], 4)) == (0.9, 0.65, -0.25, -0.4163, -0.0667)
    stop = rows["stop share"]
    assert (stop["a"], stop["b"], round(stop["low"], 4), round(stop["high"], 4)) == (0.0, 0.25, 0.1108, 0.4019)
    turns = rows["turns median"]
    assert (turns["a"], turns["b"], turns["difference"], turns["low"], turns["high"]) == (3.0, 4.0, 1.0, 1.0, 1.0)
    assert (rows["cost (USD) p90"]["a"], rows["cost (USD) p90"]["b"]) == (0.0036, 0.0084)


def test_compare_without_prices_has_no_cost_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """Without prices the cost rows are left out: 7 shares and 5 figures per task remain (turns and tool calls
    median and p90, loop verdicts)."""
    rows = _run(capsys, "--compare", "1.0", "1.1")
    assert len(rows) == 12 and not any(r["metric"].startswith("cost") for r in rows)


def test_compare_plot_draws_every_figure(prices: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compare --plot writes an SVG naming both versions and every figure of the comparison (text stays text)."""
    require_module("matplotlib", "'otel-loopguard[plot]'")  # in the test extra: CI must not skip this
    picture = tmp_path / "changes.svg"
    rows = _run(capsys, "--config", prices, "--compare", "1.0", "1.1", "--plot", str(picture))
    text = picture.read_text()
    assert "1.0 -&gt; 1.1" in text
    assert all(r["metric"] in text for r in rows)


def test_group_plot_is_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --compare, --plot draws the groups' outcome shares and figures per task as a PNG."""
    require_module("matplotlib", "'otel-loopguard[plot]'")
    picture = tmp_path / "groups.png"
    assert len(_run(capsys, "--plot", str(picture))) == 2
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_without_matplotlib_says_what_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the plot extra, report --plot fails before reading with one line naming the extra."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like to import
    assert main(["report", str(VERSIONS), "--plot", str(tmp_path / "r.png")]) == 2
    assert capsys.readouterr().err == ("otel-loopguard: error: --plot needs matplotlib, which is not installed: "
                                       "pip install 'otel-loopguard[plot]'\n")
