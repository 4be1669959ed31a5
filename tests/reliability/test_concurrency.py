"""Many threads, and many asyncio tasks, ending tool spans of thousands of interleaved traces at once: every trace
gets exactly the verdict events a single-threaded replay of it gets, and no tool call is lost."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from otel_loopguard import VerdictEvent
from tests.reliability.conftest import SECOND, T0, TOOL, Pipeline, build_pipeline, settle
from tests.support.threads import run_threads

TRACES = 2_000
CALLS = 12
THREADS = 8
JOIN_TIMEOUT = 60.0

Record = tuple[Any, ...]


def calls_of(label: int) -> list[dict[str, Any]]:
    """The tool calls of trace ``label``: four shapes (stuck at once, always new, a 2-cycle, progress then stuck)."""
    shape = label % 4
    out = []
    for step in range(CALLS):
        if shape == 0:
            args, result = '{"q": "same"}', "nothing"
        elif shape == 1:
            args, result = f'{{"q": "page {step}"}}', f"result {step}"
        elif shape == 2:
            args, result = f'{{"q": "{"ab"[step % 2]}"}}', "none"
        else:
            args, result = '{"q": "poll"}', f"row {min(step, 6)}"
        out.append({**TOOL, "gen_ai.tool.name": f"tool{label % 7}",
                    "gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result})
    return out


def record(event: VerdictEvent) -> Record:
    """What must match between runs: verdict, transition, intervention, step count and signature digest."""
    return (
        event.verdict.kind, event.verdict.rule, event.transition.previous if event.transition else None,
        event.intervention.action if event.intervention else None, event.steps, event.signature_digest,
    )


class Recorder:
    """Per-trace verdict sequences, keyed by the test's trace label rather than the random trace id."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.labels: dict[int, int] = {}
        self.by_label: dict[int, list[Record]] = defaultdict(list)
        pipeline.processor.add_listener(self)

    def __call__(self, event: VerdictEvent) -> None:
        self.by_label[self.labels[event.trace_id]].append(record(event))


def start_root(tracer: Tracer, recorder: Recorder, label: int) -> Span:
    """Open the root span of trace ``label`` and remember its trace id."""
    root = tracer.start_span(f"agent run {label}", start_time=T0)
    recorder.labels[root.get_span_context().trace_id] = label
    return root


def end_tool(tracer: Tracer, root: Span, attributes: dict[str, Any], step: int) -> None:
    """End one tool span under ``root`` with explicit times (one second per step)."""
    span = tracer.start_span("execute_tool", context=trace.set_span_in_context(root), attributes=attributes,
                             start_time=T0 + step * SECOND)
    span.end(end_time=T0 + step * SECOND + SECOND // 2)


def replay_single_threaded(labels: range) -> dict[int, list[Record]]:
    """Each trace alone, one after another, on this thread: the reference verdict sequences."""
    pipeline = build_pipeline(export_spans=False)
    recorder = Recorder(pipeline)
    tracer = pipeline.provider.get_tracer("reference")
    for label in labels:
        root = start_root(tracer, recorder, label)
        for step, attributes in enumerate(calls_of(label)):
            end_tool(tracer, root, attributes, step)
        root.end(end_time=T0 + CALLS * SECOND)
    settle(pipeline.processor)
    pipeline.shutdown()
    return dict(recorder.by_label)


REFERENCE: dict[int, list[Record]] = {}


def reference() -> dict[int, list[Record]]:
    """The single-threaded replay, computed once per session."""
    if not REFERENCE:
        REFERENCE.update(replay_single_threaded(range(TRACES)))
    return REFERENCE


def test_threads_interleaving_thousands_of_traces_match_a_single_threaded_replay() -> None:
    """Eight threads released by a barrier, each interleaving its 250 traces call by call, produce per-trace
    verdict sequences equal to the single-threaded replay, and the tool-call metric counts every span."""
    pipeline = build_pipeline(export_spans=False)
    recorder = Recorder(pipeline)
    tracer = pipeline.provider.get_tracer("threads")
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            mine = range(index, TRACES, THREADS)
            barrier.wait(timeout=JOIN_TIMEOUT)
            roots = {label: start_root(tracer, recorder, label) for label in mine}
            plans = {label: calls_of(label) for label in mine}
            for step in range(CALLS):
                for label in mine:
                    end_tool(tracer, roots[label], plans[label][step], step)
            for root in roots.values():
                root.end(end_time=T0 + CALLS * SECOND)
        except BaseException as exc:
            failures.append(exc)

    run_threads(worker, THREADS, JOIN_TIMEOUT)
    assert not failures, failures
    settle(pipeline.processor)

    expected = reference()
    assert dict(recorder.by_label) == expected
    assert sum(len(v) for v in expected.values()) > TRACES  # the shapes do produce transitions
    assert pipeline.metric_total("loopguard.tool_calls") == TRACES * CALLS
    assert pipeline.processor.errors == 0
    assert pipeline.processor.tracked_traces == 0
    pipeline.shutdown()


def test_asyncio_tasks_interleaving_thousands_of_traces_match_a_single_threaded_replay() -> None:
    """Two hundred tasks on one event loop, yielding between tool spans, produce the same per-trace verdict
    sequences as the single-threaded replay, and no tool call is lost."""
    pipeline = build_pipeline(export_spans=False)
    recorder = Recorder(pipeline)
    tracer = pipeline.provider.get_tracer("asyncio")
    tasks = 200

    async def agent(index: int) -> None:
        mine = range(index, TRACES, tasks)
        for label in mine:
            root = start_root(tracer, recorder, label)
            for step, attributes in enumerate(calls_of(label)):
                end_tool(tracer, root, attributes, step)
                await asyncio.sleep(0)  # hand the loop to the other agents between tool calls
            root.end(end_time=T0 + CALLS * SECOND)

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(agent(i) for i in range(tasks))), JOIN_TIMEOUT)

    asyncio.run(main())
    settle(pipeline.processor)
    assert dict(recorder.by_label) == reference()
    assert pipeline.metric_total("loopguard.tool_calls") == TRACES * CALLS
    assert pipeline.processor.errors == 0
    pipeline.shutdown()


def test_threads_sharing_one_trace_lose_no_update() -> None:
    """Eight threads ending 500 tool spans each under one shared root: the finished trace counts all 4000 steps."""
    pipeline = build_pipeline(export_spans=False)
    tracer = pipeline.provider.get_tracer("shared")
    root = tracer.start_span("root", start_time=T0)
    barrier = threading.Barrier(THREADS)
    per_thread = 500

    def worker(index: int) -> None:
        barrier.wait(timeout=JOIN_TIMEOUT)
        for step in range(per_thread):
            end_tool(tracer, root, {**TOOL, "gen_ai.tool.name": "search",
                                    "gen_ai.tool.call.arguments": f'{{"t": {index}, "s": {step}}}',
                                    "gen_ai.tool.call.result": "r"}, step)

    run_threads(worker, THREADS, JOIN_TIMEOUT)
    root.end(end_time=T0 + per_thread * SECOND)
    assert pipeline.metric_total("loopguard.tool_calls") == THREADS * per_thread
    data = pipeline.reader.get_metrics_data()
    steps = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
             if m.name == "loopguard.trace.steps" for p in m.data.data_points]
    assert [(p.count, p.sum) for p in steps] == [(1, THREADS * per_thread)]
    pipeline.shutdown()
