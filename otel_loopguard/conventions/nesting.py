"""One call, one step: nested tool spans of one call, recorded by two instrumentations, count once.

Two instrumentations often record the same tool call as a parent and a child span: an OpenInference TOOL span
around AutoGen's native ``execute_tool`` span, an MCP client span under an ``execute_tool`` span. The judge
(:class:`~otel_loopguard.core.judge.TraceJudge`) owns the mechanism (:class:`~otel_loopguard.core.judge.Nesting`:
an inner step whose parent is a tool step is offered to the rules); this module says which nested steps are one
call and how they combine, because that is knowledge of the conventions:

* an MCP client span (origin :data:`~otel_loopguard.core.judge.ORIGIN_MCP_CLIENT`) inside a tool span is the
  transport of that call: the tool span stands;
* any other tool span (origin :data:`ORIGIN_TOOL`) inside a tool span of the same tool that encloses it in time is
  the same call seen twice: one step, whose content comes from the span that carries it (arguments from the one
  that recorded arguments, the result likewise) and whose error from either (the OpenInference wrapper keeps its
  status OK when AutoGen's span records the failure). A tool span inside a span of another tool (an agent used as
  a tool calling its own tools) is a call of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ..core.judge import MCP_CLIENT_NESTING, ORIGIN_MCP_CLIENT, Nesting, NestingRule, Step
from ..core.model import ToolCall
from .names import MCP_METHOD_NAME

__all__ = ["CONVENTION_NESTING", "ORIGIN_TOOL", "join_same_call", "tool_origin"]

#: :attr:`Step.origin` of a tool span of any convention but MCP client spans: it may be nested in another
#: instrumentation's span of the same call.
ORIGIN_TOOL = "tool"

# A child may appear to end up to this long after its parent (JavaScript span times: start cut to the millisecond).
_CLOCK_SLACK_NS = 1_000_000


def join_same_call(outer: Step, inner: Step) -> Step | None:
    """The one step for a tool span and its child when they are the same call (same tool, child inside in time)."""
    a, b = outer.call, inner.call
    if a is None or b is None or a.tool != b.tool:
        return None
    if inner.start_ns + _CLOCK_SLACK_NS < outer.start_ns or inner.end_ns > outer.end_ns + _CLOCK_SLACK_NS:
        return None
    if a.arguments_captured:
        arguments, arguments_captured = a.arguments, True
    else:
        arguments, arguments_captured = b.arguments, b.arguments_captured
    if a.result_captured:
        result, result_captured = a.result, True
    else:
        result, result_captured = b.result, b.result_captured
    call = ToolCall(
        tool=a.tool,
        arguments=arguments,
        arguments_captured=arguments_captured,
        result=result,
        result_captured=result_captured,
        # The inner span is the execution itself: its error wins (the wrapper may not record the failure).
        error=b.error if b.error is not None else a.error,
        progress=a.progress if a.progress is not None else b.progress,
        start=a.start,
        end=a.end,
        lease=a.lease if a.lease is not None else b.lease,
    )
    return msgspec.structs.replace(outer, call=call, agent=outer.agent or inner.agent,
                                   conversation=outer.conversation or inner.conversation)


#: The nesting every path judges with: MCP client spans join their tool span; a tool span joins the enclosing span
#: of the same call.
CONVENTION_NESTING = Nesting(*MCP_CLIENT_NESTING.rules, NestingRule(ORIGIN_TOOL, join_same_call))


def tool_origin(attrs: Mapping[str, Any]) -> str:
    """The :attr:`Step.origin` of a tool span: MCP client spans apart, every other tool span :data:`ORIGIN_TOOL`."""
    return ORIGIN_MCP_CLIENT if attrs.get(MCP_METHOD_NAME) is not None else ORIGIN_TOOL
