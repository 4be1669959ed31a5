"""The reference engine and canonicaliser share no code with the product: a bug in the product cannot hide in both."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = [ROOT / "tests" / "core" / "_engine_reference.py", ROOT / "tests" / "core" / "_canonical_reference.py"]


def _imported(path: Path) -> set[str]:
    """Every module named by an import statement anywhere in ``path`` (functions included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_the_reference_modules_import_nothing_from_the_package() -> None:
    """No import statement of either reference names otel_loopguard, and neither imports relatively."""
    for path in REFERENCES:
        names = _imported(path)
        assert names, path  # the walk saw the module's imports at all
        assert not [n for n in names if n.split(".")[0] == "otel_loopguard" or n.startswith(".")], path


def test_importing_the_reference_engine_loads_no_package_module() -> None:
    """A fresh interpreter that imports the reference engine has no otel_loopguard module loaded afterwards."""
    code = ("import sys, tests.core._engine_reference as r; r.ReferenceEngine; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'otel_loopguard'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
