"""``calibrate`` sweeps the polled-tool wait (``tools.NAME.wait_seconds``) beside ``exempt`` and recommends the wait
where it catches what exempting misses.

The runs (tests/support/calibrate_runs.py: call ``k`` starts at ``10k + 2`` s and ends at ``10k + 5`` s):
* incident: one other call, then ``get_job_status`` polled 11 times, always "running" (calls 1-11): a job that never
  ends;
* healthy: one other call, ``get_job_status`` "running" 6 times (calls 1-6), then "done" (call 7), two more calls.
Fixed: window 10, max_period 3, min_repetitions 3, frequency_limit 3, hysteresis 1, stop_after 1. By hand:
* no wait, not exempt: three identical polls (calls 1-3) are stuck after call 3 in both runs, and the healthy run is
  stopped after call 4: a false stop;
* exempt (with or without a wait): the poll is never judged, so the incident is missed;
* wait 60 s, not exempt: the wait runs from the first identical call's start (12 s) to 72 s. The healthy polls end
  at 15-65 s (waiting), then "done" ends the run of identical results: never stuck. The incident's call 7 ends at
  75 s, after the deadline: judged as usual, seven identical polls, stuck after call 7 (6 calls after the onset,
  call 1) and stopped after call 8.
So the only setting without a false stop that catches the incident is the wait: it is recommended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.cli import main
from otel_loopguard.core.calibrate import Grid, config_toml, parse_axis_text
from otel_loopguard.core.config import LoopGuardConfig
from tests.support.calibrate_runs import RunWriter, distinct, same

TOOL = "get_job_status"
GRID = ["--grid", "window=10", "--grid", "max_period=3", "--grid", "min_repetitions=3", "--grid", "frequency_limit=3",
        "--grid", "hysteresis=1", "--grid", f"tools.{TOOL}.exempt=false,true", "--grid", f"tools.{TOOL}.wait_seconds=0,60"]


def test_the_wait_is_recommended_where_exempting_misses_the_endless_poll(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of the four per-tool settings, exempt misses the endless poll, no wait stops the healthy poller, and the
    60 s wait catches the endless poll 6 calls after its onset with no false positive: recommended and written."""
    incident, healthy = RunWriter(), RunWriter()
    incident.run(distinct(1, "i") + same(TOOL, {"job": 7}, "running", 11))
    healthy.run(distinct(1, "h") + same(TOOL, {"job": 8}, "running", 6) + [(TOOL, {"job": 8}, "done")]
                + distinct(2, "g"))
    config = tmp_path / "loopguard.toml"
    capsys.readouterr()
    status = main(["calibrate", "--json", "--jobs", "1", "--incidents", incident.write(tmp_path / "i.json"),
                   "--healthy", healthy.write(tmp_path / "h.json"), *GRID, "--write", str(config)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    doc = json.loads(captured.out)
    by = {(s["settings"][f"tools.{TOOL}.exempt"], s["settings"][f"tools.{TOOL}.wait_seconds"]): s
          for s in doc["settings"]}
    assert {k: (s["caught"], s["false_stuck"], s["false_stops"]) for k, s in by.items()} == {
        (False, 0): (1, 1, 1), (False, 60): (1, 0, 0), (True, 0): (0, 0, 0), (True, 60): (0, 0, 0)}
    rec = doc["recommendation"]
    assert rec["settings"][f"tools.{TOOL}.wait_seconds"] == 60 and rec["settings"][f"tools.{TOOL}.exempt"] is False
    assert (rec["delay_to_stuck"]["calls_mean"], rec["delay_to_stop"]["calls_mean"]) == (6, 7)
    assert by[(False, 0)]["delay_to_stuck"]["calls_mean"] == 2  # stuck after call 3, onset call 1
    written = config.read_text(encoding="utf-8")
    assert f"[tools.{TOOL}]\nexempt = false\nwait_seconds = 60\n" in written


def test_no_wait_leaves_the_key_out_and_patterns_parse() -> None:
    """A wait axis takes 0 and "" for no wait (the setting then has none, and the written file leaves the key out,
    even over a base file's wait); wait_until values are patterns split at commas."""
    assert parse_axis_text(f"tools.{TOOL}.wait_seconds=0, 600") == (f"tools.{TOOL}.wait_seconds", (0, 600))
    assert parse_axis_text(f"tools.{TOOL}.wait_until=,done|failed") == (f"tools.{TOOL}.wait_until", ("", "done|failed"))
    grid = Grid([(f"tools.{TOOL}.wait_seconds", (0, 600)), (f"tools.{TOOL}.wait_until", ("", "done"))])
    settings, skipped = grid.settings(LoopGuardConfig())
    assert skipped == []
    assert [(s.config.tools[TOOL].wait_seconds, s.config.tools[TOOL].wait_until) for s in settings] == [
        (None, None), (None, "done"), (600, None), (600, "done")]
    base = {"tools": {TOOL: {"wait_seconds": 30, "exempt": True}}}
    assert config_toml(base, settings[0]) == f"[tools.{TOOL}]\nexempt = true\n"
    assert config_toml(base, settings[3]) == f'[tools.{TOOL}]\nwait_seconds = 600\nexempt = true\nwait_until = "done"\n'
