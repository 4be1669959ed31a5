"""The commands a newcomer types first: the shipped example by name, report with no --by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.cli import main

_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "langgraph_genai__same_call_loop.json"


def test_audit_example_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    """``audit --example stuck-search`` judges the trace shipped in the package: stuck, exit status 1."""
    assert main(["audit", "--example", "stuck-search"]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.endswith("examples/stuck-search.json: stuck (rules frequency then period, period 1) after 6 tool "
                          "calls; stuck at calls 4-6, nudged at call 4, stopped at call 5")


def test_audit_without_a_file_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    """``audit`` alone is one error line naming the three ways to give a trace, exit status 2."""
    assert main(["audit"]) == 2
    assert capsys.readouterr().err == (
        "otel-loopguard: error: audit: name a trace FILE, - for standard input, or --example stuck-search\n")


def test_report_groups_by_service_name_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """``report FILE`` without ``--by`` groups by service.name (one group: the fixture's service, one trace)."""
    assert main(["report", str(_FIXTURE), "--json"]) == 0
    (group,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert group["attribute"] == "service.name"
    assert group["group"] == "langgraph-fixture-genai"
    assert group["traces"] == 1


@pytest.mark.parametrize("command", ["audit", "report"])
@pytest.mark.parametrize("content", ["", '{"resourceSpans": []}\n'])
def test_an_input_without_spans_is_reported(command: str, content: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """An empty file, or one holding no span, is one error line naming the file and exit status 2."""
    path = tmp_path / "empty.json"
    path.write_text(content)
    assert main([command, str(path)]) == 2
    assert capsys.readouterr().err == f"otel-loopguard: error: {path}: no spans in this file\n"


def test_a_missing_file_is_not_also_called_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that cannot be read gets its own error only, not a second 'no spans' line."""
    assert main(["audit", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("otel-loopguard: error:") == 1 and "no spans" not in err


@pytest.mark.parametrize(("text", "message"), [
    ('window = "ten"\n', "window: must be a positive integer, got 'ten'"),
    ("max_periodd = 3\n", "top level: unknown key(s) max_periodd (did you mean max_period?)"),
    ("[retry]\nbackof_rate = 2\n", "[retry]: unknown key(s) backof_rate (did you mean backoff_rate?)"),
])
def test_configuration_errors_name_the_file_and_the_key(text: str, message: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A bad value names the file and its key; a misspelt key suggests the nearest known one."""
    path = tmp_path / "loopguard.toml"
    path.write_text(text)
    assert main(["audit", "--example", "stuck-search", "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"otel-loopguard: error: {path}: {message}\n"


def test_a_far_off_key_gets_no_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key like no known one is named without a guess."""
    path = tmp_path / "loopguard.toml"
    path.write_text("colour = 1\n")
    assert main(["audit", "--example", "stuck-search", "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"otel-loopguard: error: {path}: top level: unknown key(s) colour\n"


def test_headline_and_timeline_name_the_same_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """The example got stuck by frequency at call 4 and is stuck by period at the end: the headline says both, in
    the timeline's words, and the timeline's rule is one of them."""
    main(["audit", "--example", "stuck-search"])
    lines = capsys.readouterr().out.splitlines()
    assert "(rules frequency then period, period 1)" in lines[0]
    assert "  call 4: working -> stuck (rule frequency)" in lines


def test_a_paginating_trace_is_not_shown_as_a_violation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Six identical next_page calls with new pages each time: working by progress, the step audit says ok and
    why in text; --json keeps the raw figures (ok false, the repeat_loop violation)."""
    steps = [{"tool": "next_page", "args": {}, "result": f"page {i}"} for i in range(1, 7)]
    path = tmp_path / "pages.json"
    path.write_text(json.dumps({"steps": steps}))
    assert main(["audit", str(path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text == [f"{path}: working (rule progress) after 6 tool calls",
                    "  step audit: ok (identical consecutive calls from call 1 made progress)"]
    assert main(["audit", "--json", str(path)]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert (raw["ok"], raw["violations"]) == (False, ["repeat_loop:next_page|@0"])
