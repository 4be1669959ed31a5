"""``otel-loopguard audit`` on steps files: readable and JSON output, exit status, errors, file options."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otel_loopguard.cli import EXIT_ERROR, EXIT_FOUND, EXIT_OK, main

DATA = Path(__file__).parent / "data"
SPEC_KEYS = {"source", "trace_id", "verdict", "period", "steps_used", "ok", "violations", "transitions", "interventions"}
STUCK_NUDGE = "You have made the same search call 3 times with the same result. Try a different approach."
STUCK_STOP = (
    "loopguard stopped the run: made the same search call 3 times with the same result, and it went on after a nudge"
)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    """The steps files of ``data/`` copied into a temporary directory, by stem."""
    out = {}
    for path in DATA.glob("*.json"):
        out[path.stem] = str(shutil.copy(path, tmp_path / path.name))
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process and return (status, stdout, stderr)."""
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def json_lines(text: str) -> list[dict]:
    """Parse ``--json`` output: one object per line."""
    return [json.loads(line) for line in text.splitlines()]


def test_readable_output_of_a_stuck_trace(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The readable report names the file, the final and the worst verdict with where, the step audit, and one
    timeline of the transition, the nudge and the stop, calls numbered from 1."""
    status, out, err = run(["audit", files["stuck_search"]], capsys)
    assert status == EXIT_FOUND and err == ""
    # The --json test below pins the 0-based steps: stuck and nudged at index 3, stopped at 4; six calls. Numbered
    # from 1 (as loopguard.steps counts), that is calls 4, 4 and 5, and the trace stays stuck to its 6th call.
    assert out.splitlines() == [
        # Stuck first by frequency (call 4), by period at the end: the headline names both, as the timeline does.
        f"{files['stuck_search']}: stuck (rules frequency then period, period 1) after 6 tool calls; "
        "stuck at calls 4-6, nudged at call 4, stopped at call 5",
        "  step audit: ok",
        "  call 4: working -> stuck (rule frequency)",
        f"  call 4: nudge: {STUCK_NUDGE}",
        f"  call 5: stop: {STUCK_STOP}",
    ]


def test_json_output_fields(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` prints one object with the specified fields, values and types."""
    status, out, _ = run(["audit", "--json", files["stuck_search"]], capsys)
    assert status == EXIT_FOUND
    [doc] = json_lines(out)
    # The spec's fields, plus the deciding rule of the verdict and of each intervention, and whether a memory
    # bound forced the trace out before the input ended (never for a steps file).
    assert set(doc) == SPEC_KEYS | {"rule", "partial"} and doc["partial"] is False
    assert doc["source"] == files["stuck_search"] and doc["trace_id"] is None
    assert (doc["verdict"], doc["period"], doc["steps_used"], doc["ok"], doc["violations"]) == ("stuck", 1, 6, True, [])
    assert doc["transitions"] == [
        {"step": 3, "call": 4, "from": "working", "to": "stuck", "rule": "frequency", "period": None}]
    assert [{k: i[k] for k in ("step", "action", "message")} for i in doc["interventions"]] == [
        {"step": 3, "action": "nudge", "message": STUCK_NUDGE},
        {"step": 4, "action": "stop", "message": STUCK_STOP},
    ]
    # Each intervention also says its call number counted from 1 (the step's index + 1).
    assert all(set(i) == {"step", "call", "action", "message", "rule"} for i in doc["interventions"])
    assert [i["call"] for i in doc["interventions"]] == [4, 5]


def test_healthy_trace_exits_zero(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A list-shaped steps file of healthy pagination is working and exits 0."""
    status, out, _ = run(["audit", "--json", files["healthy"]], capsys)
    [doc] = json_lines(out)
    assert status == EXIT_OK
    assert (doc["verdict"], doc["period"], doc["ok"], doc["transitions"], doc["interventions"]) == (
        "working", None, True, [], [],
    )


def test_fail_on_another_verdict(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """``--fail-on waiting`` exits 1 for a waiting trace, which exits 0 by default."""
    assert run(["audit", files["approval_wait"]], capsys)[0] == EXIT_OK
    assert run(["audit", "--fail-on", "waiting", files["approval_wait"]], capsys)[0] == EXIT_FOUND
    assert run(["audit", "--fail-on", "working", files["stuck_search"]], capsys)[0] == EXIT_OK


def test_fail_on_counts_a_verdict_reached_earlier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace that was stuck and recovered still fails ``--fail-on stuck``."""
    steps = [{"tool": "a", "args": {}, "result": "r"}] * 3 + [
        {"tool": f"t{i}", "args": {}, "result": f"r{i}"} for i in range(12)
    ]
    path = tmp_path / "recovered.json"
    path.write_text(json.dumps(steps))
    status, out, _ = run(["audit", "--json", str(path)], capsys)
    [doc] = json_lines(out)
    assert doc["verdict"] == "working" and [t["to"] for t in doc["transitions"]] == ["stuck", "working"]
    assert status == EXIT_FOUND


def test_bad_fail_on_is_a_usage_error(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown ``--fail-on`` value exits 2 through argparse."""
    with pytest.raises(SystemExit) as info:
        main(["audit", "--fail-on", "broken", files["healthy"]])
    assert info.value.code == 2
    assert "invalid choice: 'broken'" in capsys.readouterr().err


def test_bad_file_is_named_and_the_next_file_is_reported(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An invalid steps file is reported with its name and location, the next file still gets its report, exit 2."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"tool": "a"}, {"args": {}}]))
    status, out, err = run(["audit", "--json", str(bad), files["stuck_search"]], capsys)
    assert status == EXIT_ERROR
    assert err == f"otel-loopguard: error: {bad}:steps[1].tool: tool must be a non-empty string, got None\n"
    [doc] = json_lines(out)
    assert doc["source"] == files["stuck_search"] and doc["verdict"] == "stuck"


def test_missing_file_is_named(tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A file that does not exist is reported by name; the other file is still audited."""
    missing = tmp_path / "missing.json"
    status, out, err = run(["audit", str(missing), files["healthy"]], capsys)
    assert status == EXIT_ERROR
    assert err.startswith(f"otel-loopguard: error: {missing}: cannot read")
    assert out.startswith(f"{files['healthy']}: working")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"steps": [], "colour": 1}, "top level: unknown key(s) colour"),
        ({"steps": {}}, "steps: steps must be a list"),
        ([{"tool": "a", "args": [1]}], "steps[0].args: args must be an object or null, got [1]"),
        ([{"tool": "a", "start": "noon"}], "steps[0].start: expected a number of seconds, got 'noon'"),
        ([{"tool": "a", "wait": {"owner": "x"}}], "steps[0].wait: wait must be an object with owner and deadline"),
        ({"max_steps": -1, "steps": []}, "max_steps: expected a non-negative integer, got -1"),
    ],
)
def test_invalid_steps_documents(tmp_path: Path, doc: object, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each kind of malformed steps document exits 2 with the file and the location in the message."""
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    status, out, err = run(["audit", str(path)], capsys)
    assert (status, out) == (EXIT_ERROR, "")
    assert err == f"otel-loopguard: error: {path}:{message}\n"


def test_steps_file_budgets_are_honoured(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The file's max_steps and repeat_limit drive both the step audit and the step-budget stop."""
    status, out, _ = run(["audit", "--json", files["budget"]], capsys)
    [doc] = json_lines(out)
    assert status == EXIT_OK
    assert (doc["ok"], doc["violations"]) == (False, ["repeat_loop:ls|dir=.@0", "step_limit:5"])
    assert doc["interventions"] == [{
        "step": 4, "call": 5, "action": "stop", "rule": "step_limit",
        "message": "loopguard stopped the run: 5 tool calls, over the step budget of 4",
    }]


def test_command_line_budget_is_overridden_by_the_file(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A file that sets max_steps wins over ``--max-steps``; a file that does not set it follows the flag."""
    _, out, _ = run(["audit", "--json", "--max-steps", "100", files["budget"]], capsys)
    assert json_lines(out)[0]["violations"] == ["repeat_loop:ls|dir=.@0", "step_limit:5"]
    _, out, _ = run(["audit", "--json", "--max-steps", "3", files["healthy"]], capsys)
    assert json_lines(out)[0]["violations"] == ["step_limit:4"]


def test_observed_at_is_honoured(tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The file's observed_at (or ``--at``) past the lease deadline turns waiting into stuck."""
    doc = json.loads(Path(files["approval_wait"]).read_text())
    doc["observed_at"] = 1767229300.0  # after the deadline 1767229200
    late = tmp_path / "late.json"
    late.write_text(json.dumps(doc))
    status, out, _ = run(["audit", "--json", str(late)], capsys)
    [report] = json_lines(out)
    assert status == EXIT_FOUND
    assert report["verdict"] == "stuck" and report["period"] == 1
    assert [(t["from"], t["to"]) for t in report["transitions"]] == [("working", "waiting"), ("waiting", "stuck")]
    assert report["transitions"][-1]["step"] == 3
    status, out, _ = run(["audit", "--json", "--at", "1767229300", files["approval_wait"]], capsys)
    assert status == EXIT_FOUND and json_lines(out)[0]["verdict"] == "stuck"


def test_bad_config_file_exits_two(tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A bad ``--config`` is one line on stderr and exit 2, no traceback."""
    cfg = tmp_path / "lg.toml"
    cfg.write_text("window = 0\n")
    status, out, err = run(["audit", "--config", str(cfg), files["healthy"]], capsys)
    assert (status, out) == (EXIT_ERROR, "")
    # The error names the file and the key (a value from the file, not from the command line or environment).
    assert err == f"otel-loopguard: error: {cfg}: window: must be a positive integer, got 0\n"


def test_detector_flags_reach_the_engine(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """``--frequency-limit 5`` removes the frequency finding at call 3, so stuck comes later by period."""
    _, out, _ = run(["audit", "--json", "--frequency-limit", "5", files["stuck_search"]], capsys)
    [doc] = json_lines(out)
    assert doc["transitions"] == [
        {"step": 4, "call": 5, "from": "working", "to": "stuck", "rule": "period", "period": 1}]


def test_no_command_prints_help_and_exits_two(capsys: pytest.CaptureFixture[str]) -> None:
    """Running without a command prints the usage and exits 2."""
    assert main([]) == EXIT_ERROR
    assert "usage: otel-loopguard" in capsys.readouterr().out


def test_module_runs_as_a_real_process(files: dict[str, str]) -> None:
    """``python -m otel_loopguard.cli`` (and the installed console script) audit a file in a child process."""
    commands = [[sys.executable, "-m", "otel_loopguard.cli"]]
    script = Path(sys.executable).with_name("otel-loopguard")
    if script.exists():
        commands.append([str(script)])
    for command in commands:
        proc = subprocess.run(
            [*command, "audit", "--json", files["stuck_search"], files["healthy"]],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert proc.returncode == EXIT_FOUND, proc.stderr
        docs = json_lines(proc.stdout)
        assert [(d["source"], d["verdict"]) for d in docs] == [
            (files["stuck_search"], "stuck"), (files["healthy"], "working"),
        ]
        assert proc.stderr == ""
