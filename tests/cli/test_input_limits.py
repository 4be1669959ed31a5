"""Reading stored traces safely: a bounded sniff, an input size cap, standard input and FIFOs, errors that leave the
other files audited, Ctrl-C, and a demo that checks where it will write before it runs."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import otel_loopguard.otlp.read as read_module
from otel_loopguard.cli import main

DATA = Path(__file__).parent.parent / "core" / "data"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"
HEALTHY = DATA / "healthy.json"  # a steps file: four different calls, working


def cli(*args: str, stdin: Any = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command line as a real process."""
    return subprocess.run([sys.executable, "-m", "otel_loopguard.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_standard_input_is_read_with_a_dash() -> None:
    """``audit -`` reads a trace piped on standard input and names it <stdin>."""
    done = cli("audit", "--json", "-", stdin=(FIXTURES / "pydantic_ai__same_call_loop.json").read_text())
    [report] = [json.loads(line) for line in done.stdout.splitlines()]
    # The recorded same-call loop: five identical searches.
    assert (done.returncode, report["source"], report["steps_used"], done.stderr) == (1, "<stdin>", 5, "")


def test_a_fifo_is_read_like_a_file(tmp_path: Path) -> None:
    """A named pipe is audited (it cannot be read twice, so the format is told from one bounded look)."""
    fifo = tmp_path / "spans.fifo"
    os.mkfifo(fifo)
    text = (FIXTURES / "pydantic_ai__healthy.json").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    done = cli("audit", "--json", str(fifo))
    writer.join()
    [report] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (done.returncode, report["steps_used"], report["verdict"]) == (0, 4, "working")


def test_the_format_is_told_from_at_most_64_kb(tmp_path: Path) -> None:
    """A writer that sends 100 kB of one line and then nothing: the format is decided without waiting for more."""
    from otel_loopguard.cli.audit import _sniff_steps

    fifo = tmp_path / "slow.fifo"
    os.mkfifo(fifo)
    release = threading.Event()

    def feed() -> None:
        try:
            with open(fifo, "wb") as fh:
                fh.write(b'{"resourceSpans": [' + b" " * 100_000)
                fh.flush()
                release.wait(120)
        except BrokenPipeError:
            pass  # the sniff read what it needed and closed its end

    writer = threading.Thread(target=feed)
    writer.start()
    answer: list[bool] = []
    sniffer = threading.Thread(target=lambda: answer.append(_sniff_steps(str(fifo))), daemon=True)
    sniffer.start()
    try:
        sniffer.join(30)
        assert answer == [False], "the sniff waited for the rest of the line"
    finally:
        release.set()
        writer.join()


def test_an_input_over_the_cap_is_an_error_and_the_next_file_is_audited(tmp_path: Path) -> None:
    """A gzip bomb (50 MB of JSON in 50 kB) over --max-input-bytes: one error line, the next file's report, exit 2."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"resourceSpans": [' + b" " * 50_000_000 + b"]}"))
    done = cli("audit", "--max-input-bytes", "1000000", str(bomb), str(HEALTHY))
    assert done.returncode == 2
    assert done.stderr == (f"otel-loopguard: error: {bomb}: larger than the input limit of 1000000 bytes "
                           "(--max-input-bytes)\n")
    assert done.stdout.startswith(f"{HEALTHY}: working after 4 tool calls")


@pytest.mark.parametrize("failure", [MemoryError(), OSError(5, "Input/output error")])
def test_memory_and_read_failures_are_one_line_and_the_next_file_is_audited(
        failure: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Running out of memory or an I/O error while reading one file: a one-line error naming it, the other file
    still audited, exit 2."""
    real = read_module._json_file
    bad = tmp_path / "bad.json"
    bad.write_text((FIXTURES / "pydantic_ai__healthy.json").read_text())

    def failing(stream: Any, path: str, report: Any) -> Any:
        if path.endswith("bad.json"):
            raise failure
        return real(stream, path, report)

    monkeypatch.setattr(read_module, "_json_file", failing)
    status = main(["audit", str(bad), str(FIXTURES / "pydantic_ai__same_call_loop.json")])
    out = capsys.readouterr()
    assert status == 2
    [error] = out.err.splitlines()
    assert error.startswith(f"otel-loopguard: error: {bad}: ")
    assert "stuck (rule period, period 1) after 5 tool calls" in out.out


def test_ctrl_c_writes_whole_lines_and_says_interrupted(tmp_path: Path) -> None:
    """Interrupted while waiting for its second input, audit has written the first report whole, says so, exits
    130."""
    fifo = tmp_path / "never.fifo"
    os.mkfifo(fifo)
    # SIGINT restored to its default in the child: a test run started in the background by a shell without job
    # control inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler (the child would never
    # see the Ctrl-C this test sends).
    process = subprocess.Popen([sys.executable, "-m", "otel_loopguard.cli", "audit", str(HEALTHY), str(fifo)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stdout is not None
    first = b""
    while first.count(b"\n") < 2:  # the first report (a headline and its step audit), read as it is written
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, first
        first += chunk
    assert first.startswith(f"{HEALTHY}: working".encode())
    # Opening the write end returns once audit has opened the FIFO to read it; it then waits for data.
    with open(fifo, "wb"):
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err == b"otel-loopguard: interrupted\n"
    assert (first + out).endswith(b"\n")


def test_demo_out_is_checked_before_the_demo_runs(tmp_path: Path) -> None:
    """``demo --out`` into a missing directory fails at once with one line, before any scenario runs."""
    target = tmp_path / "missing" / "demo.json"
    done = cli("demo", "--out", str(target))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"otel-loopguard: error: --out {target}: no such directory: {target.parent}\n"


def test_a_regular_file_over_the_cap_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    """A 1 GiB (sparse) file over a 200 MB cap is refused by its size: the error states it, and the process's peak
    memory stays far below the 200 MB that reading up to the cap would take (measured: 217 MB before the fix)."""
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)
    probe = ("import resource, subprocess, sys\n"
             "done = subprocess.run([sys.executable, '-m', 'otel_loopguard.cli', 'audit', '--max-input-bytes',"
             " '200000000', sys.argv[1]], capture_output=True, text=True)\n"
             "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
             "sys.stdout.write(done.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(big)], capture_output=True, text=True, timeout=300,
                          check=True)
    status, peak_mb = map(int, done.stdout.splitlines()[0].split())
    assert status == 2
    assert done.stdout.splitlines()[1:] == [f"otel-loopguard: error: {big}: 1073741824 bytes, larger than the input "
                                            "limit of 200000000 bytes (--max-input-bytes)"]
    assert peak_mb < 120, peak_mb


def _full_disk() -> None:
    """In the child: a 64 kB file size limit, with SIGXFSZ ignored so that a write past it fails with EFBIG."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))


def test_demo_out_write_failure_is_one_line(tmp_path: Path) -> None:
    """A write that fails after the demo ran (a file size limit standing in for a full disk): one error line, no
    traceback, exit 2."""
    target = tmp_path / "demo.json"
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "demo", "--no-color", "--out", str(target)],
                          capture_output=True, text=True, timeout=300, preexec_fn=_full_disk, check=False)
    assert done.returncode == 2
    assert done.stderr == f"otel-loopguard: error: --out {target}: cannot write: File too large\n"


def test_demo_out_to_a_file_refusing_writes_fails_before_the_demo(tmp_path: Path) -> None:
    """``demo --out /proc/version`` (a regular file no one may write, not even root) fails at once in one line."""
    done = cli("demo", "--out", "/proc/version")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("otel-loopguard: error: --out /proc/version: ") and done.stderr.count("\n") == 1
