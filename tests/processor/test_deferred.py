"""Deferred judging: hooks only queue, a background thread judges, and every query drains the queue first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

from otel_loopguard import LoopGuardConfig, VerdictEvent
from tests.processor.conftest import HarnessFactory

WAIT = 60.0  # a deadline: every wait returns as soon as its event is set


def test_check_sees_the_latest_call_at_once(make_harness: HarnessFactory) -> None:
    """A harness asking right after the third identical call gets the nudge, whatever the thread is doing."""
    h = make_harness()
    agent = h.agent()
    for _ in range(3):
        h.tool(agent)
    nudge = h.processor.check(agent.get_span_context().trace_id)
    assert (nudge.action, nudge.step) == ("nudge", 2)


def test_background_thread_judges_without_being_asked(make_harness: HarnessFactory) -> None:
    """With nobody draining, the background thread still judges the loop and calls the listener."""
    h = make_harness()
    seen = threading.Event()
    threads: list[str] = []

    def listener(event: VerdictEvent) -> None:
        threads.append(threading.current_thread().name)
        seen.set()

    h.processor.add_listener(listener)
    agent = h.agent()
    for _ in range(3):
        h.tool(agent)
    assert seen.wait(WAIT)
    assert threads[0] == "otel_loopguard"


def test_full_queue_drops_and_counts(make_harness: HarnessFactory) -> None:
    """While the worker is held up, spans beyond ``max_queue`` are dropped and counted, and nothing raises."""
    h = make_harness(LoopGuardConfig())
    entered, release = threading.Event(), threading.Event()

    def stall(event: VerdictEvent) -> None:
        entered.set()
        release.wait(WAIT)

    h.processor.add_listener(stall)
    looping = h.agent()
    for _ in range(3):
        h.tool(looping)
    assert entered.wait(WAIT)
    # The worker is held inside the listener with an empty queue; shrink the queue (private on purpose: the
    # constructor argument is covered by test_max_queue_is_validated) so a few spans overflow it.
    h.processor._deferred._max = 5
    other = h.agent()
    for i in range(20):
        h.tool(other, args=json.dumps({"q": i}))
    release.set()
    dropped = h.total("loopguard.processor.errors", **{"error.type": "queue_full"})
    # 20 tool spans queue an end each (their starts are noted on this thread, not queued); the other agent's start
    # sits in the queue too.
    assert dropped == 20 + 1 - 5


def test_max_queue_is_validated() -> None:
    """A bad queue size is a clear error at construction."""
    import pytest

    from otel_loopguard import ConfigError, LoopGuardSpanProcessor

    with pytest.raises(ConfigError, match="max_queue"):
        LoopGuardSpanProcessor(LoopGuardConfig(), max_queue=0)


def test_events_queued_at_exit_are_not_lost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A script that loops and exits without flushing still delivers its verdict events (drained at exit)."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(
        """
        import json
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.metrics import MeterProvider
        from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

        logs = LoggerProvider()
        logs.add_log_record_processor(BatchLogRecordProcessor(ConsoleLogExporter(), schedule_delay_millis=600_000))
        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=logs,
                                                           meter_provider=MeterProvider()))
        tracer = provider.get_tracer("agent")
        with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for _ in range(4):
                with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": json.dumps({"q": "x"}), "gen_ai.tool.call.result": "same"}):
                    pass
        """
    ))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.count('"event_name": "loopguard.verdict"') == 2, out


def test_a_dropped_processor_frees_its_thread() -> None:
    """A processor dropped without shutdown() is collected, and its background thread ends."""
    import gc
    import weakref

    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_loopguard import LoopGuardSpanProcessor

    processor = LoopGuardSpanProcessor(LoopGuardConfig(), logger_provider=LoggerProvider(),
                                       meter_provider=MeterProvider())
    thread = processor._deferred._thread  # the thread object itself, to join it
    ref = weakref.ref(processor)
    del processor
    gc.collect()
    assert ref() is None
    thread.join(WAIT)
    assert not thread.is_alive()
