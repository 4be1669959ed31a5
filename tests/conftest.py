"""Shared fixtures: every test starts without LOOPGUARD_* or OTEL_* settings."""

from __future__ import annotations

import os

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


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove LOOPGUARD_* and OTEL_* variables so the host cannot leak settings into tests."""
    for name in list(os.environ):
        if name.startswith(("LOOPGUARD_", "OTEL_")):
            monkeypatch.delenv(name, raising=False)
