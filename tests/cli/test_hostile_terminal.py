"""Terminal injection: span-supplied names and file names reach the terminal only through the one escaping function."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard.cli import main
from otel_loopguard.core.escape import escaped
from tests.support.calibrate_runs import RunWriter, distinct, same

# What a hostile sender puts in a tool name: clear the screen (ESC), a C1 CSI, a line separator, a bidi override
# and its pop. Each must appear in the output as a visible escape, never as the character itself.
HOSTILE = "st\x1b[2Jat\x9b2Ju\u2028s\u202eevil\u202c"
SHOWN = "st\\x1b[2Jat\\x9b2Ju\\u2028s\\u202eevil\\u202c"
RAW = ("\x1b", "\x9b", "\u2028", "\u202e", "\u202c")


def _assert_clean(text: str) -> None:
    for char in RAW:
        assert char not in text, f"raw {char!r} reached the terminal"


def test_escaped_escapes_controls_c1_bidi_and_separators() -> None:
    """Every dangerous class becomes a backslash escape; plain text, tabs aside, passes unchanged; the limit holds."""
    assert escaped(HOSTILE) == SHOWN
    assert escaped("a\nb\tc\x7f") == "a\\x0ab\\x09c\\x7f"
    assert escaped("\u2066x\u2069\u200f\ufeff\ud800") == "\\u2066x\\u2069\\u200f\\ufeff\\ud800"
    assert escaped("plain ÄÖ 漢字 ok") == "plain ÄÖ 漢字 ok"
    assert escaped("abcdef", 4) == "abc\u2026"
    assert escaped("\x1b\x1b", 5) == "\\x1b\u2026"
    assert escaped("<b>&'", html=True) == "&lt;b&gt;&amp;&#x27;"


def test_calibrate_prints_tool_names_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A healthy run that looks stuck on a hostile tool name is listed with the name escaped, never raw."""
    w = RunWriter({"run.kind": "healthy"})
    w.run(distinct(1, "p") + same(HOSTILE, {"job": 1}, "running", 3) + [(HOSTILE, {"job": 1}, "done")])
    bad = RunWriter({"run.kind": "incident"})
    bad.run(distinct(2) + same("search", {"q": "x"}, "nothing", 5))
    paths = [w.write(tmp_path / "h.json"), bad.write(tmp_path / "i.json")]
    capsys.readouterr()
    status = main(["calibrate", "--jobs", "1", *paths, "--label-attribute", "run.kind", "--grid", "window=10",
                   "--grid", "max_period=3", "--grid", "min_repetitions=2", "--grid", "frequency_limit=6",
                   "--grid", "hysteresis=1"])
    out, err = capsys.readouterr()
    assert status == 0, err
    _assert_clean(out + err)
    assert f"({SHOWN}, rule period)" in out


def test_audit_prints_bidi_controls_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit's readable report shows a looping hostile tool name escaped (U+202E and U+202C included)."""
    w = RunWriter()
    w.run(same(HOSTILE, {"q": "x"}, "nothing", 6))
    path = w.write(tmp_path / "t.json")
    capsys.readouterr()
    main(["audit", path])
    out, err = capsys.readouterr()
    _assert_clean(out + err)
    assert SHOWN in out


def test_report_prints_group_values_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """report's table shows a hostile attribute value as its escape in the group column."""
    w = RunWriter({"app.version": "v\u202e1\u202c\x1b[2J"})
    w.run(distinct(3))
    path = w.write(tmp_path / "t.json")
    capsys.readouterr()
    assert main(["report", path, "--by", "app.version"]) == 0
    out, err = capsys.readouterr()
    _assert_clean(out + err)
    assert "v\\u202e1\\u202c\\x1b[2J" in out


def test_error_quoting_a_file_name_is_one_escaped_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing file whose name holds ESC and a newline gives one error line with both escaped."""
    name = str(tmp_path / "evil\x1b[2J\nname.json")
    capsys.readouterr()
    assert main(["audit", name]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "evil\\x1b[2J\\x0aname.json" in err
