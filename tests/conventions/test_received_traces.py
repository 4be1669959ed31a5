"""The received traces' lifecycle (``ReceivedTraces``): grouping by trace, reopening, eviction, peers, memory.

Spans are decoded ``SpanRecord`` values, as ``serve``'s receivers hand them over; ``serve``'s own table tests
(tests/serve/test_table.py) hold the same rules through the table's counters.
"""

from __future__ import annotations

import threading
from typing import Any

from otel_loopguard.conventions.received import TraceFinish
from otel_loopguard.conventions.received_traces import MAX_PEERS, HeldReceived, ReceivedTraces
from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine

S = 10**9
T0 = 1_767_225_600 * S
ROOT = 0xB7AD6B7169203331
BIG = 1 << 30


def tool_span(trace_id: int, span_id: int, at: float, args: str = '{"q": "x"}') -> SpanRecord:
    """An execute_tool span of ``search`` under the root, starting ``at`` seconds after T0, lasting 0.1 s."""
    start = T0 + int(at * S)
    return SpanRecord(trace_id, span_id, ROOT, "execute_tool search", start, start + S // 10, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": "none",
    })


def counts() -> dict[str, int]:
    """The counters ``ReceivedTraces`` adds to, all zero."""
    return dict.fromkeys(("spans", "late_spans", "evicted_traces", "inexact_traces"), 0)


def traces(max_traces: int = 100, max_kept_bytes: int = BIG) -> ReceivedTraces:
    """Received traces with the default configuration but ``max_traces``."""
    return ReceivedTraces(LoopEngine(LoopGuardConfig(max_traces=max_traces)), BIG, max_kept_bytes)


def steps(trace: HeldReceived, done: TraceFinish) -> tuple[int, int]:
    """What a finish made: the trace id and the calls its report judged."""
    return trace.trace_id, done.report.steps_used


def test_one_request_is_grouped_by_trace_and_counted() -> None:
    """Three spans of two traces in one request: two open traces, three spans, one report each with 2 and 1 calls."""
    received, seen = traces(), counts()
    _, evicted = received.take([tool_span(1, 10, 0), tool_span(2, 20, 0), tool_span(1, 11, 1, '{"q": "y"}')], 0.0,
                               seen)
    assert (len(received), seen["spans"], evicted) == (2, 3, [])
    assert [received.finish(t, "serve", steps) for t in received.pop_all()] == [(1, 2), (2, 1)]
    assert len(received) == 0


class _SignallingLock:
    """A trace's lock that signals when a thread asks for it (the test then knows the batch found its trace)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked = threading.Event()

    def acquire(self) -> bool:
        self.asked.set()
        return self.lock.acquire()

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def test_a_batch_that_found_its_trace_before_it_was_closed_reopens_it() -> None:
    """A batch finds trace 1 open, the trace is closed before the batch gets its lock: the batch reopens it, the
    closed trace's finish makes nothing, its spans are not late, and the next finish reports both calls."""
    received, seen = traces(), counts()
    received.take([tool_span(1, 10, 0)], 0.0, seen)
    [trace] = received.recent(1, lambda held: held)
    trace.lock = lock = _SignallingLock()  # type: ignore[assignment]
    with lock:
        lock.asked.clear()
        batch = threading.Thread(target=received.take, args=([tool_span(1, 11, 1, '{"q": "y"}')], 1.0, seen))
        batch.start()
        assert lock.asked.wait(60)
        [closed] = received.pop_all()
    batch.join(60)
    assert closed is trace
    assert received.finish(closed, "serve", steps) is None
    assert (len(received), seen["late_spans"]) == (1, 0)
    assert [received.finish(t, "serve", steps) for t in received.pop_all()] == [(1, 2)]


def test_a_late_batch_reopens_a_finished_trace_and_counts_its_spans() -> None:
    """Two spans sent after their trace finished are late (2); the trace's next finish reports all three calls."""
    received, seen = traces(), counts()
    received.take([tool_span(1, 10, 0)], 0.0, seen)
    [first] = [received.finish(t, "serve", steps) for t in received.pop_all()]
    received.take([tool_span(1, 11, 1, '{"q": "y"}'), tool_span(1, 12, 2, '{"q": "z"}')], 5.0, seen)
    assert (first, seen["late_spans"], len(received)) == ((1, 1), 2, 1)
    assert [received.finish(t, "serve", steps) for t in received.pop_all()] == [(1, 3)]


def test_traces_beyond_max_traces_are_evicted_least_recently_active_first() -> None:
    """max_traces=2 and traces 1, 2, 3 in turn: trace 1 is evicted (counted once), 2 and 3 stay open."""
    received, seen = traces(max_traces=2), counts()
    evicted = []
    for trace_id in (1, 2, 3):
        evicted += received.take([tool_span(trace_id, 10, 0)], float(trace_id), seen)[1]
    assert ([t.trace_id for t in evicted], seen["evicted_traces"], len(received)) == ([1], 1, 2)
    assert received.finish(evicted[0], "serve", steps) == (1, 1)


def test_idle_traces_are_closed_by_their_last_arrival() -> None:
    """Trace 1 last seen at 10 s and trace 2 at 50 s: with a horizon of 30 s only trace 1 is closed."""
    received, seen = traces(), counts()
    received.take([tool_span(1, 10, 0)], 10.0, seen)
    received.take([tool_span(2, 10, 0)], 50.0, seen)
    assert [t.trace_id for t in received.pop_idle(30.0)] == [1]
    assert len(received) == 1


def test_tenants_with_the_same_trace_id_hold_different_traces() -> None:
    """One trace id sent by tenants a and b is two traces, each with its own tenant and one call."""
    received, seen = traces(), counts()
    received.take([tool_span(1, 10, 0)], 0.0, seen, tenant="a")
    received.take([tool_span(1, 10, 0)], 0.0, seen, tenant="b")
    assert len(received) == 2
    assert sorted((t.tenant, received.finish(t, "serve", steps)) for t in received.pop_all()) == [
        ("a", (1, 1)), ("b", (1, 1))]


def test_senders_are_remembered_once_each_up_to_the_bound() -> None:
    """Twelve requests from ten senders (two repeated) keep the first eight senders, in order, each once."""
    received, seen = traces(), counts()
    senders = ["p0", "p0", *(f"p{i}" for i in range(1, 10)), "p1"]
    for i, peer in enumerate(senders):
        received.take([tool_span(1, 10 + i, i, f'{{"page": {i}}}')], float(i), seen, peer=peer)
    [trace] = received.pop_all()
    assert MAX_PEERS == 8
    assert trace.peers == [f"p{i}" for i in range(8)]


def test_steps_beyond_the_total_budget_are_given_up() -> None:
    """With no bytes allowed for kept steps, the one trace keeping steps gives them up: one trace, nothing kept."""
    received, seen = traces(max_kept_bytes=0), counts()
    received.take([tool_span(1, 10, 0), tool_span(1, 11, 1, '{"q": "y"}')], 0.0, seen)
    assert received.kept_bytes > 0
    assert (received.trim_kept(), received.kept_bytes) == (1, 0)
    assert received.trim_kept() == 0


def test_recent_views_the_most_recently_active_open_traces_oldest_first() -> None:
    """Traces 1, 2, 3 arrive in turn and 1 again: the two most recent are 3 then 1."""
    received, seen = traces(), counts()
    for trace_id, at in ((1, 0.0), (2, 1.0), (3, 2.0), (1, 3.0)):
        received.take([tool_span(trace_id, 10 + int(at), at, f'{{"n": {at}}}')], at, seen)
    assert received.recent(2, lambda trace: trace.trace_id) == [3, 1]
