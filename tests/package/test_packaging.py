"""The distribution users install: the wheel and the sdist build, and the wheel works in a fresh virtualenv.

The fresh environment installs the wheel's dependencies from the package index (pip's cache after the first
run), so this test needs the index: without it, it skips locally and fails under ``LOOPGUARD_REQUIRE_E2E=1``.
"""

from __future__ import annotations

import os
import re
import signal
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


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the wheel and its dependencies, nothing else (no extra)."""
    (wheel,) = dist.glob("otel_loopguard-*.whl")
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    done = _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)])
    if done.returncode != 0:
        message = f"cannot install the wheel's dependencies from the index:\n{done.stderr[-2000:]}"
        unavailable(message)
    return venv


#: The ten-line script of the first minute: configure(), then an agent calling one tool six times the same way.
_FIRST_SCRIPT = """\
import otel_loopguard
from opentelemetry import trace
otel_loopguard.configure()
tracer = trace.get_tracer("first-minute")
call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": "weather"}', "gen_ai.tool.call.result": "no results"}
with tracer.start_as_current_span("invoke_agent weather_agent", attributes={"gen_ai.agent.name": "weather_agent"}):
    for _ in range(6):
        with tracer.start_as_current_span("execute_tool search", attributes=call):
            pass
"""


def test_configure_shows_a_stuck_line_with_no_environment(venv: Path, tmp_path: Path) -> None:
    """In a fresh install, the ten-line configure() script prints the stuck line with no variable set."""
    script = tmp_path / "first.py"
    script.write_text(_FIRST_SCRIPT)
    done = subprocess.run([str(venv / "bin" / "python"), str(script)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert re.search(r"^loopguard: trace [0-9a-f]{8}\u2026: working -> stuck \(period 1, search x3\) nudge$",
                     done.stderr, re.M), done.stderr
    assert "Failed to export" not in done.stderr


def test_plain_serve_runs_both_receivers_and_the_status_page(venv: Path, tmp_path: Path) -> None:
    """``otel-loopguard serve`` from a plain install (no extra) starts gRPC, HTTP and the status page."""
    from tests.serve._child import first_line

    command = [str(venv / "bin" / "otel-loopguard"), "serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0",
               "--status", "127.0.0.1:0"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    try:
        line = first_line(proc.stderr)
        assert line.startswith("otel-loopguard serve: listening on grpc 127.0.0.1:"), line
        assert ", http 127.0.0.1:" in line and "; status page http://127.0.0.1:" in line, line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_wheel_runs_demo_and_audit_in_a_fresh_virtualenv(venv: Path, tmp_path: Path) -> None:
    """Installed from the wheel alone, ``otel-loopguard demo`` runs and ``audit`` finds the shipped example stuck."""
    bin_dir = venv / "bin"
    example = _run([str(bin_dir / "otel-loopguard"), "audit", "--example", "stuck-search"], cwd=tmp_path)
    assert example.returncode == 1, example.stderr
    assert "stuck-search.json: stuck" in example.stdout
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
