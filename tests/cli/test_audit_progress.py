"""``audit`` shows its progress on standard error only when that is a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "otlp" / "pydantic_ai__same_call_loop.json"


def test_progress_goes_to_a_terminal_and_is_cleared() -> None:
    """On a terminal, stderr shows the audited-traces line and erases it; stdout keeps the report."""
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "otel_loopguard.cli", "audit", "--json", str(FIXTURE)],
            stdout=subprocess.PIPE, stderr=terminal, timeout=60, check=False,
        )
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if terminal != -1:
            os.close(terminal)
        os.close(controller)
    assert done.returncode == 1  # the fixture loops, and --fail-on defaults to stuck
    assert b"audited 1 trace(s)" in shown
    assert shown.endswith(b"\r\x1b[K")
    assert b'"verdict": "stuck"' in done.stdout


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    """Piped stderr stays free of progress lines."""
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "audit", "--json", str(FIXTURE)],
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr == b""
