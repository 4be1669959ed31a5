"""Fixtures for the tests that run the shipped configurations in the real Collector (tests/support/otelcol.py).

``LOOPGUARD_OTELCOL`` (the binary, exported by ``.ci/run``) and ``LOOPGUARD_REQUIRE_E2E`` are read here at import,
at collection time: the autouse fixture in ``tests/conftest.py`` removes every ``LOOPGUARD_*`` variable before
each test runs. Without a binary the tests skip, unless ``LOOPGUARD_REQUIRE_E2E=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.external import unavailable
from tests.support.otelcol import OTELCOL_ENV, RecordingOTLPHTTPReceiver, otelcol_binary, otelcol_unavailable_reason

OTELCOL_OVERRIDE = os.environ.get(OTELCOL_ENV) or None


@pytest.fixture(scope="session")
def otelcol_bin() -> Path:
    """The Collector built by tests/collector/build.sh; skip (or fail under LOOPGUARD_REQUIRE_E2E=1) without it."""
    reason = otelcol_unavailable_reason(OTELCOL_OVERRIDE)
    if reason is not None:
        unavailable(f"OpenTelemetry Collector unavailable: {reason}")
    path = otelcol_binary(OTELCOL_OVERRIDE)
    assert path is not None
    return path


@pytest.fixture
def backend() -> Iterator[RecordingOTLPHTTPReceiver]:
    """A recording OTLP backend with a gRPC and an HTTP listener on free 127.0.0.1 ports."""
    receiver = RecordingOTLPHTTPReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()
