"""``report`` and ``calibrate`` read directories the same way: one :func:`expand_paths`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_loopguard.cli.options import expand_paths


def test_directories_become_their_visible_files_in_sorted_order(tmp_path: Path) -> None:
    """Files sorted per directory, subdirectories walked in sorted order, hidden names skipped; files stay."""
    for name in ("b.json", "a.json", ".hidden.json", "sub/z.json", "sub/.x/y.json", ".git/HEAD"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    alone = tmp_path / "a.json"
    # By hand: the top directory's visible files a, b (sorted), then sub/ and its only visible file z.
    assert list(expand_paths([str(tmp_path), str(alone)])) == [
        str(tmp_path / "a.json"), str(tmp_path / "b.json"), str(tmp_path / "sub" / "z.json"), str(alone),
    ]


def test_dash_is_standard_input_even_beside_a_directory_of_that_name(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``-`` names standard input for the reader, so it is never walked as a directory."""
    (tmp_path / "-").mkdir()
    (tmp_path / "-" / "t.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert os.path.isdir("-")
    assert list(expand_paths(["-"])) == ["-"]
