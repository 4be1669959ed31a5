"""Open tool spans noted on the application thread: what an end item learns about its parent, and the bound."""

from __future__ import annotations

from opentelemetry.trace import SpanContext, TraceFlags

from otel_loopguard.sdk.open_spans import OpenTools


def _ctx(span_id: int) -> SpanContext:
    return SpanContext(0xABC, span_id, False, TraceFlags(TraceFlags.SAMPLED))


def test_a_span_under_an_open_tool_span_learns_its_parent_is_open() -> None:
    """Inner span 2 ends inside tool span 1: parent open; tool span 1 then ends under a parent never noted."""
    open_tools = OpenTools(8)
    open_tools.add(1)
    assert open_tools.ended(2, _ctx(1)) is True
    assert open_tools.ended(1, _ctx(99)) is False
    assert open_tools.ids == {}
    assert open_tools.ended(3, _ctx(1)) is False  # tool span 1 has ended: no longer open


def test_a_root_span_has_no_open_parent() -> None:
    """A span without a parent never reports an open parent, and is forgotten if it was noted."""
    open_tools = OpenTools(8)
    open_tools.add(5)
    assert open_tools.ended(5, None) is False
    assert open_tools.ids == {}


def test_the_oldest_open_tool_span_is_forgotten_beyond_the_limit() -> None:
    """With a limit of 3, noting a fourth span forgets the first (a span that never ends cannot grow the index)."""
    open_tools = OpenTools(3)
    for span_id in (1, 2, 3, 4):
        open_tools.add(span_id)
    assert list(open_tools.ids) == [2, 3, 4]
    assert open_tools.ended(10, _ctx(1)) is False
    assert open_tools.ended(11, _ctx(4)) is True
