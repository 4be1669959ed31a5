"""The worker's shortcuts change no answer: tool calls counted once per drain, the last trace's slot reused."""

from __future__ import annotations

import gc

import pytest

from otel_loopguard import LoopGuardConfig
from otel_loopguard.core.judge import TraceJudge

from .conftest import HarnessFactory


@pytest.mark.parametrize("deferred", [True, False])
def test_tool_calls_counted_per_drain_are_all_reported(make_harness: HarnessFactory, deferred: bool) -> None:
    """Counts kept between drains reach the metric: 3 + 2 calls of two tools in two traces, read after each drain.

    Deferred, the worker hands its counts over at the end of a drain (``metrics()`` drains first); inline, each call
    is counted at once. Either way the totals are the calls made: search 3 then 5, fetch 2.
    """
    h = make_harness(deferred=deferred)
    first = h.agent()
    for q in ("a", "b", "c"):
        h.tool(first, tool="search", args={"q": q})
    assert h.total("loopguard.tool_calls", **{"gen_ai.tool.name": "search"}) == 3
    second = h.agent()
    h.tool(second, tool="fetch", args={"url": "x"})
    h.tool(first, tool="search", args={"q": "d"})  # the traces interleave: the reused slot changes hands
    h.tool(second, tool="fetch", args={"url": "y"})
    h.tool(first, tool="search", args={"q": "e"})
    assert h.total("loopguard.tool_calls", **{"gen_ai.tool.name": "search"}) == 5
    assert h.total("loopguard.tool_calls", **{"gen_ai.tool.name": "fetch"}) == 2


def test_a_released_trace_is_not_revived_by_the_reused_slot(make_harness: HarnessFactory) -> None:
    """A tool span of a trace whose root already ended starts a new record, as without the shortcut.

    Equal calls with equal results: the third shows a cycle of period 1 with three repetitions (min_repetitions 3,
    hysteresis 1), so it is stuck, and the fourth stays stuck. After the root ends the trace is released. A late fifth equal call of
    the same trace id must not land in the released judge (it would stay stuck there): the new record holds one
    call, so its verdict is ``working`` and one trace is tracked again.
    """
    h = make_harness(LoopGuardConfig())
    root = h.agent()
    trace_id = root.get_span_context().trace_id
    for _ in range(4):
        h.tool(root, args={"q": "same"})
    assert h.processor.verdict(trace_id).kind == "stuck"  # type: ignore[union-attr]
    h.end(root)
    assert h.processor.tracked_traces == 0
    h.tool(root, args={"q": "same"})  # a late child of the ended root: same trace id, parent no longer open
    verdict = h.processor.verdict(trace_id)
    assert verdict is not None and verdict.kind == "working"
    assert h.processor.tracked_traces == 1


def test_a_released_trace_leaves_no_judge_behind(make_harness: HarnessFactory) -> None:
    """After its root ends, nothing of a trace stays: no trace judge of this processor's engine is alive.

    (The reused slot of the last trace judged must go with the trace; otherwise one released trace per processor
    would stay in memory until the next trace arrives.)
    """
    h = make_harness()
    root = h.agent()
    h.tool(root, args={"q": "a"})
    h.tool(root, args={"q": "b"})
    engine = h.processor._engine

    def judges() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, TraceJudge) and o._engine is engine)

    h.processor.force_flush()
    assert judges() == 1
    h.end(root)
    h.processor.force_flush()
    assert h.processor.tracked_traces == 0
    assert judges() == 0
