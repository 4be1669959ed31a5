"""The one skip-or-fail policy for tests that need something outside Python's standard test setup: a collector
(rotel), promtool and Prometheus, or an optional package (pydantic-ai, the OpenTelemetry auto-instrumentation).

Locally such a test is skipped with the reason. With ``LOOPGUARD_REQUIRE_E2E=1`` (set by ``.ci/run``) it fails
with the same reason instead, so CI can never pass by skipping. The variable is read when this module is imported
(collection time), because the autouse fixture in ``tests/conftest.py`` removes every ``LOOPGUARD_*`` variable
before each test runs.

Use :func:`unavailable` in a fixture or a test (never at module level: a failure there would be a collection error
that stops the whole run), and :func:`require_module` instead of ``pytest.importorskip``, which skips even in CI.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

__all__ = ["REQUIRE_E2E", "require_module", "unavailable"]

REQUIRE_E2E = os.environ.get("LOOPGUARD_REQUIRE_E2E", "").strip() == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip the running test because ``reason``; fail it instead under ``LOOPGUARD_REQUIRE_E2E=1``."""
    if REQUIRE_E2E:
        pytest.fail(f"{reason} (LOOPGUARD_REQUIRE_E2E=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, install: str) -> ModuleType:
    """Import ``name`` for the running test, or skip it (fail it under ``LOOPGUARD_REQUIRE_E2E=1``).

    Args:
        name: the module to import, e.g. ``"pydantic_ai"``.
        install: what to ``pip install`` to get it (shown in the reason).
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"{name} cannot be imported ({exc}); pip install {install}")
