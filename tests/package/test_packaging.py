"""The distribution users install: the wheel and the sdist build, and the wheel works in a fresh virtualenv.

The fresh environment installs the wheel's dependencies from the package index (pip's cache after the first
run), so this test needs the index: without it, it skips locally and fails under ``LOOPGUARD_REQUIRE_E2E=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.external import unavailable

ROOT = Path(__file__).resolve().parents[2]


def _run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPGUARD_", "OTEL_", "PYTHON"))}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, **kwargs)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = _run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)])
    if done.returncode != 0:
        message = f"cannot build the distribution (the build needs setuptools from the index):\n{done.stderr[-2000:]}"
        unavailable(message)
    return out


def test_sdist_holds_the_package_readme_and_examples(dist: Path) -> None:
    """The sdist has the sources, the README, the typing marker and the shipped example and price table."""
    (sdist,) = dist.glob("otel_loopguard-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for expected in ("README.md", "pyproject.toml", "otel_loopguard/__init__.py", "otel_loopguard/core/engine.py",
                     "otel_loopguard/py.typed", "otel_loopguard/examples/stuck-search.json"):
        assert expected in names, expected


def test_wheel_metadata(dist: Path) -> None:
    """The wheel names its version (from otel_loopguard/_version.py), SPDX license and console script."""
    from otel_loopguard import __version__

    (wheel,) = dist.glob("otel_loopguard-*.whl")
    assert wheel.name.startswith(f"otel_loopguard-{__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"otel_loopguard-{__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"otel_loopguard-{__version__}.dist-info/entry_points.txt").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert "otel-loopguard = otel_loopguard.cli:main" in entry_points
    assert "loopguard = otel_loopguard.sdk.autoinstrument:post_instrument" in entry_points


def test_wheel_runs_demo_and_audit_in_a_fresh_virtualenv(dist: Path, tmp_path: Path) -> None:
    """Installed from the wheel alone, ``otel-loopguard demo`` runs and ``audit`` finds the shipped example stuck."""
    (wheel,) = dist.glob("otel_loopguard-*.whl")
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    bin_dir = venv / "bin"
    done = _run([str(bin_dir / "pip"), "install", "-q", str(wheel)])
    if done.returncode != 0:
        message = f"cannot install the wheel's dependencies from the index:\n{done.stderr[-2000:]}"
        unavailable(message)
    demo = _run([str(bin_dir / "otel-loopguard"), "demo", "--no-color"], cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "stuck" in demo.stdout
    # The example is read from the installed package, not from this checkout.
    where = _run([str(bin_dir / "python"), "-c",
                  "import otel_loopguard, pathlib; print(pathlib.Path(otel_loopguard.__file__).parent)"], cwd=tmp_path)
    installed = Path(where.stdout.strip())
    assert installed.is_relative_to(venv), installed
    audit = _run([str(bin_dir / "otel-loopguard"), "audit", str(installed / "examples" / "stuck-search.json")],
                 cwd=tmp_path)
    # Exit status 1: a trace reached the --fail-on verdict (stuck), as the example is built to.
    assert audit.returncode == 1, audit.stderr
    assert "stuck" in audit.stdout
