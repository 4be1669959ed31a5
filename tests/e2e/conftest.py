"""End-to-end tests through a real rotel collector: every test here gets the ``e2e`` marker.

The collector fixtures (``rotel``, ``otlp_receiver``) and their skip-or-fail policy live in
``tests/support/collector_fixtures.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this directory ``e2e`` (the hook sees the whole session, so filter by path)."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
