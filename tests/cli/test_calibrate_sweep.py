"""``otel-loopguard calibrate``: the sweep's numbers, derived by hand, and its recommendation against a brute force.

The delays follow the definitions of ``otel_loopguard.core.calibrate`` (and the README): the loop's onset is the
first call of the first cycle a stuck verdict reports (the earliest over the grid); a delay after call ``k`` is
``k - onset`` calls, the seconds from the end of the onset call to the end of call ``k``, and the model usage
between them.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import shutil
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli import main
from otel_loopguard.cli.audit import AuditOptions, audit_paths
from otel_loopguard.core.config import LoopGuardConfig
from tests.support.calibrate_runs import CHAT_USD, PRICES, RunWriter, distinct, same
from tests.support.recorded_fixtures import FIXTURES, SCENARIO_EXACT_SOURCES

REPO = Path(__file__).resolve().parents[2]


def _calibrate(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    status = main(["calibrate", "--json", "--jobs", "1", *argv])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    doc: dict[str, Any] = json.loads(captured.out)
    return doc


def _by_settings(doc: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(s["settings"].values()): s for s in doc["settings"]}


# -- recorded framework fixtures -------------------------------------------------------------------------------


def test_recorded_fixtures_delays_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The judged sources' same_call_loop and ping_pong runs as incidents, healthy and pagination as healthy.

    tests/fixtures/README.md: same_call_loop is search(query="weather in Paris") x5 with one result; ping_pong is
    search(x), read(d1) x3 cycles with the same results (6 calls). Both loops start at call 0 (the onset). With
    frequency_limit 6 the frequency rule never fires on them (no call appears 6 times), so the period rule decides:
    * same_call_loop: min_repetitions r identical calls -> stuck after call r-1 (delay r-1), stop after the next
      call (stop_after 1) if the run has one (5 calls: indices 0..4);
    * ping_pong: r cycles of 2 -> the periodic suffix holds r cycles after call 2r-1 (delay 2r-1); the stop needs
      call 2r, which exists only for r=2 (calls 0..5).
    r=2: delays 1 and 3 (mean 2), stops after calls 2 and 4 (mean 3), 14/14 caught and stopped;
    r=3: delays 2 and 5 (mean 3.5), stops only for same_call_loop, after call 3: 7 stopped, mean 3;
    r=4: same_call_loop after call 3 (delay 3), stop after call 4 (delay 4); ping_pong would need call 7: missed.
    healthy (four different calls) and pagination (fetch_page with four cursors) never repeat a call.
    """
    incidents = [FIXTURES / f"{s}__{sc}.json" for s in SCENARIO_EXACT_SOURCES for sc in ("same_call_loop", "ping_pong")]
    healthy = [FIXTURES / f"{s}__{sc}.json" for s in SCENARIO_EXACT_SOURCES for sc in ("healthy", "pagination")]
    labelled = [a for p in incidents for a in ("--incidents", str(p))] + [a for p in healthy for a in ("--healthy", str(p))]
    doc = _calibrate(capsys, *labelled,
                     "--grid", "window=12", "--grid", "max_period=3", "--grid", "min_repetitions=2,3,4",
                     "--grid", "frequency_limit=6", "--grid", "hysteresis=1")
    n = len(SCENARIO_EXACT_SOURCES)
    assert doc["traces"] == {"incidents": 2 * n, "healthy": 2 * n, "unlabelled": 0}
    assert all(i["onset"] == 0 for i in doc["incidents"])
    rows = _by_settings(doc)
    expected = {  # r: (caught, mean delay to stuck, longest, stopped, mean delay to stop)
        2: (2 * n, 2.0, 3, 2 * n, 3.0),
        3: (2 * n, 3.5, 5, n, 3.0),
        4: (n, 3.0, 3, n, 4.0),
    }
    for r, (caught, mean, longest, stopped, stop_mean) in expected.items():
        row = rows[(12, 3, r, 6, 1)]
        assert (row["caught"], row["stopped"]) == (caught, stopped), r
        assert row["delay_to_stuck"]["calls_mean"] == mean and row["delay_to_stuck"]["calls_max"] == longest, r
        assert row["delay_to_stop"]["calls_mean"] == stop_mean, r
        assert (row["false_stuck"], row["false_stops"], row["budget_stops"]) == (0, 0, 0), r
    assert [s["settings"]["min_repetitions"] for s in doc["settings"]] == [2, 3, 4]
    assert doc["recommendation"]["settings"] == {"window": 12, "max_period": 3, "min_repetitions": 2,
                                                 "frequency_limit": 6, "hysteresis": 1}
    assert doc["trade_off"] is None  # nothing catches more or sooner


# -- generated runs with known delays, seconds and dollars -----------------------------------------------------


@pytest.fixture()
def runs(tmp_path: Path) -> dict[str, str]:
    """An incident, a healthy run that polls, an unlabelled loop, and a prices file.

    incident: 3 different calls, then search(q=x) x6 with one result (calls 3..8): the loop's onset is call 3.
    healthy: 2 different calls, then status(job=1) "running" x3 and "done" (calls 2..5).
    unlabelled: lookup(id=7) x4 with one result.
    """
    inc, ok, unl = RunWriter(), RunWriter(), RunWriter()
    inc.run(distinct(3) + same("search", {"q": "x"}, "nothing", 6))
    ok.run(distinct(2, "h") + same("status", {"job": 1}, "running", 3) + [("status", {"job": 1}, "done")])
    unl.run(same("lookup", {"id": 7}, "unknown", 4))
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    return {"incidents": inc.write(tmp_path / "inc" / "a.json"), "healthy": ok.write(tmp_path / "ok" / "b.jsonl"),
            "unlabelled": unl.write(tmp_path / "c.json"), "config": str(prices),
            "incident_id": inc.trace_ids[0], "healthy_id": ok.trace_ids[0], "unlabelled_id": unl.trace_ids[0]}


GRID_RH = ["--grid", "window=12", "--grid", "max_period=3", "--grid", "min_repetitions=2,3",
           "--grid", "frequency_limit=6", "--grid", "hysteresis=1,2"]


def test_generated_runs_delays_seconds_dollars_by_hand(runs: dict[str, str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Every setting's numbers for the incident and the healthy poller, derived by hand.

    Call k ends at t + 10k + 5 s and one chat ($0.0012) precedes each call (tests/support/calibrate_runs.py), so a
    delay of d calls is 10d seconds and d chats ($0.0012 d). The root ends at t + 86 s (9 calls).
    incident (search at calls 3..8, onset 3), frequency_limit 6 never fires before the period rule:
    * r=2 h=1: stuck after call 4 (2 identical), stop after 5 -> delays 1 and 2;
    * r=2 h=2 and r=3 h=1: stuck after call 5, stop after 6 -> delays 2 and 3;
    * r=3 h=2: stuck after call 6, stop after 7 -> delays 3 and 4.
    A stop after call k saves the calls after it (8 - k), t+86 - (t+10k+5) seconds and the chats of calls k+1..8.
    healthy (status "running" at calls 2, 3, 4, then "done" at 5):
    * r=2 h=1: stuck after call 3, still stuck after 4 -> a false stop after call 4;
    * r=2 h=2: stuck after call 4 (second evaluation of the cycle), "done" at 5 ends it: no stop;
    * r=3 h=1: stuck after call 4, no stop; r=3 h=2: call 5 ends the cycle first: never stuck.
    Ranking: (2,1) has a false stop, so last; (2,2) and (3,1) tie on everything else (1 caught, delay 2, one
    false stuck verdict, 1 stopped, stop delay 3) and (2,2) comes first in the grid; then (3,2).
    """
    doc = _calibrate(capsys, "--incidents", str(Path(runs["incidents"]).parent), "--healthy",
                     str(Path(runs["healthy"]).parent), runs["unlabelled"], "--config", runs["config"], *GRID_RH)
    assert doc["incidents"] == [{"trace_id": runs["incident_id"], "source": runs["incidents"], "calls": 9, "onset": 3}]
    order = [(s["settings"]["min_repetitions"], s["settings"]["hysteresis"]) for s in doc["settings"]]
    assert order == [(2, 2), (3, 1), (3, 2), (2, 1)]
    rows = {(s["settings"]["min_repetitions"], s["settings"]["hysteresis"]): s for s in doc["settings"]}
    for (r, h), (stuck_at, stop_at, false_stuck_at, false_stop_at) in {
        (2, 1): (4, 5, 3, 4), (2, 2): (5, 6, 4, None), (3, 1): (5, 6, 4, None), (3, 2): (6, 7, None, None),
    }.items():
        row = rows[(r, h)]
        d, s = stuck_at - 3, stop_at - 3
        assert row["delay_to_stuck"] == {"calls_mean": d, "calls_median": d, "calls_max": d,
                                         "seconds_mean": pytest.approx(10 * d, abs=1e-5),
                                         "usd_mean": pytest.approx(CHAT_USD * d), "usd_total": pytest.approx(CHAT_USD * d)}
        assert row["delay_to_stop"]["calls_mean"] == s
        assert row["delay_to_stop"]["seconds_mean"] == pytest.approx(10 * s, abs=1e-5)
        assert row["delay_to_stop"]["usd_mean"] == pytest.approx(CHAT_USD * s)
        assert row["saved_by_stops"] == {"calls": 8 - stop_at, "seconds": pytest.approx(86 - (10 * stop_at + 5), abs=1e-5),
                                         "usd": pytest.approx(CHAT_USD * (8 - stop_at))}
        stuck_traces = [(t["trace_id"], t["step"], t["rule"], t["tool"]) for t in row["false_stuck_traces"]]
        assert stuck_traces == ([] if false_stuck_at is None else [(runs["healthy_id"], false_stuck_at, "period",
                                                                     "status")])
        stop_traces = [(t["trace_id"], t["source"], t["step"]) for t in row["false_stop_traces"]]
        assert stop_traces == ([] if false_stop_at is None else [(runs["healthy_id"], runs["healthy"], false_stop_at)])
        assert row["false_stuck_share"] == (0.0 if false_stuck_at is None else 1.0)
    assert doc["recommendation"]["settings"]["min_repetitions"] == 2
    assert doc["recommendation"]["settings"]["hysteresis"] == 2
    # The trade-off: r=2 h=1 catches the loop one call sooner, at the price of the false stop.
    assert (doc["trade_off"]["settings"]["min_repetitions"], doc["trade_off"]["settings"]["hysteresis"]) == (2, 1)
    # The unlabelled loop (lookup x4) is not counted above; under r=2 h=2 it is stuck after call 2, stopped after 3.
    assert doc["unlabelled"] == {"traces": [{"trace_id": runs["unlabelled_id"], "source": runs["unlabelled"]}],
                                 "stuck": 1, "stopped": 1,
                                 "stuck_traces": [{"trace_id": runs["unlabelled_id"], "source": runs["unlabelled"]}]}


def test_without_prices_no_dollars(runs: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Without prices the delays have calls and seconds only (a model without a price is never priced as zero)."""
    doc = _calibrate(capsys, "--incidents", runs["incidents"], "--healthy", runs["healthy"], *GRID_RH)
    rec = doc["recommendation"]
    assert set(rec["delay_to_stuck"]) == {"calls_mean", "calls_median", "calls_max", "seconds_mean"}
    assert set(rec["saved_by_stops"]) == {"calls", "seconds"}


# -- the recommendation against a brute force over the grid, with audit ----------------------------------------


def _load_benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("calibrate_benchmark", REPO / "tests" / "benchmarks" / "calibrate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibrate_benchmark", module)
    spec.loader.exec_module(module)
    return module


BRUTE_AXES = {"window": (6, 12), "max_period": (2, 3), "min_repetitions": (2, 3), "frequency_limit": (3, 5),
              "hysteresis": (1, 2)}


def _brute_force(files: dict[str, str], base: LoopGuardConfig) -> list[dict[str, Any]]:
    """Every valid setting audited separately with ``audit``'s own code (files read again each time), measured and
    ranked by the README's rule, in a few plain lines."""
    outcomes = []
    for index_values in itertools.product(*BRUTE_AXES.values()):
        values = dict(zip(BRUTE_AXES, index_values))
        try:
            config = replace(base, **values)
        except Exception:  # the configuration refuses it (window too small): not swept
            continue
        per_trace = {}
        for label, path in files.items():
            for report in audit_paths([path], config, AuditOptions()):
                assert not isinstance(report, Exception), report
                stuck = next((t for t in report.transitions if t.verdict.kind == "stuck"), None)
                stop = next((i for i in report.interventions if i.action == "stop"), None)
                per_trace[report.trace_id] = (label, stuck, stop)
        outcomes.append((values, per_trace))
    onset: dict[str, int] = {}
    for _, per_trace in outcomes:
        for trace_id, (label, stuck, _) in per_trace.items():
            if label == "incident" and stuck is not None:
                onset[trace_id] = min(onset.get(trace_id, 10**9), stuck.verdict.cycle_start)
    rows = []
    for index, (values, per_trace) in enumerate(outcomes):
        caught, stopped, false_stuck, false_stops = [], [], 0, 0
        for trace_id, (label, stuck, stop) in per_trace.items():
            loop_stop = stop is not None and stop.rule in ("period", "frequency")
            if label == "incident":
                if stuck is not None:
                    caught.append(stuck.step - onset[trace_id])
                    if loop_stop:
                        stopped.append(stop.step - onset[trace_id])
            else:
                false_stuck += stuck is not None
                false_stops += loop_stop
        inf = Fraction(10**18)
        key = (false_stops, -len(caught), Fraction(sum(caught), len(caught)) if caught else inf, false_stuck,
               -len(stopped), Fraction(sum(stopped), len(stopped)) if stopped else inf, index)
        rows.append({"key": key, "settings": values, "caught": len(caught), "stopped": len(stopped),
                     "false_stuck": false_stuck, "false_stops": false_stops})
    return sorted(rows, key=lambda r: r["key"])


def _brute_trade_off(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The README's trade-off: among settings with more false stops than the recommendation that catch more or
    sooner, the one catching the most, with the fewest false stops, then the soonest, then the ranking."""
    best = rows[0]
    delay = best["key"][2]
    candidates = [r for r in rows if r["false_stops"] > best["false_stops"]
                  and (r["caught"] > best["caught"] or (r["caught"] == best["caught"] and r["key"][2] < delay))]
    if not candidates:
        return None
    return min(candidates, key=lambda r: (-r["caught"], r["false_stops"], r["key"][2], r["key"]))


@pytest.mark.parametrize("budget", [None, 0.02], ids=["prices", "prices+cost-budget"])
def test_recommendation_equals_brute_force(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           budget: float | None) -> None:
    """Generated runs of every shape (tests/benchmarks/calibrate.py); the sweep's ranking, counts and recommendation
    equal those of a brute force that audits every setting with ``audit``'s code. With a cost budget, model usage
    decides stops too (the sweep then replays the usage steps)."""
    bench = _load_benchmark()
    bench.generate(str(tmp_path / "runs"), 120, variant=11)
    # max_cost_usd is a top-level key: it must come before the [prices] table.
    config_text = (f"max_cost_usd = {budget}\n" if budget else "") + bench.PRICES_TOML
    config = tmp_path / "base.toml"
    config.write_text(config_text)
    files = {"incident": str(tmp_path / "runs" / "incidents" / "runs-0000.jsonl"),
             "healthy": str(tmp_path / "runs" / "healthy" / "runs-0000.jsonl")}
    base = LoopGuardConfig.load(str(config))
    brute = _brute_force(files, base)
    grid = [a for axis, values in BRUTE_AXES.items() for a in ("--grid", f"{axis}={','.join(map(str, values))}")]
    doc = _calibrate(capsys, "--incidents", files["incident"], "--healthy", files["healthy"], "--config", str(config),
                     *grid)
    got = [{"settings": s["settings"], "caught": s["caught"], "stopped": s["stopped"], "false_stuck": s["false_stuck"],
            "false_stops": s["false_stops"]} for s in doc["settings"]]
    assert got == [{k: v for k, v in r.items() if k != "key"} for r in brute]
    assert doc["recommendation"]["settings"] == brute[0]["settings"]
    expected_trade_off = _brute_trade_off(brute)
    assert expected_trade_off is not None
    assert doc["trade_off"]["settings"] == expected_trade_off["settings"]
    # The runs are varied enough that settings disagree: some stop healthy runs, some miss incidents.
    assert any(r["false_stops"] for r in brute) and any(r["caught"] < brute[0]["caught"] for r in brute)
    if budget:
        assert any(s["budget_stops"] for s in doc["settings"])


# -- the traces are read once ----------------------------------------------------------------------------------


def test_files_are_read_once_whatever_the_grid(runs: dict[str, str], capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file is read (and its spans decoded) once, for 4 settings as for 1."""
    import otel_loopguard.otlp.read as read_module

    reads: list[str] = []
    original = read_module.read_spans

    def counting(path: str, **kwargs: Any) -> Any:
        reads.append(path)
        return original(path, **kwargs)

    monkeypatch.setattr(read_module, "read_spans", counting)
    doc = _calibrate(capsys, "--incidents", runs["incidents"], "--healthy", runs["healthy"], *GRID_RH)
    assert doc["settings_swept"] == 4
    assert sorted(reads) == sorted([runs["incidents"], runs["healthy"]])


def test_two_processes_give_the_same_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep shared out among forked worker processes answers exactly as one process does."""
    bench = _load_benchmark()
    bench.generate(str(tmp_path), 60, variant=5)
    args = ["--incidents", str(tmp_path / "incidents"), "--healthy", str(tmp_path / "healthy"),
            "--grid", "window=10", "--grid", "hysteresis=1"]
    one = _calibrate(capsys, *args)
    capsys.readouterr()
    assert main(["calibrate", "--json", "--jobs", "2", *args]) == 0
    two = json.loads(capsys.readouterr().out)
    for doc in (one, two):
        del doc["seconds"], doc["jobs"]
    assert one == two
    # A window of 10 holds max_period x min_repetitions for 6 of the 9 pairs (not 3x4, 4x3, 4x4); x 3 frequencies.
    assert one["settings_swept"] == 6 * 3


def test_steps_files_are_calibrated_like_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A steps file (no trace id) is one trace judged in its own order, as audit judges it.

    The shipped example: search(weather in Paris) at call 0, read at 1, then the same search (only its volatile
    request_id differs) at calls 2..5 with one result, one call a second (call k ends at t0 + k + 0.4 s). With
    frequency_limit 6 only the period rule fires; its cycle starts at call 2 (the read breaks the run): onset 2.
    r=2: stuck after call 3, stopped after 4 (delays 1 and 2 calls, 1 and 2 s); r=3: after 4 and 5 (2 and 3)."""
    example = REPO / "otel_loopguard" / "examples" / "stuck-search.json"
    healthy = tmp_path / "ok.json"
    healthy.write_text(json.dumps([{"tool": "a", "args": {"x": 1}, "result": "1"},
                                   {"tool": "b", "args": {"x": 2}, "result": "2"}]))
    shutil.copy(example, tmp_path / "loop.json")
    doc = _calibrate(capsys, "--incidents", str(tmp_path / "loop.json"), "--healthy", str(healthy),
                     "--grid", "window=10", "--grid", "max_period=3", "--grid", "min_repetitions=2,3",
                     "--grid", "frequency_limit=6", "--grid", "hysteresis=1")
    assert doc["incidents"] == [{"trace_id": None, "source": str(tmp_path / "loop.json"), "calls": 6, "onset": 2}]
    rows = {s["settings"]["min_repetitions"]: s for s in doc["settings"]}
    for r, (stuck, stop) in {2: (1, 2), 3: (2, 3)}.items():
        assert rows[r]["delay_to_stuck"]["calls_mean"] == stuck
        assert rows[r]["delay_to_stuck"]["seconds_mean"] == pytest.approx(stuck)
        assert rows[r]["delay_to_stop"]["calls_mean"] == stop
        assert rows[r]["delay_to_stop"]["seconds_mean"] == pytest.approx(stop)
    assert doc["recommendation"]["settings"]["min_repetitions"] == 2
