"""Nested tool spans of one call, fixed examples of how they combine.

Through the public :func:`join_same_call`, :data:`CONVENTION_NESTING` and :func:`tool_origin`. Each expected value is
worked out by hand from the module's rules (the comment says which), never taken from the code's output.
"""

from __future__ import annotations

from otel_loopguard.conventions.nesting import CONVENTION_NESTING, ORIGIN_TOOL, join_same_call, tool_origin
from otel_loopguard.core.judge import ORIGIN_MCP_CLIENT, Step, join_nested
from otel_loopguard.core.model import Lease, ToolCall

MS = 1_000_000

# The outer span recorded everything; the inner span recorded everything else.
FULL_OUTER = ToolCall("t", "A-outer", True, "R-outer", True, "OuterError", "p-outer", 1.0, 2.0, Lease("o", 5.0))
FULL_INNER = ToolCall("t", "A-inner", True, "R-inner", True, "InnerError", "p-inner", 1.1, 1.9, Lease("i", 6.0))
# An outer span that recorded nothing of its own (no arguments, no result, no error, progress or lease).
EMPTY_OUTER = ToolCall("t", None, False, None, False, None, None, 1.0, 2.0, None)


def _step(span_id: int, parent: int | None, start_ms: int, end_ms: int, call: ToolCall | None, *,
          agent: str | None = None, conversation: str | None = None, origin: str = ORIGIN_TOOL,
          start_ns: int | None = None, end_ns: int | None = None) -> Step:
    return Step(span_id=span_id, parent_span_id=parent,
                start_ns=start_ms * MS if start_ns is None else start_ns,
                end_ns=end_ms * MS if end_ns is None else end_ns,
                call=call, agent=agent, conversation=conversation, origin=origin)


def test_what_the_outer_span_recorded_stands_and_the_inner_error_wins() -> None:
    # Both recorded everything: arguments, result, progress, lease and times are the outer span's (it carries them);
    # the error is the inner span's (the execution itself); the step is the outer one, with its agent and
    # conversation.
    outer = _step(1, None, 10, 20, FULL_OUTER, agent="outer-agent", conversation="c-outer")
    inner = _step(2, 1, 11, 19, FULL_INNER, agent="inner-agent", conversation="c-inner")
    joined = join_same_call(outer, inner)
    assert joined is not None
    assert (joined.span_id, joined.start_ns, joined.end_ns) == (1, 10 * MS, 20 * MS)
    assert (joined.agent, joined.conversation) == ("outer-agent", "c-outer")
    assert joined.call == ToolCall("t", "A-outer", True, "R-outer", True, "InnerError", "p-outer", 1.0, 2.0,
                                   Lease("o", 5.0))


def test_what_the_outer_span_lacks_comes_from_the_inner_one() -> None:
    # The outer span recorded nothing: arguments, result, progress and lease are the inner span's; the times stay
    # the outer span's; so do the agent and conversation when the outer has none (None, or empty).
    outer = _step(1, None, 10, 20, EMPTY_OUTER, agent=None, conversation="")
    inner = _step(2, 1, 11, 19, FULL_INNER, agent="inner-agent", conversation="c-inner")
    joined = join_same_call(outer, inner)
    assert joined is not None
    assert (joined.agent, joined.conversation) == ("inner-agent", "c-inner")
    assert joined.call == ToolCall("t", "A-inner", True, "R-inner", True, "InnerError", "p-inner", 1.0, 2.0,
                                   Lease("i", 6.0))


def test_the_outer_error_stands_when_the_inner_span_has_none() -> None:
    inner_ok = ToolCall("t", None, False, None, False, None, None, 1.1, 1.9, None)
    joined = join_same_call(_step(1, None, 10, 20, FULL_OUTER), _step(2, 1, 11, 19, inner_ok))
    assert joined is not None and joined.call is not None and joined.call.error == "OuterError"


def test_neither_span_recorded_the_content() -> None:
    # Not recorded on either span: the joined call has no arguments and no result, and says they were not recorded.
    inner = ToolCall("t", None, False, None, False, None, None, 1.1, 1.9, None)
    joined = join_same_call(_step(1, None, 10, 20, EMPTY_OUTER), _step(2, 1, 11, 19, inner))
    assert joined is not None and joined.call is not None
    c = joined.call
    assert (c.arguments, c.arguments_captured, c.result, c.result_captured, c.error, c.progress, c.lease) == (
        None, False, None, False, None, None, None)


def test_the_clock_slack_is_one_millisecond_each_side() -> None:
    # The child may start up to 1 ms before its parent and end up to 1 ms after it (JavaScript times cut to the
    # millisecond): exactly 1 ms out is still inside; 1 ns more is a call of its own.
    outer = _step(1, None, 10, 20, FULL_OUTER)
    assert join_same_call(outer, _step(2, 1, 0, 0, FULL_INNER, start_ns=9 * MS, end_ns=20 * MS)) is not None
    assert join_same_call(outer, _step(2, 1, 0, 0, FULL_INNER, start_ns=9 * MS - 1, end_ns=20 * MS)) is None
    assert join_same_call(outer, _step(2, 1, 0, 0, FULL_INNER, start_ns=10 * MS, end_ns=21 * MS)) is not None
    assert join_same_call(outer, _step(2, 1, 0, 0, FULL_INNER, start_ns=10 * MS, end_ns=21 * MS + 1)) is None


def test_a_step_without_a_call_joins_nothing() -> None:
    # A usage step (no tool call) on either side is not the same call as anything.
    assert join_same_call(_step(1, None, 10, 20, None), _step(2, 1, 11, 19, FULL_INNER)) is None
    assert join_same_call(_step(1, None, 10, 20, FULL_OUTER), _step(2, 1, 11, 19, None)) is None


def test_an_mcp_client_span_is_the_transport_of_its_tool_span() -> None:
    # The MCP client span inside a tool span: the tool span stands, as it is, even for another tool name and
    # outside in time (the rule looks at neither).
    outer = _step(1, None, 10, 20, FULL_OUTER)
    mcp = _step(2, 1, 11, 40, ToolCall("other", "x", True, "y", True), origin=ORIGIN_MCP_CLIENT)
    assert CONVENTION_NESTING.join(outer, mcp) == outer
    assert join_nested([outer, mcp], CONVENTION_NESTING) == [outer]
    # Offered a step without a call as the outer one, the rule joins nothing.
    assert CONVENTION_NESTING.join(_step(1, None, 10, 20, None), mcp) is None


def test_origins_by_the_mcp_method_attribute() -> None:
    # Only the presence of mcp.method.name makes a span an MCP client span; an empty value is still present.
    assert tool_origin({"mcp.method.name": ""}) == ORIGIN_MCP_CLIENT
    assert tool_origin({}) == ORIGIN_TOOL
    assert tool_origin({"mcp.method.name": None}) == ORIGIN_TOOL
