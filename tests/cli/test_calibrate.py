"""``otel-loopguard calibrate``: label sources, unlabelled traces, the written configuration, grids, output, picture."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli import main
from otel_loopguard.core.config import LoopGuardConfig
from tests.support.calibrate_runs import PRICES, RunWriter, distinct, same
from tests.support.external import require_module

# The runs of these tests (tests/support/calibrate_runs.py writes them through the SDK):
# LOOP: 2 different calls, then search(q=x) x5 with one result (calls 2..6): with the grid below, stuck after call 3
#   (r=2) or 4 (r=3), stopped one call later.
# POLL: 1 call, then status(job=1) "running" x3 and "done" (calls 1..4): r=2 stops it after call 3 (stuck after 2,
#   still stuck after 3); r=3 makes it stuck after call 3, and "done" at call 4 ends that: no stop.
LOOP = distinct(2) + same("search", {"q": "x"}, "nothing", 5)
POLL = distinct(1, "p") + same("status", {"job": 1}, "running", 3) + [("status", {"job": 1}, "done")]
PLAIN = distinct(5, "h")
GRID = ["--grid", "window=10", "--grid", "max_period=3", "--grid", "min_repetitions=2,3", "--grid", "frequency_limit=6",
        "--grid", "hysteresis=1"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    got = main(["calibrate", "--jobs", "1", *argv])
    out, err = capsys.readouterr()
    assert got == status, err
    return out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    out, _ = _run(capsys, "--json", *argv)
    doc: dict[str, Any] = json.loads(out)
    return doc


def _labels(doc: dict[str, Any]) -> tuple[int, int, int]:
    t = doc["traces"]
    return t["incidents"], t["healthy"], t["unlabelled"]


# -- label sources ---------------------------------------------------------------------------------------------


def test_label_attribute_on_a_span(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--label-attribute reads a span attribute (here on the root span); other values leave a trace unlabelled."""
    w = RunWriter()
    loop = w.run(LOOP, root_attributes={"app.run.label": "incident"})
    poll = w.run(POLL, root_attributes={"app.run.label": "healthy"})
    other = w.run(PLAIN, root_attributes={"app.run.label": "unknown"})
    none = w.run(PLAIN)
    path = w.write(tmp_path / "runs.json")
    doc = _json(capsys, path, "--label-attribute", "app.run.label", *GRID)
    assert _labels(doc) == (1, 1, 2)
    assert [i["trace_id"] for i in doc["incidents"]] == [loop]
    assert doc["recommendation"]["false_stuck_traces"] == [{"trace_id": poll, "source": path, "step": 3,
                                                            "rule": "period", "tool": "status"}]
    assert [t["trace_id"] for t in doc["unlabelled"]["traces"]] == [other, none]
    assert doc["labels"]["by_source"] == {"directory": 0, "attribute": 2, "manifest": 0}
    assert doc["labels"]["unlabelled_reasons"] == {"label attribute holds another value": 1, "no label": 1}


def test_label_attribute_on_the_resource_with_other_values(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A resource attribute labels every trace of its resource; values are configurable and case-insensitive."""
    bad, good = RunWriter({"run.kind": "LOOPING"}), RunWriter({"run.kind": "Fine"})
    bad.run(LOOP)
    bad.run(LOOP)
    good.run(POLL)
    paths = [bad.write(tmp_path / "a.jsonl"), good.write(tmp_path / "b.jsonl")]
    doc = _json(capsys, *paths, "--label-attribute", "run.kind", "--incident-value", "looping",
                "--healthy-value", "ok", "--healthy-value", "fine", *GRID)
    assert _labels(doc) == (2, 1, 0)
    # r=2 stops the poller (false stop), so r=3 is recommended; r=2 is the trade-off (one call sooner).
    assert doc["recommendation"]["settings"]["min_repetitions"] == 3
    assert doc["trade_off"]["settings"]["min_repetitions"] == 2
    assert doc["trade_off"]["false_stops"] == 1
    assert doc["tool_hints"] == [{"tool": "status", "rule": "period", "healthy_traces": 1}]


def test_manifest_csv_json_and_precedence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Manifests label by trace id (any case, with or without leading zeros) and name steps files by path or file
    name; the manifest wins over a directory, which is counted; entries matching no trace are counted."""
    w = RunWriter()
    loop, poll, plain = w.run(LOOP), w.run(POLL), w.run(PLAIN)
    path = w.write(tmp_path / "healthy" / "runs.json")  # all three read as healthy by directory
    steps = tmp_path / "loop-steps.json"
    steps.write_text(json.dumps([{"tool": "s", "args": {"q": 1}, "result": "r"}] * 4))
    csv_manifest = tmp_path / "labels.csv"
    csv_manifest.write_text(f"trace_id,label\n# the looping runs\n{loop.upper()},Incident\n"
                            f"{'0' * 31 + '1'},healthy\nloop-steps.json,incident\n\n")
    doc = _json(capsys, "--healthy", str(tmp_path / "healthy"), str(steps), "--manifest", str(csv_manifest), *GRID)
    assert _labels(doc) == (2, 2, 0)
    assert {i["trace_id"] or i["source"] for i in doc["incidents"]} == {loop, str(steps)}
    assert doc["labels"] == {"by_source": {"directory": 3, "attribute": 0, "manifest": 2}, "overridden": 1,
                             "unlabelled_reasons": {}, "manifest_entries_unmatched": 1}
    # The same with a JSON object, then a JSON list.
    for manifest in ({loop: "incident", poll: "healthy", plain: "healthy"},
                     [{"trace_id": loop, "label": "incident"}, {"trace_id": poll, "label": "healthy"}]):
        m = tmp_path / "labels.json"
        m.write_text(json.dumps(manifest))
        doc = _json(capsys, path, "--manifest", str(m), *GRID)
        assert _labels(doc) == (1, 2 if isinstance(manifest, dict) else 1, 0 if isinstance(manifest, dict) else 1)
        assert [i["trace_id"] for i in doc["incidents"]] == [loop]


def test_manifest_with_an_unknown_label_is_a_one_line_error(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest label that is neither an incident nor a healthy value names the file and the line."""
    w = RunWriter()
    w.run(LOOP)
    path = w.write(tmp_path / "runs.json")
    manifest = tmp_path / "labels.csv"
    manifest.write_text("0af7651916cd43dd8448eb211c80319c,incident\n0af7651916cd43dd8448eb211c80319d,incidnet\n")
    out, err = _run(capsys, path, "--manifest", str(manifest), status=2)
    assert out == ""
    assert err == (f"otel-loopguard: error: {manifest}:line 2: label 'incidnet' is not one of incident, healthy\n")


def test_conflicting_directories_and_no_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace read from both --incidents and --healthy is unlabelled (said why); no labelled trace is an error."""
    w = RunWriter()
    w.run(LOOP)
    path = w.write(tmp_path / "runs.json")
    _, err = _run(capsys, "--incidents", path, "--healthy", path, status=2)
    assert err == ("otel-loopguard: error: no labelled traces among the 1 read: label them with --incidents/--healthy, "
                   "--label-attribute or --manifest\n")
    w.run(POLL)
    path2 = w.write(tmp_path / "more.json")
    doc = _json(capsys, "--incidents", path, "--healthy", path, "--healthy", path2, *GRID)
    assert _labels(doc) == (0, 1, 1)
    assert doc["labels"]["unlabelled_reasons"] == {"read from both --incidents and --healthy": 1}


def test_unlabelled_traces_in_the_readable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unlabelled traces are reported apart, with how the recommendation judges them, and counted nowhere else."""
    inc, ok, unl = RunWriter(), RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(PLAIN)
    loop_id = unl.run(LOOP)
    unl.run(PLAIN)
    args = ["--incidents", inc.write(tmp_path / "i.json"), "--healthy", ok.write(tmp_path / "h.json"),
            str(tmp_path / "u.json")]
    unl.write(tmp_path / "u.json")
    out, _ = _run(capsys, *args, *GRID)
    assert "otel-loopguard calibrate: 1 incident(s) and 1 healthy trace(s), 12 tool calls" in out
    assert ("unlabelled: 2 trace(s) (2 no label), not counted above; under the recommendation 1 become stuck and "
            "1 are stopped:\n") in out
    assert f"    {tmp_path / 'u.json'} trace {loop_id}\n" in out


# -- the written configuration ---------------------------------------------------------------------------------


def test_written_toml_round_trips_and_audits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--write: the recommended values, the base file's other tables kept, its [calibrate] table (the grid, here
    with a per-tool axis) dropped; LoopGuardConfig.load reads it and audit judges with it."""
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(POLL)
    incidents, healthy = inc.write(tmp_path / "i.json"), ok.write(tmp_path / "h.json")
    base = tmp_path / "base.toml"
    base.write_text("max_steps = 50\nsignature_key = \"a-shared-secret-of-16+-bytes\"\n" + PRICES +
                    '[tools."fetch \\"page\\""]\nignore_args = ["trace_token"]\n'
                    "[calibrate]\nwindow = 10\nmax_period = [3]\nmin_repetitions = [2, 3]\nfrequency_limit = 6\n"
                    'hysteresis = [1]\n[calibrate.tools."status"]\nexempt = [false, true]\n')
    out_file = tmp_path / "calibrated.toml"
    doc = _json(capsys, "--incidents", incidents, "--healthy", healthy, "--config", str(base), "--write", str(out_file))
    # The grid came from the [calibrate] table: 2 x 2 settings. Exempting status makes the poller harmless, so
    # r=2 (sooner) with status exempt wins.
    assert doc["grid"] == {"window": [10], "max_period": [3], "min_repetitions": [2, 3], "frequency_limit": [6],
                           "hysteresis": [1], "tools.status.exempt": [False, True]}
    assert doc["recommendation"]["settings"] == {"window": 10, "max_period": 3, "min_repetitions": 2,
                                                 "frequency_limit": 6, "hysteresis": 1, "tools.status.exempt": True}
    assert doc["recommendation"]["false_stuck"] == 0
    assert doc["tool_hints"] == []  # no false positive left to blame on a tool
    assert doc["written"] == str(out_file)
    text = out_file.read_text()
    assert text.startswith("# Written by otel-loopguard calibrate")
    assert "\n[calibrate" not in text and "calibrate." not in text  # (the header comment names the table)
    loaded = LoopGuardConfig.load(str(out_file))
    assert (loaded.window, loaded.max_period, loaded.min_repetitions, loaded.frequency_limit, loaded.hysteresis,
            loaded.max_steps) == (10, 3, 2, 6, 1, 50)
    assert loaded.signature_key == b"a-shared-secret-of-16+-bytes"
    assert loaded.prices["model-a"].input == 1.0
    assert loaded.tools["status"].exempt is True
    assert loaded.tools['fetch "page"'].ignore_args == frozenset({"tracetoken"})
    # audit with the written file: the loop (search at 0-based steps 2..6) is stuck after step 3 with
    # min_repetitions 2; audit's JSON also numbers that call from 1 ("call": 3 + 1 = 4).
    capsys.readouterr()
    assert main(["audit", "--json", "--config", str(out_file), incidents]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["transitions"][0] == {"step": 3, "call": 4, "from": "working", "to": "stuck", "rule": "period",
                                       "period": 1}
    assert report["interventions"][1]["step"] == 4 and report["interventions"][1]["action"] == "stop"


def test_written_toml_without_a_base_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --config the file holds the swept settings alone, and loads."""
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(PLAIN)
    out_file = tmp_path / "c.toml"
    out, _ = _run(capsys, "--incidents", inc.write(tmp_path / "i.json"), "--healthy", ok.write(tmp_path / "h.json"),
                  *GRID, "--write", str(out_file))
    assert f"wrote the recommended configuration to {out_file}\n" in out
    lines = [line for line in out_file.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["window = 10", "max_period = 3", "min_repetitions = 2", "frequency_limit = 6", "hysteresis = 1"]
    assert LoopGuardConfig.load(str(out_file)).min_repetitions == 2


# -- grids -----------------------------------------------------------------------------------------------------


def test_default_grid_and_skipped_combinations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default grid: window 6,10,20 x max_period 2,3,4 x min_repetitions 2,3,4 x frequency_limit 3,4,6 x
    hysteresis 1,2 = 162 combinations; a window must hold max_period x min_repetitions calls: window 6 holds 3 of the
    9 pairs (2x2, 2x3, 3x2), window 10 holds 6 (not 3x4, 4x3, 4x4), window 20 all 9: (3 + 6 + 9) x 3 x 2 = 108."""
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(PLAIN)
    doc = _json(capsys, "--incidents", inc.write(tmp_path / "i.json"), "--healthy", ok.write(tmp_path / "h.json"))
    assert doc["grid"] == {"window": [6, 10, 20], "max_period": [2, 3, 4], "min_repetitions": [2, 3, 4],
                           "frequency_limit": [3, 4, 6], "hysteresis": [1, 2]}
    assert doc["settings_swept"] == 108 and len(doc["skipped_settings"]) == 54
    assert doc["skipped_settings"][0] == {
        "settings": {"window": 6, "max_period": 2, "min_repetitions": 4, "frequency_limit": 3, "hysteresis": 1},
        "reason": "window (6) must hold max_period * min_repetitions (2 * 4) calls"}


@pytest.mark.parametrize(("grid", "message"), [
    ("window", "--grid 'window': expected AXIS=V1,V2,... (e.g. window=6,10,20)"),
    ("windows=3", "grid axis 'windows': not a setting the grid sweeps (one of window, max_period, min_repetitions, "
                  "frequency_limit, hysteresis, stop_after, max_nudges, or tools.NAME.KEY)"),
    ("window=6,ten", "--grid window: values must be integers, got 'ten'"),
    ("hysteresis=0", "grid axis hysteresis: values must be positive integers, got 0"),
    ("tools.x.exempt=maybe", "--grid tools.x.exempt: values must be true or false, got 'maybe'"),
    ("tools.x.window=3", "grid axis 'tools.x.window': a per-tool axis is tools.NAME.KEY with KEY one of "
                         "min_repetitions, frequency_limit, exempt, wait_seconds, wait_until"),
    ("tools.x.wait_seconds=-5", "grid axis tools.x.wait_seconds: values must be non-negative integers (0: no wait), "
                                "got -5"),
    ("tools.x.wait_until=done,(", "grid axis tools.x.wait_until is not a valid regular expression: missing ), "
                                  "unterminated subpattern at position 0"),
])
def test_bad_grid_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], grid: str,
                                      message: str) -> None:
    out, err = _run(capsys, "--incidents", str(tmp_path), "--grid", grid, status=2)
    assert (out, err) == ("", f"otel-loopguard: error: {message}\n")


def test_grid_too_large_and_bad_calibrate_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inc = RunWriter()
    inc.run(LOOP)
    path = inc.write(tmp_path / "i.json")
    values = ",".join(str(v) for v in range(1, 101))
    _, err = _run(capsys, "--incidents", path, "--grid", f"stop_after={values}", "--grid", f"max_nudges={values}",
                  status=2)
    # 3 x 3 x 3 x 3 x 2 default combinations x 100 x 100
    assert err == "otel-loopguard: error: the grid has 1620000 combinations; at most 10000 are swept\n"
    bad = tmp_path / "bad.toml"
    bad.write_text("[calibrate]\nwindow = [6, true]\n")
    _, err = _run(capsys, "--incidents", path, "--config", str(bad), status=2)
    assert err == (f"otel-loopguard: error: {bad}: [calibrate]: grid axis window: values must be positive integers, "
                   "got True\n")


def test_unknown_tool_in_the_grid_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inc = RunWriter()
    inc.run(LOOP)
    _, err = _run(capsys, "--incidents", inc.write(tmp_path / "i.json"), *GRID, "--grid",
                  "tools.serach.frequency_limit=2,3")
    assert err == "otel-loopguard: warning: the grid names tool 'serach', which no trace calls\n"


# -- the readable output ---------------------------------------------------------------------------------------


def test_table_marks_the_recommendation_and_the_trade_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table (best first), the recommendation with its false stuck verdicts, and the trade-off's false stop."""
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    poll = ok.run(POLL)
    healthy = ok.write(tmp_path / "h.json")
    out, _ = _run(capsys, "--incidents", inc.write(tmp_path / "i.json"), "--healthy", healthy, *GRID)
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("rank"))
    assert lines[header].split() == ["rank", "window", "period", "reps", "freq", "hyst", "caught", "delay", "to",
                                     "stuck", "stopped", "delay", "to", "stop", "false", "stuck", "false", "stops"]
    # r=3: stuck after call 4 (delay 2 calls, 20 s), stopped after 5 (3 calls, 30 s); the poller stuck, not stopped.
    assert lines[header + 1].split() == ["1*", "10", "3", "3", "6", "1", "1", "100.0%", "2.0", "20.0s", "1", "100.0%",
                                         "3.0", "30.0s", "1", "100.0%", "0", "0.0%"]
    assert lines[header + 2].split() == ["2+", "10", "3", "2", "6", "1", "1", "100.0%", "1.0", "10.0s", "1", "100.0%",
                                         "2.0", "20.0s", "1", "100.0%", "1", "100.0%"]
    assert "recommended: window=10 max_period=3 min_repetitions=3 frequency_limit=6 hysteresis=1\n" in out
    assert f"    {healthy} trace {poll}: stuck after call 3 (status, rule period)\n" in out
    assert "trade-off (rank 2): window=10 max_period=3 min_repetitions=2 frequency_limit=6 hysteresis=1\n" in out
    assert "  catches them 1.0 calls sooner, at the price of 1 false stop(s):\n" in out
    assert f"    {healthy} trace {poll}: stopped after call 3 (status, rule period)\n" in out
    # The false positives repeat one tool: per-tool axes are suggested (exempt or a wait, for a poller caught by the
    # period). Its four status calls run from 12 s (call 1's start) to 45 s (call 4's end): 33 s, a minute's wait.
    assert ("hint: the false positives above repeat status (1 healthy trace, rule period); sweep per-tool settings "
            "for them too, e.g. --grid tools.status.exempt=false,true --grid tools.status.wait_seconds=0,60\n") in out


def test_table_shows_the_trade_off_below_the_top_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--top 1: the recommendation's row, a '...' row, then the trade-off's row (rank 2, marked '+'), with the same
    cells as in the full table of the test above."""
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(POLL)
    out, _ = _run(capsys, "--incidents", inc.write(tmp_path / "i.json"), "--healthy", ok.write(tmp_path / "h.json"),
                  *GRID, "--top", "1")
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("rank"))
    assert lines[header + 1].split()[:2] == ["1*", "10"]
    assert lines[header + 2].split() == ["..."]
    assert lines[header + 3].split() == ["2+", "10", "3", "2", "6", "1", "1", "100.0%", "1.0", "10.0s", "1", "100.0%",
                                         "2.0", "20.0s", "1", "100.0%", "1", "100.0%"]


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    out = capsys.readouterr().out
    for option in ("--incidents", "--healthy", "--label-attribute", "--manifest", "--grid", "--write", "--plot",
                   "--json", "--jobs", "--config", "tools.NAME.exempt"):
        assert option in out


# -- the picture -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plot_writes_a_picture(tmp_path: Path, capsys: pytest.CaptureFixture[str], ext: str) -> None:
    require_module("matplotlib", "'otel-loopguard[plot]'")  # in the test extra: CI must not skip this
    inc, ok = RunWriter(), RunWriter()
    inc.run(LOOP)
    ok.run(POLL)
    picture = tmp_path / f"c.{ext}"
    out, _ = _run(capsys, "--incidents", inc.write(tmp_path / "i.json"), "--healthy", ok.write(tmp_path / "h.json"),
                  *GRID, "--plot", str(picture))
    assert f"drew the picture in {picture}\n" in out
    data = picture.read_bytes()
    if ext == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    else:
        text = data.decode()
        assert "<svg" in text and "recommended" in text and "trade-off" in text


def test_plot_without_matplotlib_says_what_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the plot extra, --plot fails before the sweep with one line naming the extra."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like to import
    out, err = _run(capsys, "--incidents", str(tmp_path), "--plot", str(tmp_path / "c.png"), status=2)
    assert out == ""
    assert err == ("otel-loopguard: error: --plot needs matplotlib, which is not installed: "
                   "pip install 'otel-loopguard[plot]'\n")
    _, err = _run(capsys, "--incidents", str(tmp_path), "--plot", str(tmp_path / "c.pdf"), status=2)
    assert err == f"otel-loopguard: error: --plot {tmp_path / 'c.pdf'}: the file name must end in .png or .svg\n"
