"""Shared fixtures: every test starts without LOOPGUARD_* or OTEL_* settings."""

from __future__ import annotations

import os

import pytest

# Collector fixtures (rotel + a recording OTLP receiver) for every directory that needs a real collector.
pytest_plugins = ["tests.support.collector_fixtures"]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove LOOPGUARD_* and OTEL_* variables so the host cannot leak settings into tests."""
    for name in list(os.environ):
        if name.startswith(("LOOPGUARD_", "OTEL_")):
            monkeypatch.delenv(name, raising=False)
