"""serve's per-trace assembly (``conventions/received.py``) without serve's table: a batch judged, the same batch
again counted as duplicates, and the trace's finish told once.

The recorded fixture ``pydantic_ai__errors_then_success.json`` (``tests/fixtures/generate/pydantic_ai_runs.py``),
read by eye: one trace with the agent span ``invoke_agent research_agent`` as its root, four ``chat scripted-model``
spans and three ``execute_tool get_quote`` spans (the first two with error status). So: three tool calls to
``get_quote``; delivered again, its 3 tool and 4 model spans are 7 duplicates; its task ``success`` named
``research_agent`` with 4 turns, 3 tool calls and 2 tool errors.
"""

from __future__ import annotations

from pathlib import Path

from otel_loopguard.conventions.nesting import CONVENTION_NESTING
from otel_loopguard.conventions.received import ReceivedTrace, RequestReader, RequestTold, SpanBatch
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import TraceJudge
from otel_loopguard.otlp.read import read_spans

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "pydantic_ai__errors_then_success.json"


def _batch(reader: RequestReader) -> SpanBatch:
    batch = SpanBatch()
    for span in read_spans(str(FIXTURE)):
        reader.sort(batch, span)
    return batch


def _trace() -> tuple[ReceivedTrace, RequestReader]:
    config = LoopGuardConfig()
    judge = TraceJudge(LoopEngine(config), nesting=CONVENTION_NESTING, track_events=True)
    return ReceivedTrace(1, judge), RequestReader(config)


def test_a_batch_tells_its_tool_calls_and_starts_the_trace() -> None:
    """The fixture's spans in one batch tell three ``get_quote`` calls, no duplicate, and the trace starts working."""
    trace, reader = _trace()
    told = RequestTold()
    assert trace.take(_batch(reader), False, reader.extractor, told) > 0
    assert told.tools == ["get_quote"] * 3
    assert (told.tool_calls, told.duplicates, told.reordered, told.started) == (3, 0, 0, ["working"])


def test_the_same_batch_again_is_seven_duplicates() -> None:
    """Delivered again, the batch adds no step and counts its 3 tool and 4 model spans as duplicates."""
    trace, reader = _trace()
    trace.take(_batch(reader), False, reader.extractor, RequestTold())
    again = RequestTold()
    assert trace.take(_batch(reader), False, reader.extractor, again) == 0
    assert (again.duplicates, again.tool_calls, again.tools, again.events) == (7, 0, [], [])


def test_the_finish_tells_the_task_once() -> None:
    """The finish gives the task (success, research_agent, 4 turns, 3 calls, 2 errors); a second finish with
    nothing new since gives nothing."""
    trace, reader = _trace()
    trace.take(_batch(reader), False, reader.extractor, RequestTold())
    done = trace.finish("serve", reader.extractor)
    assert done is not None
    task = done.task
    assert (task.outcome, task.agent, task.turns, task.tool_calls, task.tool_errors) == (
        "success", "research_agent", 4, 3, 2)
    assert (done.rejudged, done.retracted, done.report.source) == (0, 0, "serve")
    assert trace.finish("serve", reader.extractor) is None
