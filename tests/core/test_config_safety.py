"""Configuration files that cannot hang or flood a process, and a signature key that never shows."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_loopguard.core.config import LoopGuardConfig

HEALTHY = Path(__file__).parent / "data" / "healthy.json"  # a steps file: four different calls, working


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command line as a real process."""
    return subprocess.run([sys.executable, "-m", "otel_loopguard.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})


def test_a_fifo_or_an_oversized_file_is_no_configuration(tmp_path: Path) -> None:
    """LOOPGUARD_CONFIG naming a FIFO (which would block) or a file over 1 MiB is refused at once, exit 2."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    done = cli("audit", str(HEALTHY), env={"LOOPGUARD_CONFIG": str(fifo)}, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"otel-loopguard: error: {fifo}: a configuration must be a regular file\n"
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 120_000 + "window = 10\n")  # 1.2 MB
    done = cli("audit", str(HEALTHY), env={"LOOPGUARD_CONFIG": str(big)})
    assert done.returncode == 2
    assert done.stderr == f"otel-loopguard: error: {big}: a configuration file may hold at most 1048576 bytes\n"


def test_the_signature_key_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    """Not in the configuration's repr, nor in the warning about a key from the environment that is too short."""
    key = "correct-horse-battery-staple-42"
    config = LoopGuardConfig(signature_key=key)
    assert key not in repr(config) and key.encode() not in repr(config).encode()
    with caplog.at_level(logging.WARNING):
        loaded = LoopGuardConfig.load(environ={"LOOPGUARD_SIGNATURE_KEY": "short-secret"})
    assert loaded.signature_key is None
    assert caplog.records and all("short-secret" not in r.getMessage() for r in caplog.records)
