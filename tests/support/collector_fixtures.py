"""Pytest fixtures for tests that need a real collector: rotel forwarding to a recording OTLP receiver.

Registered for the whole suite from ``tests/conftest.py``. When rotel cannot run here the tests that need it are
skipped, unless ``LOOPGUARD_REQUIRE_E2E=1`` (set in CI), in which case they fail with the reason
(:func:`tests.support.external.unavailable`). ``LOOPGUARD_E2E_ROTEL_AGENT`` points at a different ``rotel-agent``
binary (a missing path exercises the policy); it is read at import, at collection time: the autouse fixture in
``tests/conftest.py`` removes every ``LOOPGUARD_*`` variable before each test runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.external import unavailable
from tests.support.otlp_receiver import RecordingOTLPReceiver
from tests.support.rotel import RotelCollector, rotel_available

ROTEL_AGENT_OVERRIDE = os.environ.get("LOOPGUARD_E2E_ROTEL_AGENT") or None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the item so fixture teardown knows whether the test failed."""
    report = yield
    setattr(item, f"_e2e_report_{report.when}", report)
    return report


def _failed(node: pytest.Item) -> bool:
    return any(getattr(getattr(node, f"_e2e_report_{when}", None), "failed", False) for when in ("setup", "call"))


@pytest.fixture(scope="session")
def rotel_unavailable_reason() -> str | None:
    """Why rotel cannot run in this session, or None; checked once."""
    return rotel_available(ROTEL_AGENT_OVERRIDE)


@pytest.fixture
def otlp_receiver() -> Iterator[RecordingOTLPReceiver]:
    """A fresh recording OTLP/gRPC backend on a free 127.0.0.1 port."""
    with RecordingOTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def rotel(
    request: pytest.FixtureRequest, rotel_unavailable_reason: str | None, otlp_receiver: RecordingOTLPReceiver
) -> Iterator[RotelCollector]:
    """A running rotel-agent that forwards traces, logs and metrics to ``otlp_receiver``.

    Skips (or fails under ``LOOPGUARD_REQUIRE_E2E=1``) when rotel cannot run. On test failure the agent's output
    is printed, so it shows in the report; on success its temp files are removed.
    """
    if rotel_unavailable_reason is not None:
        unavailable(f"rotel collector unavailable: {rotel_unavailable_reason}")
    collector = RotelCollector(otlp_receiver.endpoint, agent=ROTEL_AGENT_OVERRIDE)
    try:
        collector.start()
    except Exception:
        print(collector.diagnostics())
        raise
    try:
        yield collector
    finally:
        collector.stop()
        if _failed(request.node):
            print(collector.diagnostics())
        else:
            collector.remove_files()
