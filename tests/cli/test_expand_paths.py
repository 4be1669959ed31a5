"""``report`` and ``calibrate`` read directories the same way: one :func:`expand_paths` (special files skipped)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from otel_loopguard.cli import main
from otel_loopguard.cli.options import expand_paths
from tests.support.calibrate_runs import RunWriter, distinct


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


def test_a_fifo_in_a_directory_is_skipped_with_a_note(tmp_path: Path) -> None:
    """A FIFO found by walking a directory is not yielded (opening it would block) and one note names it."""
    (tmp_path / "a.json").write_text("{}")
    os.mkfifo(tmp_path / "pipe.json")
    err = io.StringIO()
    assert list(expand_paths([str(tmp_path)], err)) == [str(tmp_path / "a.json")]
    assert err.getvalue() == (f"otel-loopguard: note: {tmp_path / 'pipe.json'}: not a regular file (a FIFO, socket "
                              "or device), skipped; name it on the command line to read it\n")


@pytest.mark.parametrize("command", ["report", "calibrate"])
def test_report_and_calibrate_finish_beside_a_fifo(tmp_path: Path, command: str) -> None:
    """report and calibrate on a directory holding a FIFO end (status 0) instead of waiting for a writer forever."""
    w = RunWriter({"run.kind": "healthy"})
    w.run(distinct(3))
    w.write(tmp_path / "t.json")
    os.mkfifo(tmp_path / "pipe.json")
    extra = ["--by", "run.kind"] if command == "report" else ["--label-attribute", "run.kind", "--jobs", "1"]
    # The timeout only turns the old hang into a failure; a passing run takes a second or two.
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", command, str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "pipe.json: not a regular file" in done.stderr


def test_a_fifo_named_on_the_command_line_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO given explicitly is still read: report counts the one trace a writer thread sends through it."""
    w = RunWriter()
    w.run(distinct(3))
    data = Path(w.write(tmp_path / "t.json")).read_bytes()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    try:
        assert main(["report", str(fifo), "--by", "service.name", "--json"]) == 0
    finally:
        if writer.is_alive():
            # The command failed before opening the FIFO: open it once so that the writer's open returns.
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join()
    assert json.loads(capsys.readouterr().out)["traces"] == 1
