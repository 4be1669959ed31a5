"""``main`` builds its argument parser once and shares it between calls, with nothing carried from one to the next."""

from __future__ import annotations

import argparse

import pytest

from otel_loopguard import cli


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found = []
    for action in parser._actions:
        found.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_actions(sub))
    return found


def test_main_builds_the_parser_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Three calls of ``main`` (help, an error, help again) build the parser once."""
    built = []
    real = cli.build_parser

    def counting() -> argparse.ArgumentParser:
        built.append(1)
        return real()

    monkeypatch.setattr(cli, "build_parser", counting)
    cli._shared_parser.cache_clear()
    try:
        assert cli.main([]) == cli.EXIT_ERROR
        assert cli.main(["calibrate"]) == cli.EXIT_ERROR
        assert cli.main([]) == cli.EXIT_ERROR
    finally:
        cli._shared_parser.cache_clear()
    assert built == [1]
    assert "no input" in capsys.readouterr().err


def test_no_argument_has_a_mutable_default() -> None:
    """No option of any command defaults to a list, dict or set, which every parse would share."""
    shared = [a.dest for a in _actions(cli.build_parser()) if isinstance(a.default, (list, dict, set))]
    assert shared == []


def test_repeated_options_do_not_carry_over_between_calls() -> None:
    """``--incidents``/``--grid`` given in one parse are absent (None) in the next parse by the same parser."""
    parser = cli._shared_parser()
    first = parser.parse_args(["calibrate", "--incidents", "a.json", "--grid", "window=6,10"])
    second = parser.parse_args(["calibrate", "b.json"])
    assert (first.incidents, first.grid) == (["a.json"], ["window=6,10"])
    assert (second.incidents, second.healthy, second.grid, second.paths) == (None, None, None, ["b.json"])
