"""serve's trace table: idempotent deliveries, bounded memory and re-judging, per-trace locks, known costs only.

Spans are built as decoded ``SpanRecord`` values and given to ``TraceTable.add`` (what both receivers call), so
these tests hold whatever server runs around the table. Default configuration unless said: three identical calls
with the same result are stuck at the third (nudge), the fourth is stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine, TraceState
from otel_loopguard.core.model import Observation, ToolCall
from otel_loopguard.serve.server import Server
from otel_loopguard.serve.table import TraceTable

S = 10**9
T0 = 1_767_225_600 * S
TRACE = 0x0AF7651916CD43DD8448EB211C80319C
ROOT = 0xB7AD6B7169203331


def tool_span(span_id: int, at: float, tool: str = "search", args: str = '{"q": "x"}', result: str = "none",
              trace_id: int = TRACE) -> SpanRecord:
    """An execute_tool span under the root, starting ``at`` seconds after T0, lasting 0.1 s."""
    start = T0 + int(at * S)
    return SpanRecord(trace_id, span_id, ROOT, f"execute_tool {tool}", start, start + S // 10, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result,
    })


def chat_span(span_id: int, at: float, model: str, tokens: int) -> SpanRecord:
    start = T0 + int(at * S)
    return SpanRecord(TRACE, span_id, ROOT, f"chat {model}", start, start + S // 10, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 0,
    })


def healthy(n: int = 6) -> list[SpanRecord]:
    """``n`` calls of one tool with different arguments: working throughout."""
    return [tool_span(10 + i, i, args=f'{{"page": {i}}}') for i in range(n)]


def test_the_same_export_delivered_twice_keeps_a_healthy_trace_healthy() -> None:
    """A retried export (at-least-once delivery) counts each span once: no stuck, no stop, duplicates counted."""
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30)
    batch = healthy(3)
    events = []
    for _ in range(3):  # the export and two retries
        events += table.add(batch, now=0)[0]
    more, [finished] = table.finish_all()
    stats = table.stats()
    # Three distinct calls: no repetition, so no event at all; 6 of the 9 deliveries were duplicates.
    assert events + more == []
    assert (stats.tool_calls, stats.duplicate_spans) == (3, 6)
    assert (finished.report.verdict.kind, finished.report.steps_used, finished.report.duplicates) == ("working", 3, 6)


def test_a_duplicate_after_the_trace_finished_is_recognised_and_not_published_again() -> None:
    """A span re-sent after its trace finished (within the remembered traces) is a duplicate: nothing changes."""
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30)
    table.add(healthy(3), now=0)
    _, first = table.finish_all()
    assert [f.report.steps_used for f in first] == [3]
    events, tools, finished, started = table.add(healthy(3)[:1], now=1)
    assert (events, tools, finished, started) == ([], [], [], [])
    assert table.finish_all() == ([], [])
    stats = table.stats()
    assert (stats.duplicate_spans, stats.late_spans, stats.finished_traces) == (1, 1, 1)


def test_finished_traces_are_remembered_up_to_max_traces_the_oldest_forgotten() -> None:
    """With max_traces=2, traces 1, 2, 3 finished in turn: 1 is forgotten (its later span starts a new trace of one
    call, not late), 3 is remembered (its later span continues it: late, two calls)."""
    table = TraceTable(LoopEngine(LoopGuardConfig(max_traces=2)), idle=30)
    for trace_id in (1, 2, 3):
        table.add([tool_span(10, 0, trace_id=trace_id)], now=0)
        table.finish_all()
    table.add([tool_span(11, 1, args='{"q": "y"}', trace_id=1)], now=1)
    assert table.stats().late_spans == 0
    table.add([tool_span(11, 1, args='{"q": "y"}', trace_id=3)], now=1)
    assert table.stats().late_spans == 1
    _, finished = table.finish_all()
    assert [(f.report.trace_id, f.report.steps_used) for f in finished] == [(f"{1:032x}", 1), (f"{3:032x}", 2)]
    assert table.stats().finished_traces == 5


class _CountingEngine(LoopEngine):
    """The real engine, counting the calls it judges."""

    observed = 0

    def observe(self, state: TraceState, call: ToolCall, now: float | None = None) -> Observation:
        type(self).observed += 1
        return super().observe(state, call, now)


def test_an_out_of_order_span_is_not_a_rejudge_of_the_whole_trace() -> None:
    """1000 calls in order, then 20 single spans that start earlier: 1020 judgements on arrival (not ~21 000),
    and one exact re-judge of 1020 calls when the trace finishes."""
    _CountingEngine.observed = 0
    table = TraceTable(_CountingEngine(LoopGuardConfig(max_steps=10_000)), idle=30)
    calls = healthy(1040)
    late, in_order = calls[:20], calls[20:]
    table.add(in_order, now=0)
    for span in late:
        table.add([span], now=1)
    assert _CountingEngine.observed == 1040
    assert table.stats().reordered_traces == 1
    _, [finished] = table.finish_all()
    assert _CountingEngine.observed == 2 * 1040
    assert finished.report.steps_used == 1040 and table.stats().rejudged_traces == 1


def test_a_late_span_makes_the_events_provisional_until_the_exact_judgement() -> None:
    """Events decided after an out-of-order arrival say provisional; the finish's exact events do not."""
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30)
    loop = [tool_span(10 + i, 2 * i) for i in range(4)]  # identical searches at 0, 2, 4, 6 s
    other = tool_span(30, 1, tool="read", args='{"doc": 1}', result="the doc")  # starts at 1 s, sent last
    live = table.add(loop, now=0)[0] + table.add([other], now=1)[0]
    final = table.finish_all()[0]
    # Live: stuck and nudged at call 3 (index 2), stopped at index 3, then `other` (index 4), with a new result,
    # makes it working:
    # that last one is provisional. Exact (a other b c d): stuck by frequency and nudged at index 3, stopped at 4.
    assert [(e.steps, e.provisional) for e in live] == [(3, False), (4, False), (5, True)]
    assert [(e.steps, e.verdict.kind, e.provisional) for e in final] == [(4, "stuck", False), (5, "stuck", False)]


def test_traces_are_judged_under_their_own_locks() -> None:
    """While one trace's judging is blocked, another trace's spans are taken and judged."""
    entered, release = threading.Event(), threading.Event()
    blocked_trace = TRACE + 1

    class BlockingEngine(LoopEngine):
        def observe(self, state: TraceState, call: ToolCall, now: float | None = None) -> Observation:
            if call.tool == "slow":
                entered.set()
                release.wait(60)
            return super().observe(state, call, now)

    table = TraceTable(BlockingEngine(LoopGuardConfig()), idle=30)
    slow = threading.Thread(target=table.add, args=([tool_span(1, 0, tool="slow", trace_id=blocked_trace)], 0))
    slow.start()
    try:
        assert entered.wait(60)
        done = threading.Event()
        other = threading.Thread(target=lambda: (table.add(healthy(3), 0), done.set()))
        other.start()
        # With one lock for the whole table this would wait for the blocked trace (60 s) and fail.
        assert done.wait(30), "another trace waited for the blocked one"
        assert table.stats().tool_calls == 3
    finally:
        release.set()
        slow.join()
    other.join()


def test_memory_per_trace_stays_bounded_with_huge_distinct_arguments() -> None:
    """150 calls with distinct 1 MB arguments in one trace grow the process by less than 150 MiB (a subprocess,
    current RSS from /proc): kept arguments over max_argument_bytes are digests, nothing keeps the raw text."""
    code = textwrap.dedent("""
        import gc
        from otel_loopguard.conventions.span import SpanRecord
        from otel_loopguard.core.config import LoopGuardConfig
        from otel_loopguard.core.engine import LoopEngine
        from otel_loopguard.serve.table import TraceTable

        def rss():
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * 4096

        table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30)
        gc.collect()
        before = rss()
        for i in range(150):
            args = '{"blob": "' + str(i) * (1 << 20) + '"}'
            span = SpanRecord(7, i + 1, 99, "execute_tool put", 10**18 + i * 10**9, 10**18 + i * 10**9 + 1, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "put",
                "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": "ok"})
            table.add([span], now=0)
            del span, args
        gc.collect()
        print((rss() - before) / 2**20)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONMALLOC": "malloc"})
    grown = float(done.stdout.strip())
    # Before this bound every argument was kept (150 MiB) and parsed for the step audit (as much again).
    assert grown < 150, grown


def test_unpriced_model_usage_is_not_recorded_as_zero_cost() -> None:
    """A trace whose model has no price gets no loopguard.trace.cost point; a priced one gets its cost."""
    from otel_loopguard.core.config import Prices

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    config = LoopGuardConfig(prices={"priced": Prices(input=1.0, output=1.0)})
    server = Server(config, grpc_address=None, http_address=None, meter_provider=provider)
    server.ingest([chat_span(1, 0, "unknown-model", 1000), tool_span(2, 1)])
    server.finish_all()
    assert _cost_points(reader) == []
    server.ingest([SpanRecord(TRACE + 5, 1, None, "chat", T0, T0 + 1, {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "priced",
        "gen_ai.usage.input_tokens": 1_000_000, "gen_ai.usage.output_tokens": 0})])
    server.finish_all()
    # 1M input tokens at $1 per million.
    assert _cost_points(reader) == [(1, 1.0)]
    provider.shutdown()


def _cost_points(reader: InMemoryMetricReader) -> list[Any]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [(p.count, p.sum) for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == "loopguard.trace.cost" for p in m.data.data_points if p.count]


def test_kept_steps_are_bounded_by_bytes_and_counted() -> None:
    """Beyond the per-trace budget a trace gives up its kept steps (counted), and a late span makes it partial."""
    table = TraceTable(LoopEngine(LoopGuardConfig(max_steps=10_000)), idle=30, max_trace_bytes=64 * 1024)
    calls = healthy(400)  # ~500 bytes each kept: about 200 kB, over the 64 kB budget
    table.add(calls[1:], now=0)
    stats = table.stats()
    assert stats.inexact_traces == 1 and stats.kept_bytes == 0
    table.add(calls[:1], now=1)
    _, [finished] = table.finish_all()
    assert finished.report.partial is True and finished.report.steps_used == 400


def test_all_traces_together_keep_at_most_the_global_budget() -> None:
    """Ten open traces of 30 calls (about 15 kB of kept steps each) under a 64 kB budget for all: the oldest give
    theirs up (counted) until the rest fit, and the newest traces still keep theirs."""
    table = TraceTable(LoopEngine(LoopGuardConfig()), idle=30, max_kept_bytes=64 * 1024)
    for t in range(10):
        spans = [tool_span(100 * t + i, t * 100 + i, args=f'{{"page": {i}}}', trace_id=TRACE + t) for i in range(30)]
        table.add(spans, now=t)
    stats = table.stats()
    assert 0 < stats.kept_bytes <= 64 * 1024
    # Each trace keeps, by the estimate, 480 bytes per step plus its arguments ('{"page": 0}' ... 11 characters for
    # pages 0-9, 12 for 10-29) and result ("none", 4): 30 * 484 + 10 * 11 + 20 * 12 = 14 870 bytes. 65 536 bytes
    # hold four such traces, so six gave theirs up.
    assert stats.inexact_traces == 6
