"""Bounded memory with default limits: trace states, open-span bookkeeping and one long trace's state stop
growing once their limits are reached; every trace that never ends is accounted for by an eviction.

The long runs (one million traces, one million calls in a trace, with RSS and tracemalloc tables) are in
``tests/benchmarks/memory.py``.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import Span

from otel_loopguard import LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.core.engine import TraceState
from tests.reliability.conftest import KEY, build_pipeline, settle
from tests.reliability.load import TraceLoad, deep_size, live_counts, one_trace_calls

MAX_TRACES = LoopGuardConfig().max_traces  # the default (10 000): the test must exercise the shipped limit


def test_twenty_thousand_traces_with_abandoned_roots_stay_within_max_traces() -> None:
    """20k traces, three in four of whose roots never end, with a clock jump past the TTL: tracked states and live
    span objects never exceed ``max_traces``, both eviction reasons are counted, and every abandoned trace is
    either evicted or still tracked."""
    pipeline = build_pipeline(export_spans=False)  # the default limits; only the signature key is fixed
    processor = pipeline.processor
    assert processor.config.max_traces == MAX_TRACES
    load = TraceLoad(pipeline.provider.get_tracer("memory"), end_every=4, ttl_jump_every=15_000)

    # Live objects are counted against what the process held before (other test modules may keep some alive).
    states_before, spans_before = live_counts(TraceState, Span)
    checkpoints = []
    for _ in range(4):
        load.run(5_000)
        settle(processor)
        states, spans = live_counts(TraceState, Span)
        checkpoints.append((processor.tracked_traces, states - states_before, spans - spans_before))

    for tracked, states, spans in checkpoints:
        assert tracked <= MAX_TRACES
        assert states <= MAX_TRACES
        # Open roots are remembered (bounded by the same limit); every ended span is released.
        assert spans <= MAX_TRACES + 1
    # The store did fill up (the limit was exercised): full, less the traces whose root's end the worker judged
    # after the application thread had already marked newer traces (at most the queue's lag, a few hundred).
    assert max(c[1] for c in checkpoints) > MAX_TRACES - 1000
    abandoned = load.done - (load.done + 3) // 4
    capacity = pipeline.metric_total("loopguard.traces.evicted", **{"loopguard.eviction.reason": "capacity"})
    idle = pipeline.metric_total("loopguard.traces.evicted", **{"loopguard.eviction.reason": "idle"})
    assert capacity > 0 and idle > 0
    assert capacity + idle + processor.tracked_traces == abandoned
    assert processor.errors == 0
    pipeline.shutdown()


def test_one_trace_of_sixty_thousand_calls_keeps_its_state_bounded_by_the_window() -> None:
    """A single trace's state measures the same after 60k calls (loops mixed with fresh calls) as after 1k."""
    engine = LoopEngine(LoopGuardConfig(signature_key=KEY))
    state = engine.new_state()

    def call(i: int) -> ToolCall:
        args = '{"q": "poll"}' if (i // 30) % 3 == 0 else f'{{"q": "item {i}"}}'
        return ToolCall("fetch", args, True, f"r{i % 5}", True, start=float(i), end=i + 0.5)

    sizes = {}
    for i in range(60_000):
        engine.observe(state, call(i))
        if i + 1 in (1_000, 10_000, 60_000):
            sizes[i + 1] = deep_size(state)
    assert state.steps == 60_000
    # Verdict objects and digests vary a little from call to call; a few hundred bytes, never per-call growth.
    assert sizes[60_000] <= sizes[1_000] + 2_048, sizes
    assert sizes[10_000] <= sizes[1_000] + 2_048, sizes


def test_one_long_trace_through_the_processor_keeps_process_objects_bounded() -> None:
    """Ten thousand tool spans in one open trace leave no span objects behind and keep one trace state."""
    # Counted against what the process held before: objects another test module keeps alive for the whole
    # session (a module-level engine state, say) are not this pipeline's.
    states_before, spans_before = live_counts(TraceState, Span)
    pipeline = build_pipeline(export_spans=False)
    tracer = pipeline.provider.get_tracer("long")
    one_trace_calls(tracer, 10_000)
    settle(pipeline.processor)
    assert pipeline.processor.tracked_traces == 1
    states, spans = live_counts(TraceState, Span)
    assert states - states_before == 1
    assert spans - spans_before <= 1  # only the open root
    assert pipeline.metric_total("loopguard.tool_calls") == 10_000
    pipeline.shutdown()
