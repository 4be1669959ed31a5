"""The processor's per-trace record, its worker and its costs: what survives a root's end, a listener calling
``sys.exit``, abandoned agent spans, and model usage without a price.

Default configuration: three identical calls with the same result are stuck (nudge) at the third, and the fourth
is stopped.
"""

from __future__ import annotations

import gc
import threading

from opentelemetry.sdk.trace import Span

from otel_loopguard import LoopGuardConfig, VerdictEvent
from otel_loopguard.sdk.worker import DeferredWork
from tests.processor.conftest import Harness, HarnessFactory


def _live_spans() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Span))


def test_a_listener_calling_sys_exit_is_counted_and_the_worker_goes_on(make_harness: HarnessFactory) -> None:
    """A listener raising SystemExit on the background thread is counted; later spans are still judged there."""
    h = make_harness()
    worker_events: list[VerdictEvent] = []
    second = threading.Event()

    def listener(event: VerdictEvent) -> None:
        worker_events.append(event)
        if len(worker_events) == 1:
            raise SystemExit(3)
        second.set()

    h.processor.add_listener(listener)
    agent = h.agent()
    for _ in range(3):  # the third call: stuck + nudge -> the listener exits
        h.tool(agent)
    h.tool(agent)  # the fourth: stop, told to the listener by the background thread (no drain here)
    assert second.wait(30), "the background thread stopped judging after the listener's SystemExit"
    assert h.processor.errors == 1
    assert h.metrics()["loopguard.processor.errors"]["points"] == [
        {"attributes": {"error.type": "SystemExit"}, "value": 1}]


def test_the_worker_survives_any_exception_an_item_raises() -> None:
    """An item whose processing raises a BaseException is reported, and the next items are still processed by the
    background thread."""
    reported: list[BaseException] = []
    done = threading.Event()

    class Fatal(BaseException):
        pass

    def process(item: int) -> None:
        if item == 0:
            raise Fatal("boom")
        if item == 2:
            done.set()

    work = DeferredWork(process, 100, lambda: None, interval=0.01, on_error=reported.append)
    try:
        for item in range(3):
            work.submit(item)
        assert done.wait(30), "items after the failure were not processed by the background thread"
        assert [type(e).__name__ for e in reported] == ["Fatal"]
    finally:
        work.shutdown()


def test_verdict_and_stop_outlive_the_root(harness: Harness) -> None:
    """After the root ends, verdict() answers the last verdict and check() still says stop."""
    h = harness
    agent = h.agent()
    trace_id = agent.get_span_context().trace_id
    for _ in range(4):
        h.tool(agent)
    h.end(agent)
    verdict = h.processor.verdict(trace_id)
    assert verdict is not None and (verdict.kind, verdict.rule, verdict.period) == ("stuck", "period", 1)
    assert h.processor.check(trace_id).action == "stop"
    assert h.processor.tracked_traces == 0


def test_abandoned_agent_spans_are_not_kept_alive(harness: Harness) -> None:
    """Agent spans that start and are never ended nor referenced are freed: the record holds them weakly."""
    h = harness
    root = h.agent("root")
    h.tool(root)
    before = _live_spans()
    for i in range(200):
        h.agent(f"sub{i}", parent=root)  # started, never ended, dropped at once
    h.processor.force_flush()
    # Each sub-agent span is gone as soon as nothing but loopguard's record refers to it.
    assert _live_spans() <= before + 1
    h.tool(root)
    h.end(root)
    assert h.processor.errors == 0


def test_unpriced_model_usage_is_not_recorded_as_zero_cost(make_harness: HarnessFactory) -> None:
    """A trace whose only model has no price records no loopguard.trace.cost point (not $0); usage of a priced
    model records its cost."""
    from otel_loopguard import Prices

    h = make_harness(LoopGuardConfig(prices={"priced": Prices(input=2.0, output=0.0)}))
    for model in ("unknown-model", "priced"):
        agent = h.agent()
        chat = h.start(f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                                         "gen_ai.usage.input_tokens": 500_000, "gen_ai.usage.output_tokens": 0},
                       agent)
        chat.end(end_time=h.clock.tick())
        h.tool(agent)
        h.end(agent)
    [point] = h.metrics()["loopguard.trace.cost"]["points"]
    # One trace recorded: the priced one, 500k input tokens at $2 per million.
    assert (point["count"], point["sum"]) == (1, 1.0)
