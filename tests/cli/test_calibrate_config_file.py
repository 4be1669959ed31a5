"""calibrate reads its --config file (the [calibrate] grid table and the base of --write) with the same bounded
reader as the configuration itself (core.config.read_config_toml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_loopguard.core.calibrate import read_calibrate_table
from otel_loopguard.core.config import MAX_CONFIG_BYTES, LoopGuardConfig, read_config_toml
from otel_loopguard.errors import ConfigError
from tests.support.external import unavailable


def test_grid_table_is_read_from_the_file(tmp_path: Path) -> None:
    """A [calibrate] table with a list and a single value: two axes, the single value as a one-value axis."""
    path = tmp_path / "grid.toml"
    path.write_text("window = 8\n[calibrate]\nwindow = [6, 10]\nhysteresis = 2\n", encoding="utf-8")
    assert read_calibrate_table(path) == {"window": (6, 10), "hysteresis": (2,)}
    assert read_config_toml(path)["window"] == 8


def test_a_file_that_is_not_utf8_is_refused_alike(tmp_path: Path) -> None:
    """Latin-1 bytes: the grid reader and the configuration loader give the one 'not UTF-8 text' error."""
    path = tmp_path / "latin1.toml"
    path.write_bytes("# caf\u00e9\n[calibrate]\nwindow = [6]\n".encode("latin-1"))
    with pytest.raises(ConfigError) as grid:
        read_calibrate_table(path)
    with pytest.raises(ConfigError) as config:
        LoopGuardConfig.load(path)
    assert str(grid.value) == str(config.value)
    assert str(grid.value).startswith(f"{path}: not UTF-8 text")


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    """One byte over MAX_CONFIG_BYTES (comment lines, valid TOML) is refused before parsing."""
    path = tmp_path / "big.toml"
    line = "#" * 1023 + "\n"  # 1 KiB
    path.write_text(line * (MAX_CONFIG_BYTES // 1024) + "#", encoding="utf-8")  # 1 MiB of comments, then one byte
    assert path.stat().st_size == MAX_CONFIG_BYTES + 1
    with pytest.raises(ConfigError, match=f"may hold at most {MAX_CONFIG_BYTES} bytes"):
        read_calibrate_table(path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """A named pipe with no writer: refused as not a regular file (a plain open() would block forever)."""
    if not hasattr(os, "mkfifo"):
        unavailable("named pipes (os.mkfifo) are not available on this system")
    fifo = tmp_path / "grid.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="must be a regular file"):
        read_calibrate_table(fifo)
