"""What ``audit`` prints, read by a person: call numbers from 1, one timeline, a headline that tells the whole
story, a period only while stuck, no specification jargon, and nothing from span data that can drive a terminal.

Steps files give hand-made traces. Default configuration: three identical calls with the same result are stuck
at the third (period 1, rule period) and nudged there; a fourth identical call is stopped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli import build_parser, main
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.otlp.read import read_spans
from otel_loopguard.sdk.emit import event_attributes
from otel_loopguard.serve.table import TraceTable

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"
SEARCH = {"tool": "search", "args": {"q": "x"}, "result": "nothing"}
READ = {"tool": "read", "args": {"doc": 1}, "result": "text"}


def steps_file(tmp_path: Path, steps: list[dict[str, Any]], name: str = "trace.json") -> str:
    """A steps file, one second per call."""
    path = tmp_path / name
    path.write_text(json.dumps([{**s, "start": 1000 + i, "end": 1000.5 + i} for i, s in enumerate(steps)]))
    return str(path)


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["audit", *args])
    out = capsys.readouterr()
    assert out.err == ""
    return status, out.out


def test_a_recovered_loop_reads_in_order_with_its_worst_moment_in_the_headline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four identical searches then a read with a new result: stuck and nudged at call 3, stopped at call 4,
    working again at 5 (recovered)."""
    path = steps_file(tmp_path, [SEARCH] * 4 + [READ])
    status, out = audit(capsys, path)
    assert status == 1  # it was stuck at some point (--fail-on stuck)
    assert out.splitlines() == [
        f"{path}: working (rule recovered) after 5 tool calls; stuck at calls 3-4, nudged at call 3, stopped at "
        "call 4",
        "  step audit: identical consecutive calls from call 1: search|q=x",
        "  call 3: working -> stuck (rule period, period 1)",
        "  call 3: nudge: You have made the same search call 3 times with the same result. Try a different approach.",
        "  call 4: stop: loopguard stopped the run: made the same search call 4 times with the same result, and it "
        "went on after a nudge",
        "  call 5: stuck -> working (rule recovered)",
    ]


def test_json_gives_a_period_only_while_stuck(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The recovered trace's final period is null (it is working), and only the stuck transition has one."""
    _, out = audit(capsys, "--json", steps_file(tmp_path, [SEARCH] * 4 + [READ]))
    doc = json.loads(out)
    assert (doc["verdict"], doc["period"]) == ("working", None)
    assert [(t["call"], t["to"], t["period"]) for t in doc["transitions"]] == [(3, "stuck", 1), (5, "working", None)]


def test_an_uncertain_repetition_has_no_period_in_audit_or_in_serve_events(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Calls whose content was not recorded: uncertain at call 3, with no period in the report, its transitions
    or serve's event for the same trace."""
    hidden = {"tool": "search", "args_captured": False}
    _, out = audit(capsys, "--json", steps_file(tmp_path, [hidden] * 3))
    doc = json.loads(out)
    assert (doc["verdict"], doc["period"]) == ("uncertain", None)
    assert [(t["call"], t["to"], t["period"]) for t in doc["transitions"]] == [(3, "uncertain", None)]
    # The recorded no-content loop through serve's table: its uncertain event carries no loopguard.period.
    engine = LoopEngine(LoopGuardConfig())
    table = TraceTable(engine, idle=30)
    events = table.add(list(read_spans(str(FIXTURES / "pydantic_ai__no_content.json"))), now=0)[0]
    [event] = [e for e in events if e.transition is not None]
    attrs = event_attributes(event, engine.normalizer_version)
    assert attrs["loopguard.verdict"] == "uncertain" and "loopguard.period" not in attrs


def test_call_numbers_equal_the_steps_of_the_verdict_events(capsys: pytest.CaptureFixture[str]) -> None:
    """The recorded same-call loop: audit says call 3, and serve's event for that transition says steps 3."""
    path = FIXTURES / "pydantic_ai__same_call_loop.json"
    _, out = audit(capsys, str(path))
    assert "  call 3: working -> stuck (rule period, period 1)" in out.splitlines()
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30)
    events = table.add(list(read_spans(str(path))), now=0)[0]
    [stuck] = [e for e in events if e.transition is not None and e.verdict.kind == "stuck"]
    assert stuck.steps == 3


def test_control_characters_from_span_data_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tool name with a terminal escape and a newline prints escaped, on the lines it belongs to."""
    evil = {"tool": "se\x1b[2Jarch\nINJECTED", "args": {"q": "x\ry"}, "result": "r"}
    path = steps_file(tmp_path, [evil] * 3)
    _, out = audit(capsys, path)
    assert "\x1b" not in out and "\r" not in out
    lines = out.splitlines()
    assert len(lines) == 4  # headline, step audit, transition, nudge: nothing more
    assert "se\\x1b[2Jarch\\x0aINJECTED" in lines[1] and "q=x\\x0dy" in lines[1]
    assert not any(line.startswith("INJECTED") for line in lines)


def test_no_specification_jargon_in_help_or_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No help text of any command, nor audit's output, speaks of the specification's documents."""
    texts = []
    parser = build_parser()
    texts.append(parser.format_help())
    commands = next(a for a in parser._actions if a.dest == "command")
    for sub in commands.choices.values():  # type: ignore[union-attr]
        texts.append(sub.format_help())
    _, out = audit(capsys, steps_file(tmp_path, [SEARCH] * 4))
    texts.append(out)
    for text in texts:
        assert not re.search(r"\bseed", text, re.IGNORECASE), text


def test_top_level_help_has_examples_and_every_flag_a_help_line() -> None:
    """``otel-loopguard --help`` ends with examples and the exit statuses; every option of every command has help."""
    parser = build_parser()
    text = parser.format_help()
    assert "examples:" in text and "otel-loopguard audit trace.json" in text and "exit status" in text
    commands = next(a for a in parser._actions if a.dest == "command")
    assert commands.help
    for name, sub in commands.choices.items():  # type: ignore[union-attr]
        for action in sub._actions:
            assert action.help, (name, action.option_strings or action.dest)
