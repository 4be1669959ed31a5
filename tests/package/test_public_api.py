"""The public surface is chosen on purpose: pin it, so a change to it is a visible decision."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import otel_loopguard
import otel_loopguard.harness

PACKAGE = Path(otel_loopguard.__file__).parent

EXPECTED = {
    "NORMALIZER_VERSION", "ActionSignature", "ConfigError", "InputError", "Intervention", "Lease",
    "LeasePolicy", "LoopEngine", "LoopGuardConfig", "LoopGuardError", "LoopGuardSpanProcessor", "LoopStopped",
    "Observation", "Prices", "RetryPolicy", "ReviewPending", "ReviewRequest", "ToolCall", "ToolSettings",
    "TraceReport", "Transition", "Usage", "Verdict", "VerdictEvent", "__version__", "audit_trace", "configure",
    "cost_usd", "read_spans",
}


def test_package_exports_exactly_the_chosen_names() -> None:
    """``otel_loopguard.__all__`` is the pinned list, and every name in it resolves."""
    assert set(otel_loopguard.__all__) == EXPECTED
    for name in otel_loopguard.__all__:
        assert getattr(otel_loopguard, name) is not None


def test_harness_helpers_are_public() -> None:
    """The harness module offers the nudge marker and the two helpers, nothing else."""
    assert set(otel_loopguard.harness.__all__) == {"NUDGE_MARKER", "guard_tool", "with_nudge"}


def test_public_classes_and_functions_have_docstrings() -> None:
    """Every exported class and function documents itself."""
    for name in otel_loopguard.__all__:
        obj = getattr(otel_loopguard, name)
        if isinstance(obj, type) or callable(obj):
            assert (obj.__doc__ or "").strip(), name


def _modules_loaded_by(statement: str) -> list[str]:
    # A fresh interpreter: this test process has long since imported the SDK.
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_core_loads_no_opentelemetry() -> None:
    """Importing the pure core (or the package itself) loads no ``opentelemetry`` module at all."""
    for statement in ("import otel_loopguard.core", "import otel_loopguard",
                      "import otel_loopguard.core.engine, otel_loopguard.core.judge, otel_loopguard.core.steps"):
        loaded = _modules_loaded_by(statement)
        assert [m for m in loaded if m.startswith("opentelemetry")] == [], statement


def test_sdk_backed_names_load_on_first_use() -> None:
    """``LoopGuardSpanProcessor`` is importable from the package, and only then is the SDK loaded."""
    loaded = _modules_loaded_by("from otel_loopguard import LoopGuardSpanProcessor")
    assert "opentelemetry.sdk.trace" in loaded
    assert otel_loopguard.LoopGuardSpanProcessor.__module__ == "otel_loopguard"


def test_audit_command_loads_no_sdk() -> None:
    """Building the command line (every command registered) loads no OpenTelemetry SDK module."""
    loaded = _modules_loaded_by("from otel_loopguard.cli import build_parser; build_parser()")
    assert [m for m in loaded if m.startswith("opentelemetry.sdk")] == []


def test_telemetry_names_live_in_one_module() -> None:
    """No package module except ``conventions/names.py`` spells a ``loopguard.`` or ``gen_ai.`` name as a literal."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "conventions" / "names.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and node.value.startswith(("loopguard.", "gen_ai."))):
                offenders.append(f"{path.name}: {node.value}")
    assert offenders == []
