"""serve records each finished trace's task outcome and figures, as the processor does: one trace per outcome."""

from __future__ import annotations

from typing import Any

from otel_loopguard import LoopGuardConfig, Prices
from otel_loopguard.conventions.span import SpanRecord

from ._support import Harness

S = 10**9
T0 = 1_767_225_600 * S
OUTCOME = "loopguard.outcome"


def _agent(trace_id: int, *, error: bool = False, end: float = 10.0, exception: bool = False,
           **attrs: Any) -> SpanRecord:
    """The trace's root: an ``invoke_agent`` span from T0 to T0 + ``end`` seconds (error status, or an
    ``exception`` event, when asked)."""
    events = (("exception", T0 + S, {"exception.type": "RuntimeError"}),) if exception else ()
    return SpanRecord(trace_id, 0x100, None, "invoke_agent planner", T0, T0 + int(end * S),
                      {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", **attrs},
                      status_error=error, events=events)


def _tool(trace_id: int, i: int, query: str = "x") -> SpanRecord:
    """Tool call ``i`` (at T0 + i + 1 s) under the root."""
    return SpanRecord(trace_id, 0x300 + i, 0x100, "execute_tool search", T0 + (i + 1) * S, T0 + (i + 1) * S + S // 10,
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                       "gen_ai.tool.call.arguments": f'{{"q": "{query}"}}', "gen_ai.tool.call.result": "none"})


def _chat(trace_id: int, **attrs: Any) -> SpanRecord:
    """One model call on m1 of 1M input and 0.5M output tokens (priced below: $1 + $1 = $2)."""
    return SpanRecord(trace_id, 0x200, 0x100, "chat m1", T0 + S // 2, T0 + S // 2 + S // 10,
                      {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1",
                       "gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 500_000, **attrs})


def test_one_trace_per_outcome() -> None:
    """Four traces (success, agent error status, refusal, a stopped loop) count once each by outcome."""
    spans = [
        _agent(1), _tool(1, 0, "a"), _tool(1, 1, "b"),
        _agent(2, error=True), _tool(2, 0),
        _agent(3), _chat(3, **{"gen_ai.response.finish_reasons": ("refusal",)}),
        _agent(4, error=True), *(_tool(4, i) for i in range(4)),
    ]
    with Harness(grpc_on=False, http_on=False) as h:
        h.server.ingest(spans)
        h.server.finish_all()
        assert h.wait_reports(4)
        counts = {p.attributes[OUTCOME]: p.value for p in h.points("loopguard.task.outcomes")}
        assert counts == {"success": 1, "error": 1, "refused": 1, "stopped": 1}
        tool_calls = {p.attributes[OUTCOME]: (p.count, p.sum) for p in h.points("loopguard.task.tool_calls")}
        assert tool_calls == {"success": (1, 2), "error": (1, 1), "refused": (1, 0), "stopped": (1, 4)}
        turns = {p.attributes[OUTCOME]: p.sum for p in h.points("loopguard.task.turns")}
        assert turns == {"success": 0, "error": 0, "refused": 1, "stopped": 0}


def test_figures_agent_and_versions_of_a_priced_task() -> None:
    """A 10-second root with one priced model call and a version stamp: $2, 10 s, 1 turn, named and versioned."""
    with Harness(LoopGuardConfig(prices={"m1": Prices(input=1.0, output=2.0)}), grpc_on=False, http_on=False) as h:
        h.server.ingest([_agent(7, **{"app.prompt.version": "p7"}), _chat(7), _tool(7, 0)])
        h.server.finish_all()
        assert h.wait_reports(1)
        for name, total in (("loopguard.task.cost", 2.0), ("loopguard.task.duration", 10.0),
                            ("loopguard.task.turns", 1)):
            [point] = h.points(name)
            assert (point.count, point.sum) == (1, total), name
            assert dict(point.attributes) == {OUTCOME: "success", "gen_ai.agent.name": "planner",
                                              "app.prompt.version": "p7", "gen_ai.request.model": "m1"}, name


def test_exception_event_on_a_plain_root() -> None:
    """A root that is not a GenAI span, with an ``exception`` event and no error status, makes an ``error`` task."""
    root = SpanRecord(9, 0x50, None, "handle_request", T0, T0 + 20 * S,
                      events=(("exception", T0 + S, {"exception.type": "ValueError"}),))
    agent = SpanRecord(9, 0x100, 0x50, "invoke_agent planner", T0 + S // 10, T0 + 10 * S,
                       {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})
    with Harness(grpc_on=False, http_on=False) as h:
        h.server.ingest([root, agent, _tool(9, 0)])
        h.server.finish_all()
        assert h.wait_reports(1)
        [point] = h.points("loopguard.task.outcomes")
        assert (point.attributes[OUTCOME], point.value) == ("error", 1)
        [duration] = h.points("loopguard.task.duration")
        assert duration.sum == 20.0  # the root's 20 s, not the agent's 9.9 s
