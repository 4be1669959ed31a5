"""One agent-attribution rule live: a call is named after the innermost agent span whose time holds the call's end
(``TraceRecord.agent_at``, as ``serve`` names it), also when the agent span's end was processed first.

Expected figures by hand: five identical calls with the same result are stuck at the third (a nudge) and stopped at
the fourth (default configuration), so two verdict events.
"""

from __future__ import annotations

from typing import Any

from tests.processor.conftest import Harness, HarnessFactory

SECOND = 1_000_000_000


def _calls_ending_at(harness: Harness, parent: Any, first: int, ended_first: Any, ended_at: int) -> None:
    """Five identical tool spans under ``parent``, started now; ``ended_first`` ends at ``ended_at`` before them, then
    they end at ``first`` + 0..4 s."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
             "gen_ai.tool.call.arguments": '{"query": "weather in Paris"}', "gen_ai.tool.call.result": "sunny, 21C"}
    calls = [harness.start("execute_tool search", attrs, parent) for _ in range(5)]
    ended_first.end(end_time=ended_at)
    for i, span in enumerate(calls):
        span.end(end_time=first + i * SECOND)


def test_a_call_ending_inside_an_agent_span_that_ended_first_is_named_after_it(make_harness: HarnessFactory) -> None:
    """The agent span (under a plain root) ends at +100 s before its five calls end at +10..+14 s: each call's end
    lies in its time, so both events name it (the open-span rule named none: the agent span was gone)."""
    harness = make_harness(deferred=False)
    root = harness.start("POST /run", None)
    agent = harness.agent("planner", root)
    start = harness.clock.now
    _calls_ending_at(harness, agent, start + 10 * SECOND, agent, start + 100 * SECOND)
    root.end(end_time=start + 200 * SECOND)
    events = harness.events
    assert [e.intervention.action for e in events if e.intervention] == ["nudge", "stop"]
    assert [e.agent for e in events] == ["planner", "planner"]


def test_a_call_ending_after_the_inner_agent_span_is_named_after_the_outer(make_harness: HarnessFactory) -> None:
    """Inner agent span from +1 s to +2 s inside an open outer one; calls ending at +10..+14 s lie only in the
    outer's time, so the events name the outer, although the inner started last."""
    harness = make_harness(deferred=False)
    outer = harness.agent("coordinator")
    inner = harness.agent("researcher", outer)
    start = harness.clock.now
    _calls_ending_at(harness, outer, start + 10 * SECOND, inner, start + 2 * SECOND)
    outer.end(end_time=start + 100 * SECOND)
    assert [e.agent for e in harness.events] == ["coordinator", "coordinator"]
