"""``verdict()`` and ``check()`` take a trace id as an int or as the hex text a trace UI shows."""

from __future__ import annotations

import pytest

from otel_loopguard.core.model import trace_id_of
from tests.processor.conftest import Harness


def test_hex_text_and_int_answer_alike(harness: Harness) -> None:
    """After a stuck loop, the 32-digit hex id (any case, with or without 0x) answers as the int does."""
    h = harness
    agent = h.agent()
    for _ in range(3):
        h.tool(agent)
    trace_id = agent.get_span_context().trace_id
    text = f"{trace_id:032x}"
    verdict = h.processor.verdict(trace_id)
    assert verdict is not None and verdict.kind == "stuck"
    assert h.processor.verdict(text) == verdict
    assert h.processor.verdict("0x" + text.upper()) == verdict
    assert h.processor.check(text) == h.processor.check(trace_id)
    assert h.processor.check(text).action == "nudge"
    h.end(agent)


@pytest.mark.parametrize("value", ["", "xyz", "1" * 33, -1, 1 << 128, True, "4bf9 2f35"])
def test_bad_trace_ids_are_refused(value: object) -> None:
    """Neither an int in range nor 1-32 hex digits: a ValueError saying what a trace id is."""
    with pytest.raises(ValueError, match="a trace id is an int or 32 hex digits"):
        trace_id_of(value)  # type: ignore[arg-type]


def test_short_hex_means_leading_zeros() -> None:
    """A UI that dropped leading zeros gives the same id."""
    assert trace_id_of("ff") == 255 == trace_id_of(f"{255:032x}")
