"""The public surface is chosen on purpose: pin it, so a change to it is a visible decision."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import otel_loopguard
import otel_loopguard.harness

PACKAGE = Path(otel_loopguard.__file__).parent

EXPECTED = {
    "NORMALIZER_VERSION", "ActionSignature", "ConfigError", "CostTotal", "InputError", "Intervention", "Lease",
    "LeasePolicy", "LoopEngine", "LoopGuardConfig", "LoopGuardError", "LoopGuardSpanProcessor", "LoopStopped",
    "Observation", "Prices", "RetryPolicy", "ToolCall", "ToolSettings", "TraceState", "Transition", "Usage",
    "Verdict", "VerdictEvent", "__version__", "audit_trace", "cost_usd",
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


def test_the_core_imports_no_opentelemetry() -> None:
    """The pure core (configuration, signatures, engine, store, audit, cost, model, steps, replay) stays OTel-free."""
    core = ["_config", "_signature", "_engine", "_store", "_audit", "_cost", "_model", "_steps", "_replay", "_errors"]
    for module in core:
        tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not [m for m in imported if m.startswith("opentelemetry")], module
        importlib.import_module(f"otel_loopguard.{module}")


def test_telemetry_names_live_in_one_module() -> None:
    """No package module except ``_names`` spells a ``loopguard.`` or ``gen_ai.`` attribute name as a literal."""
    offenders = []
    for path in PACKAGE.glob("*.py"):
        if path.name == "_names.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if node.value.startswith(("loopguard.", "gen_ai.")):
                    offenders.append(f"{path.name}: {node.value}")
    assert offenders == []
