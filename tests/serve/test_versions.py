"""serve puts a trace's versions on its verdict events and task metrics, and counts refusals, turns and tool errors
as the processor does."""

from __future__ import annotations

import json
from typing import Any

from otel_loopguard import LoopGuardConfig
from otel_loopguard.conventions.span import SpanRecord

from ._support import Harness

S = 10**9
T0 = 1_767_225_600 * S
OUTCOME = "loopguard.outcome"
RESOURCE = {"service.name": "agent", "service.version": "2.3.1"}
#: By hand: the resource's release, the root agent span's version and configured prompt attribute, the first model
#: call's requested model (m1 starts at T0 + 0.5 s, m2 at T0 + 0.7 s).
VERSIONS = {"service.version": "2.3.1", "gen_ai.agent.version": "a-9", "langfuse.prompt.version": "prompt-4",
            "gen_ai.request.model": "m1"}


def _span(trace_id: int, span_id: int, parent: int | None, name: str, start: float, attrs: dict[str, Any], *,
          error: bool = False) -> SpanRecord:
    """A span of 0.1 s from T0 + ``start`` seconds (10 s for a root), with the agent's resource."""
    end = T0 + (10 * S if parent is None else int((start + 0.1) * S))
    return SpanRecord(trace_id, span_id, parent, name, T0 + int(start * S), end, attrs, RESOURCE,
                      status_error=error)


def _agent(trace_id: int, **attrs: Any) -> SpanRecord:
    """The trace's root agent span, from T0 to T0 + 10 s."""
    return _span(trace_id, 0x100, None, "invoke_agent planner", 0,
                 {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner", **attrs})


def _chat(trace_id: int, span_id: int, start: float, model: str, **attrs: Any) -> SpanRecord:
    """A model call without token usage."""
    return _span(trace_id, span_id, 0x100, f"chat {model}", start,
                 {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, **attrs})


def _tool(trace_id: int, i: int, tool: str = "search", *, error: bool = False) -> SpanRecord:
    """Tool call ``i`` at T0 + i + 1 s (failed, with error status and ``error.type``, when asked)."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
             "gen_ai.tool.call.arguments": '{"q": "x"}', "gen_ai.tool.call.result": "none"}
    if error:
        attrs["error.type"] = "TimeoutError"
    return _span(trace_id, 0x300 + i, 0x100, f"execute_tool {tool}", 1 + i, attrs, error=error)


def test_versions_on_events_and_task_metrics_whatever_the_order() -> None:
    """A looping trace sent in reverse start order: every verdict event and the task carry the versions of the
    earliest span that has each (m1, not the later m2)."""
    spans = [_agent(1, **{"gen_ai.agent.version": "a-9", "langfuse.prompt.version": "prompt-4"}),
             _chat(1, 0x200, 0.5, "m1"), _chat(1, 0x201, 0.7, "m2"), *(_tool(1, i) for i in range(4))]
    config = LoopGuardConfig(version_attributes=("langfuse.prompt.version",))
    with Harness(config, grpc_on=False, http_on=False) as h:
        h.server.ingest(list(reversed(spans)))
        h.server.finish_all()
        assert h.wait_reports(1)
        records = [r.log_record for r in h.logs.get_finished_logs() if r.log_record.event_name == "loopguard.verdict"]
        assert records
        for record in records:
            assert {key: (record.attributes or {}).get(key) for key in VERSIONS} == VERSIONS
        [outcome] = h.points("loopguard.task.outcomes")
        assert dict(outcome.attributes) == {OUTCOME: "stopped", "gen_ai.agent.name": "planner", **VERSIONS}
        assert h.reports[0].versions == tuple(sorted(VERSIONS.items()))


def test_turns_tool_errors_and_refusal_part() -> None:
    """Two model calls without usage (the second's GenAI output holds a refusal part) and three tool calls, one
    failed: a ``refused`` task of 2 turns, 3 tool calls and 1 tool error."""
    refusal = json.dumps([{"role": "assistant", "finish_reason": "stop",
                           "parts": [{"type": "refusal", "content": "I can't help with that."}]}])
    spans = [_agent(2), _chat(2, 0x200, 0.5, "m1"), _chat(2, 0x201, 5, "m1", **{"gen_ai.output.messages": refusal}),
             _tool(2, 0, "search"), _tool(2, 1, "fetch", error=True), _tool(2, 2, "read")]
    with Harness(grpc_on=False, http_on=False) as h:
        h.server.ingest(spans)
        h.server.finish_all()
        assert h.wait_reports(1)
        figures = {name: (point.attributes[OUTCOME], point.count, point.sum)
                   for name in ("loopguard.task.turns", "loopguard.task.tool_calls", "loopguard.task.tool_errors")
                   for point in h.points(name)}
        assert figures == {"loopguard.task.turns": ("refused", 1, 2), "loopguard.task.tool_calls": ("refused", 1, 3),
                           "loopguard.task.tool_errors": ("refused", 1, 1)}
