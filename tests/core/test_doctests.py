"""The examples in the docstrings of the detectors, the ladder and the bounded cache run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["period", "frequency", "retry", "lease", "ladder", "cache"])
def test_module_examples(module: str) -> None:
    """Every example in the module's docstrings passes (and there is at least one)."""
    result = doctest.testmod(importlib.import_module(f"otel_loopguard.core.{module}"))
    assert result.attempted > 0 and result.failed == 0
