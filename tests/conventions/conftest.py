"""The processor's real SDK pipeline fixtures, for the convention tests that replay spans through it."""

from tests.processor.conftest import harness, make_harness

__all__ = ["harness", "make_harness"]
