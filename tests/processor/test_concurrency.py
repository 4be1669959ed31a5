"""Many threads ending tool spans of interleaved traces at once get exactly the single-threaded verdicts."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from opentelemetry.trace import set_span_in_context

from otel_loopguard import VerdictEvent
from tests.processor.conftest import SECOND, T0, Harness, HarnessFactory
from tests.support.threads import run_threads

THREADS = 16
TRACES_PER_THREAD = 160
JOIN_TIMEOUT = 60.0

A = ("search", '{"q": "a"}', "ra")
B = ("read", '{"doc": "d1"}', "rb")
PATTERNS: dict[str, list[tuple[str, str, str]]] = {
    "same_call": [A] * 5,
    "ping_pong": [A, B] * 3,
    "healthy": [("t1", "{}", "1"), ("t2", "{}", "2"), ("t3", "{}", "3"), ("t4", "{}", "4")],
    "recovers": [A, A, A, B, ("t5", "{}", "5")],
    "progress": [("fetch", '{"c": 1}', f"page {i}") for i in range(5)],
}
NAMES = sorted(PATTERNS)


def _summary(event: VerdictEvent) -> tuple[Any, ...]:
    return (event.verdict.kind, event.verdict.rule, event.transition is not None,
            event.intervention.action if event.intervention else None, event.steps)


def _tool(h: Harness, agent: Any, step: int, call: tuple[str, str, str]) -> None:
    tool, args, result = call
    start = T0 + step * SECOND
    span = h.tracer.start_span(
        f"execute_tool {tool}", context=set_span_in_context(agent), start_time=start,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result},
    )
    span.end(end_time=start + SECOND // 2)


def _agent(h: Harness) -> Any:
    return h.tracer.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "a"}, start_time=T0)


def _recorder(h: Harness) -> dict[int, list[tuple[Any, ...]]]:
    by_trace: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    lock = threading.Lock()

    def record(event: VerdictEvent) -> None:
        with lock:
            by_trace[event.trace_id].append(_summary(event))

    h.processor.add_listener(record)
    return by_trace


def _reference(make_harness: HarnessFactory) -> dict[str, list[tuple[Any, ...]]]:
    h = make_harness()
    by_trace = _recorder(h)
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name in NAMES:
        agent = _agent(h)
        for step, call in enumerate(PATTERNS[name]):
            _tool(h, agent, step, call)
        agent.end(end_time=T0 + 100 * SECOND)
        h.processor.force_flush()  # judge what the background thread has not reached yet
        out[name] = by_trace.get(agent.get_span_context().trace_id, [])
    return out


def test_threads_give_single_threaded_verdicts(make_harness: HarnessFactory) -> None:
    """16 threads released by a barrier interleave 2560 traces; each trace's events equal the single-threaded ones."""
    reference = _reference(make_harness)
    assert reference["same_call"] and reference["ping_pong"] and reference["healthy"] == []
    h = make_harness()
    by_trace = _recorder(h)
    barrier = threading.Barrier(THREADS)
    pattern_of: dict[int, str] = {}
    pattern_lock = threading.Lock()
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            names = [NAMES[(worker + i) % len(NAMES)] for i in range(TRACES_PER_THREAD)]
            barrier.wait(timeout=JOIN_TIMEOUT)
            agents = [_agent(h) for _ in names]
            with pattern_lock:
                for agent, name in zip(agents, names):
                    pattern_of[agent.get_span_context().trace_id] = name
            # Round-robin over this thread's traces, so every trace's calls interleave with others everywhere.
            for step in range(max(len(p) for p in PATTERNS.values())):
                for agent, name in zip(agents, names):
                    if step < len(PATTERNS[name]):
                        _tool(h, agent, step, PATTERNS[name][step])
            for agent in agents:
                agent.end(end_time=T0 + 100 * SECOND)
        except BaseException as exc:
            failures.append(exc)

    run_threads(work, THREADS, JOIN_TIMEOUT)
    assert failures == []
    h.processor.force_flush()

    assert len(pattern_of) == THREADS * TRACES_PER_THREAD
    mismatched = {tid: (name, by_trace.get(tid, [])) for tid, name in pattern_of.items()
                  if by_trace.get(tid, []) != reference[name]}
    assert mismatched == {}
    assert set(by_trace) <= set(pattern_of)
    assert h.processor.errors == 0
    assert h.processor.tracked_traces == 0
    calls = sum(len(PATTERNS[name]) for name in pattern_of.values())
    assert h.total("loopguard.tool_calls") == calls
    assert h.total("loopguard.traces.active") == 0
    stops = sum(1 for events in by_trace.values() for e in events if e[3] == "stop")
    assert h.total("loopguard.interventions", **{"loopguard.intervention": "stop"}) == stops > 0
    assert len(h.verdict_records()) == sum(len(v) for v in by_trace.values())
