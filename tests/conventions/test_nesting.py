"""One call, one step: nested tool spans of one call count once, the span carrying content supplying it."""

from __future__ import annotations

from otel_loopguard.conventions.intake import StepReader
from otel_loopguard.conventions.nesting import CONVENTION_NESTING, ORIGIN_TOOL, join_same_call, tool_origin
from otel_loopguard.conventions.traces import TraceCollector
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import MCP_CLIENT_NESTING, ORIGIN_MCP_CLIENT, Step, TraceJudge, join_nested
from otel_loopguard.core.model import ToolCall
from otel_loopguard.otlp.read import read_spans
from tests.support.recorded_fixtures import FIXTURES

MS = 1_000_000


def _step(span_id: int, parent: int | None, start: int, end: int, call: ToolCall, origin: str = ORIGIN_TOOL) -> Step:
    return Step(span_id=span_id, parent_span_id=parent, start_ns=start * MS, end_ns=end * MS, call=call, origin=origin)


# AutoGen under OpenInference: the TOOL span has the content (and status OK), the native child the failure.
WRAPPER = ToolCall("get_quote", '{"symbol": "ACME"}', True, "429 Too Many Requests", True, None)
NATIVE = ToolCall("get_quote", None, False, None, False, "RateLimitError")


def test_the_same_call_seen_twice_is_one_step_with_content_and_error() -> None:
    outer, inner = _step(1, 9, 10, 20, WRAPPER), _step(2, 1, 11, 19, NATIVE)
    joined = join_same_call(outer, inner)
    assert joined is not None and joined.span_id == 1 and (joined.start_ns, joined.end_ns) == (10 * MS, 20 * MS)
    call = joined.call
    assert call is not None
    assert (call.arguments, call.arguments_captured, call.result, call.error) == (
        '{"symbol": "ACME"}', True, "429 Too Many Requests", "RateLimitError")
    # Content only on the inner span (the other way round): taken from there.
    joined = join_same_call(_step(1, 9, 10, 20, NATIVE), _step(2, 1, 11, 19, WRAPPER))
    assert joined is not None and joined.call is not None and joined.call.arguments == '{"symbol": "ACME"}'


def test_another_tool_or_a_child_outside_in_time_is_a_call_of_its_own() -> None:
    other = ToolCall("search", '{"q": "x"}', True, "r", True)
    assert join_same_call(_step(1, 9, 10, 20, WRAPPER), _step(2, 1, 11, 19, other)) is None
    assert join_same_call(_step(1, 9, 10, 20, WRAPPER), _step(2, 1, 15, 40, NATIVE)) is None
    # A JavaScript child may end up to a millisecond after its parent: still inside.
    assert join_same_call(_step(1, 9, 10, 20, WRAPPER),
                          Step(span_id=2, parent_span_id=1, start_ns=11 * MS, end_ns=20 * MS + MS // 2, call=NATIVE,
                               origin=ORIGIN_TOOL)) is not None


def test_origins() -> None:
    assert tool_origin({"mcp.method.name": "tools/call"}) == ORIGIN_MCP_CLIENT
    assert tool_origin({"gen_ai.operation.name": "execute_tool"}) == ORIGIN_TOOL


def test_nested_autogen_spans_count_once_and_siblings_twice() -> None:
    """join_nested with the conventions' nesting: two nested spans of one call are one step; two calls stay two."""
    steps = [_step(1, 9, 10, 20, WRAPPER), _step(2, 1, 11, 19, NATIVE),
             _step(3, 9, 30, 40, WRAPPER), _step(4, 3, 31, 39, NATIVE)]
    joined = join_nested(steps, CONVENTION_NESTING)
    assert [s.span_id for s in joined] == [1, 3]
    assert all(s.call is not None and s.call.error == "RateLimitError" for s in joined)
    # The judge's default (MCP client spans only) counts every call twice.
    assert len(join_nested(steps, MCP_CLIENT_NESTING)) == 4


def test_recorded_autogen_loop_is_stuck_only_when_nested_spans_join() -> None:
    """The recorded AutoGen + OpenInference loop: 10 tool spans for 5 calls.

    Joined, the five calls are the scenario's loop (stuck at the third call, step 2). Counted twice, each call is
    a content-carrying span followed by an empty one: the evidence of the repetition is incomplete (uncertain),
    which is what the product said before the nesting was generalised.
    """
    path = FIXTURES / "autogen_openinference__same_call_loop.json"
    engine = LoopEngine(LoopGuardConfig())
    collector = TraceCollector(engine)
    [report] = [*collector.add_all(read_spans(str(path)), "f"), *collector.finish()]
    assert report.steps_used == 5
    assert [(t.step, t.verdict.kind) for t in report.transitions] == [(2, "stuck")]

    reader = StepReader()
    steps = sorted((s for s in map(reader.step, read_spans(str(path))) if s is not None and s.call is not None),
                   key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    assert len(steps) == 10
    twice = TraceJudge(engine, nesting=MCP_CLIENT_NESTING)
    for step in steps:
        twice.add(step)
    twice.finish()
    assert twice.steps == 10 and twice.verdict.kind == "uncertain"
