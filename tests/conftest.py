"""Shared fixtures: every test starts without LOOPGUARD_* or OTEL_* settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.external import REQUIRE_E2E

# Collector fixtures (rotel + a recording OTLP receiver) for every directory that needs a real collector.
pytest_plugins = ["tests.support.collector_fixtures"]

# Property tests: derandomised in CI (LOOPGUARD_REQUIRE_E2E=1), so a test's result and a mutant's fate never depend
# on the run; the examples a random run ever found are kept as @example on the test. Locally the default profile
# explores with fresh random data (HYPOTHESIS_PROFILE=ci gives CI's run). Loaded here, before any test module is
# imported: a test's own @settings inherits from the profile loaded when its module is imported.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev")
settings.load_profile("ci" if REQUIRE_E2E else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_TESTS = Path(__file__).parent
# The end-to-end tests: everything that runs a real outside component. Folders: the rotel paths (e2e), the shipped
# Collector configurations with the real Collector, promtool and Prometheus (collector_config), the real agent
# frameworks and zero-code instrumentation (integration); files: the wheel built and installed in a fresh virtualenv;
# fixtures: a real rotel collector or Collector binary wherever a test asks for one.
_E2E_FOLDERS = frozenset({"e2e", "collector_config", "integration"})
_E2E_FILES = frozenset({"package/test_packaging.py"})
_E2E_FIXTURES = frozenset({"rotel", "otelcol_bin"})


def is_e2e(item: pytest.Item) -> bool:
    """Whether ``item`` needs a real collector, Prometheus, framework or packaging subprocess (module docstring)."""
    if _TESTS not in item.path.parents:
        return False
    relative = item.path.relative_to(_TESTS)
    return (relative.parts[0] in _E2E_FOLDERS or relative.as_posix() in _E2E_FILES
            or bool(_E2E_FIXTURES.intersection(getattr(item, "fixturenames", ()))))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the end-to-end tests ``e2e``: ``pytest -m "not e2e"`` is the fast subset, plain ``pytest`` runs all."""
    for item in items:
        if item.get_closest_marker("e2e") is None and is_e2e(item):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove LOOPGUARD_* and OTEL_* variables so the host cannot leak settings into tests."""
    for name in list(os.environ):
        if name.startswith(("LOOPGUARD_", "OTEL_")):
            monkeypatch.delenv(name, raising=False)
