"""The package passes its static checks: ruff's rule set, mypy --strict and the layer contracts (pyproject.toml).

They run as tests so that the README's one test command, and so CI, runs them too.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "otel_loopguard"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def _run(*command: str) -> None:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"


def test_ruff() -> None:
    """``ruff check`` passes on the package and the tests with the rule set chosen in pyproject.toml."""
    _run(_tool("ruff"), "check", "otel_loopguard", "tests")


def test_mypy_strict() -> None:
    """``mypy --strict`` (configured in pyproject.toml) finds no error in the package."""
    _run(_tool("mypy"))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="import-linter 2.17 needs Python 3.11 (CI checks on 3.11)")
def test_layer_contracts() -> None:
    """import-linter: the layers import only downwards and the core imports no OpenTelemetry."""
    _run(_tool("lint-imports"))


# Modules allowed to import the OpenTelemetry SDK and the OTLP exporters directly: the sdk layer, the demo's
# scripted agent (an instrumented application) and the public testing helpers.
_SDK_USERS = ("sdk/", "cli/demo_agent.py", "testing.py")


def test_only_the_sdk_layer_imports_the_sdk() -> None:
    """No module outside the sdk layer (and the demo's agent) imports ``opentelemetry.sdk`` or the exporters."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(_SDK_USERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{rel}: {name}" for name in names
                          if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))]
    assert offenders == []
