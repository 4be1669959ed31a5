"""Decoded spans to judge steps and whole traces, fixed examples of StepReader and TraceCollector.

Through the public names of :mod:`otel_loopguard.conventions.traces`. Every expected value is worked out by hand from
the module's rules (the comment says which), never taken from the code's output. Times are whole seconds, so the
times in seconds are exact. The steps a trace's judge is given are recorded by a judge that keeps them (it stands in
for :class:`TraceJudge` in the module).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from otel_loopguard.conventions import assembly, traces
from otel_loopguard.conventions.assembly import TURN_OVERHEAD_BYTES
from otel_loopguard.conventions.intake import StepReader
from otel_loopguard.conventions.model_calls import ORIGIN_DERIVED, Turn
from otel_loopguard.conventions.nesting import ORIGIN_TOOL
from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.conventions.traces import (
    DEFAULT_BUFFER_BYTES,
    TRACE_OVERHEAD_BYTES,
    TraceCollector,
)
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.judge import ORIGIN_MCP_CLIENT, Step, TraceJudge
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000
# A model span with token usage (10 in, 2 out) of model "m": the GenAI conventions count cached tokens in the input.
MODEL = {"gen_ai.operation.name": "chat", "gen_ai.response.model": "m", "gen_ai.usage.input_tokens": 10,
         "gen_ai.usage.output_tokens": 2}
USAGE = Usage(input_tokens=10, output_tokens=2, cache_included_in_input=True)
# A GenAI tool span with its arguments and its result.
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "hits"}
CONTEXT = {"gen_ai.agent.name": "bot", "gen_ai.conversation.id": "conv"}
# A model-only trace's bytes: its own overhead and one turn without messages.
ONE_TURN = TRACE_OVERHEAD_BYTES + TURN_OVERHEAD_BYTES


def _span(trace: int, span_id: int, start: int, end: int, attrs: dict[str, Any], name: str = "span",
          parent: int | None = None, **kw: Any) -> SpanRecord:
    return SpanRecord(trace, span_id, parent, name, start * S, end * S, attrs, **kw)


def _model(trace: int, span_id: int, start: int, end: int, inputs: Any = None, outputs: Any = None,
           parent: int | None = None, **attrs: Any) -> SpanRecord:
    more: dict[str, Any] = dict(attrs)
    if inputs is not None:
        more["gen_ai.input.messages"] = json.dumps(inputs)
    if outputs is not None:
        more["gen_ai.output.messages"] = json.dumps(outputs)
    return _span(trace, span_id, start, end, {**MODEL, **more}, name="chat m", parent=parent)


def _asks(*calls: tuple[str, str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "parts": [{"type": "tool_call", "id": i, "name": t, "arguments": a}
                                            for i, t, a in calls]}]


def _answers(*results: tuple[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "tool_call_response", "id": i, "response": r} for i, r in results]}]


class _Recorder(TraceJudge):
    """A TraceJudge that keeps what it is given: the steps, the observation time and the trace id."""

    made: ClassVar[list[_Recorder]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: list[Step] = []
        self.observed_at: float | None = -1.0
        self.trace_id: str | None = None
        _Recorder.made.append(self)

    def add(self, step: Step, *, parent_open: bool = False) -> bool:
        self.given.append(step)
        return super().add(step, parent_open=parent_open)

    def finish(self, observed_at: float | None = None) -> Any:
        self.observed_at = observed_at
        return super().finish(observed_at)

    def report(self, source: str, trace_id: str | None, **kwargs: Any) -> Any:
        self.trace_id = trace_id
        return super().report(source, trace_id, **kwargs)


@pytest.fixture
def judge_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], _Recorder]:
    """The recording judge that reported a trace, by trace id."""
    _Recorder.made = []
    monkeypatch.setattr(traces, "TraceJudge", _Recorder)
    return lambda trace_id: next(j for j in _Recorder.made if j.trace_id == trace_id)


def _collector(**kw: Any) -> TraceCollector:
    return TraceCollector(LoopEngine(LoopGuardConfig()), **kw)


def _tid(trace: int) -> str:
    return f"{trace:032x}"


# -- StepReader --------------------------------------------------------------------------------------------------------

def test_constants() -> None:
    # 1 GiB held by default; 4096 bytes per held trace, 256 per held model turn.
    assert (DEFAULT_BUFFER_BYTES, TRACE_OVERHEAD_BYTES, TURN_OVERHEAD_BYTES) == (1 << 30, 4096, 256)


def test_a_tool_span_is_a_tool_step() -> None:
    # The call: name, arguments and result as recorded, times in seconds; the step keeps the span's ids and times;
    # with context (the default), the agent and the conversation of the span; origin "tool".
    span = _span(1, 7, 2, 3, {**TOOL, **CONTEXT}, name="execute_tool search", parent=4)
    expected = Step(span_id=7, parent_span_id=4, start_ns=2 * S, end_ns=3 * S,
                    call=ToolCall("search", '{"q": 1}', True, "hits", True, start=2.0, end=3.0),
                    agent="bot", conversation="conv", origin=ORIGIN_TOOL)
    reader = StepReader()
    assert reader.step(span) == expected
    assert reader.read(span) == expected
    # Without context neither is read.
    assert StepReader(context=False).step(span) == Step(
        span_id=7, parent_span_id=4, start_ns=2 * S, end_ns=3 * S, call=expected.call, origin=ORIGIN_TOOL)


def test_a_failed_tool_span_takes_its_error_from_the_status_text() -> None:
    # No error.type and no exception event: the error class is the status description.
    span = _span(1, 7, 2, 3, TOOL, name="execute_tool search", status_error=True, status_message="Timeout")
    call = StepReader().step(span).call  # type: ignore[union-attr]
    assert call is not None and call.error == "Timeout"


def test_an_mcp_client_span_has_its_origin() -> None:
    # A tool span with mcp.method.name is an MCP client span (its nesting rule looks at the origin).
    span = _span(1, 7, 2, 3, {**TOOL, "mcp.method.name": "tools/call"}, name="execute_tool search")
    assert StepReader().step(span).origin == ORIGIN_MCP_CLIENT  # type: ignore[union-attr]


def test_a_model_span_is_a_usage_step_or_a_turn() -> None:
    # step(): the model and its usage, origin "" (no nesting rule looks at it); context read as for a tool span.
    attrs = {**MODEL, **CONTEXT, "gen_ai.output.messages": json.dumps(_asks(("c1", "search", {"q": 1})))}
    span = SpanRecord(1, 9, 3, "chat m", 0, 2 * S, attrs)
    assert StepReader().step(span) == Step(span_id=9, parent_span_id=3, start_ns=0, end_ns=2 * S, model="m",
                                           usage=USAGE, agent="bot", conversation="conv")
    assert StepReader(context=False).step(span) == Step(span_id=9, parent_span_id=3, start_ns=0, end_ns=2 * S,
                                                        model="m", usage=USAGE)
    # read(): the turn, with the calls in its output (none without messages), agent and conversation with context.
    turn = StepReader().read(span)
    assert turn == Turn(9, 3, 0, 2 * S, None, ("m", USAGE), (("c1", "search", {"q": 1}),), None, (), "bot", "conv")
    assert StepReader().read(span, messages=False) == turn._replace(calls=())
    assert StepReader(context=False).read(span) == turn._replace(agent=None, conversation=None)
    # A model span without token usage is no step (but still a turn).
    bare = SpanRecord(1, 9, 3, "chat m", 0, 2 * S, {"gen_ai.operation.name": "chat"})
    assert StepReader().step(bare) is None
    assert StepReader().read(bare) == Turn(9, 3, 0, 2 * S, None, None)


def test_other_spans_are_no_step() -> None:
    # An agent span and a span of no convention: neither a step nor a turn.
    for attrs in ({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"}, {"http.method": "GET"}):
        span = _span(1, 5, 0, 1, attrs, name="invoke_agent bot")
        assert StepReader().step(span) is None and StepReader().read(span) is None


# An OpenInference tool span whose result is JSON text holding a string (6 bytes): unwrapped to the string, unless
# text that long is not parsed.
OI_TOOL = {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q": 1}',
           "output.value": '"hits"'}


def test_the_argument_limit() -> None:
    def result(reader: StepReader) -> Any:
        return reader.step(_span(1, 7, 2, 3, OI_TOOL)).call.result  # type: ignore[union-attr]

    # By default (65 536 bytes) the text is unwrapped; with a limit of 4 bytes it is kept as recorded.
    assert result(StepReader()) == "hits"
    assert result(StepReader(4)) == '"hits"'
    # A configuration's limit wins over the argument.
    assert result(StepReader(65_536, config=LoopGuardConfig(max_argument_bytes=4))) == '"hits"'
    assert result(StepReader(4, config=LoopGuardConfig())) == "hits"
    # The extractor it reads with is the configuration's.
    reader = StepReader(config=LoopGuardConfig(max_argument_bytes=4))
    assert reader.extractor.tool_call(OI_TOOL, "search", 1, 2).result == '"hits"'


# -- TraceCollector: what is held, and released early ------------------------------------------------------------------

def test_bytes_held_and_the_least_recently_active_trace_released(judge_of: Callable[[str], _Recorder]) -> None:
    # Each model span without messages holds one turn (256 bytes); a trace adds 4096. Budget: traces 1 and 2 of one
    # turn each plus one more turn (2 * 4352 + 256 = 8960).
    collector = _collector(max_buffer_bytes=2 * ONE_TURN + TURN_OVERHEAD_BYTES)
    assert collector.add(_model(1, 11, 0, 1), "a") == []
    assert collector.add(_model(2, 21, 0, 1), "a") == []
    assert collector.held_bytes == 2 * ONE_TURN and collector.held_traces == 2
    # A second turn of trace 1: exactly at the budget (not beyond it), nothing released; trace 1 is now the most
    # recently active.
    assert collector.add(_model(1, 12, 1, 2), "a") == []
    assert collector.held_bytes == 2 * ONE_TURN + TURN_OVERHEAD_BYTES
    # Trace 3 goes beyond: the least recently active trace, 2, is released (partial), and only it.
    [report] = collector.add(_model(3, 31, 0, 1), "a")
    assert (report.trace_id, report.partial) == (_tid(2), True)
    assert collector.early_releases == 1 and collector.held_traces == 2
    assert collector.held_bytes == 2 * ONE_TURN + TURN_OVERHEAD_BYTES
    reports = collector.finish()
    assert [(r.trace_id, r.partial) for r in reports] == [(_tid(1), False), (_tid(3), False)]
    assert collector.held_bytes == 0 and collector.held_traces == 0
    # Released early, trace 2's judge was given its turn's usage step (no agent or conversation: not read for a
    # report), and judged at its span's end (1 s).
    assert judge_of(_tid(2)).given == [Step(span_id=21, start_ns=0, end_ns=S, model="m", usage=USAGE)]
    assert judge_of(_tid(2)).observed_at == 1.0


def test_a_released_trace_gives_back_its_judge_bytes() -> None:
    # Trace 1 has a tool span (its judge keeps the step: some bytes beyond the trace's 4096), trace 2 one turn.
    # With a budget of 4096 + 4352, trace 1 is released when trace 2 comes, and what stays held is trace 2's 4352.
    alone = _collector()
    alone.add(_span(1, 7, 2, 3, TOOL), "a")
    assert alone.held_bytes > TRACE_OVERHEAD_BYTES  # the kept step has a size
    collector = _collector(max_buffer_bytes=TRACE_OVERHEAD_BYTES + ONE_TURN)
    collector.add(_span(1, 7, 2, 3, TOOL), "a")
    [report] = collector.add(_model(2, 21, 0, 1), "a")
    assert (report.trace_id, report.steps_used) == (_tid(1), 1)
    assert collector.held_bytes == ONE_TURN


def test_a_released_trace_gives_back_its_results_bytes() -> None:
    # Trace 1: one turn whose input holds two results: "abc" (64 + 3 bytes) and an object (64 + 256). Held: 4096 +
    # 256 + 67 + 320 = 4739. With trace 2 (4352) and a budget one byte short of both, trace 1 is released.
    collector = _collector(max_buffer_bytes=4739 + ONE_TURN - 1)
    collector.add(_model(1, 11, 0, 1, inputs=_answers(("c1", "abc"), ("c2", {"n": 1}))), "a")
    assert collector.held_bytes == 4739
    [report] = collector.add(_model(2, 21, 0, 1), "a")
    assert report.trace_id == _tid(1)
    assert collector.held_bytes == ONE_TURN


def _brought_back(trace: int) -> tuple[list[str | None], bool]:
    # A budget of one trace of one turn: each new trace releases the one before. Traces 1 to 4, then a later span of
    # ``trace`` (which releases trace 4): the ids released, and whether the report of ``trace`` is partial.
    collector = _collector(max_buffer_bytes=ONE_TURN)
    released = []
    for t in (1, 2, 3, 4):
        released += collector.add(_model(t, t * 10, 0, 1), "a")
    released += collector.add(_model(trace, trace * 10 + 1, 1, 2), "a")
    [report] = collector.finish()
    assert report.trace_id == _tid(trace) and collector.early_releases == 4
    return [r.trace_id for r in released], report.partial


def test_released_ids_are_remembered_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # With room for two ids, releasing traces 1, 2 and 3 forgets 1 (the oldest) and remembers 2 and 3: a later span
    # of trace 1 starts a whole new trace, one of trace 2 a partial one.
    monkeypatch.setattr(traces, "_MAX_RELEASED_IDS", 2)
    assert _brought_back(1) == ([_tid(1), _tid(2), _tid(3), _tid(4)], False)
    assert _brought_back(2) == ([_tid(1), _tid(2), _tid(3), _tid(4)], True)


def test_a_tool_span_drops_the_message_content_held(judge_of: Callable[[str], _Recorder]) -> None:
    # A turn asking for a call (no input, no history): 256 + 64 + len("search") + 256 (an object's arguments) = 582.
    # When a tool span of the trace comes, the turn keeps its usage only (256): held is then the trace, the stripped
    # turn and what the judge keeps of the tool step, which is what the tool span alone holds plus 256.
    asks = _model(1, 11, 0, 1, outputs=_asks(("c1", "search", {"q": 1})))
    tool = _span(1, 7, 2, 3, TOOL, name="execute_tool search")
    alone = _collector()
    alone.add(tool, "a")
    collector = _collector()
    collector.add(asks, "a")
    assert collector.held_bytes == TRACE_OVERHEAD_BYTES + 582
    collector.add(tool, "a")
    assert collector.held_bytes == alone.held_bytes + TURN_OVERHEAD_BYTES
    # Nothing is derived from the turn: the judge gets the tool step when it is read, then the turn's usage.
    [report] = collector.finish()
    assert [(s.span_id, s.call is not None) for s in judge_of(_tid(1)).given] == [(7, True), (11, False)]
    assert report.steps_used == 1


def test_a_tool_span_drops_held_results_and_history() -> None:
    # A turn whose input holds two results ("abc": 64 + 3, an object: 64 + 256, held apart) and repeats the earlier
    # call (history: 64 + len("search") + 256), no output: 256 + 326 + 67 + 320 held for it. After the tool span
    # only 256 stays.
    inputs = [*_asks(("c1", "search", {"q": 1})), *_answers(("c1", "abc"), ("c2", {"n": 1}))]
    tool = _span(1, 7, 2, 3, TOOL, name="execute_tool search")
    alone = _collector()
    alone.add(tool, "a")
    # Room for the trace before and after the tool span, not for one more trace.
    collector = _collector(max_buffer_bytes=max(alone.held_bytes + TURN_OVERHEAD_BYTES,
                                                TRACE_OVERHEAD_BYTES + 256 + 326 + 67 + 320))
    collector.add(_model(1, 11, 0, 1, inputs=inputs), "a")
    assert collector.held_bytes == TRACE_OVERHEAD_BYTES + 256 + 326 + 67 + 320
    assert collector.add(tool, "a") == []
    assert collector.held_bytes == alone.held_bytes + TURN_OVERHEAD_BYTES
    # A second trace of one turn goes beyond the budget: the first is released, giving back all it held.
    [report] = collector.add(_model(2, 21, 0, 1), "a")
    assert report.trace_id == _tid(1) and collector.held_bytes == ONE_TURN


def test_turn_bytes() -> None:
    # 256, then 64 + the tool name + the arguments text (256 for arguments that are not text) per call and per call
    # repeated in the input, and 64 + the call id + the result text (256 when not text) per result.
    turn = Turn(1, None, 0, 1, None, None, calls=(("c1", "search", "{}"), (None, "read", {"d": 1})),
                results=(("c1", "abc"), ("c22", [1])), history=(("c0", "ls", None),))
    assert assembly.turn_bytes(turn) == 256 + (64 + 6 + 2) + (64 + 4 + 256) + (64 + 2 + 3) + (64 + 3 + 256) + (
        64 + 2 + 256)
    assert assembly.turn_bytes(Turn(1, None, 0, 1, None, None)) == 256


def test_calls_derived_from_turns_in_any_order(judge_of: Callable[[str], _Recorder]) -> None:
    # Model spans under span 99 (their span ids run against time, so only their times order them): turn 31 (0-2 s)
    # asks for c1; turn 22 (3-4 s) holds c1's result "hits" and asks for c2; turn 13 (5-6 s) holds c1's result again
    # (recorded differently, "hits again") and c2's, "doc"; turn 4 (7-8 s) holds both again ("x", "y"). Read in
    # another order: each result is kept from the earliest input holding it (c1 from turn 22, c2 from turn 13), and
    # the turns are judged in end order. Derived calls run from the end of the asking turn to the start of the
    # answering one, under the asking turn's parent; their span ids are 31 * 1 000 003 + 1 and 22 * 1 000 003 + 1.
    # No agent or conversation is read for a report (turn 31 names both).
    t31 = _model(1, 31, 0, 2, outputs=_asks(("c1", "search", {"q": 1})), parent=99, **CONTEXT)
    t22 = _model(1, 22, 3, 4, inputs=_answers(("c1", "hits")), outputs=_asks(("c2", "read", {"d": 1})), parent=99)
    t13 = _model(1, 13, 5, 6, inputs=_answers(("c1", "hits again"), ("c2", "doc")), parent=99)
    t4 = _model(1, 4, 7, 8, inputs=_answers(("c1", "x"), ("c2", "y")), parent=99)
    collector = _collector()
    for span in (t13, t4, t31, t22):
        assert collector.add(span, "a") == []
    [report] = collector.finish()

    def usage(span_id: int, start: int, end: int) -> Step:
        return Step(span_id=span_id, parent_span_id=99, start_ns=start * S, end_ns=end * S, model="m", usage=USAGE)

    assert judge_of(_tid(1)).given == [
        usage(31, 0, 2),
        Step(span_id=31_000_094, parent_span_id=99, start_ns=2 * S, end_ns=3 * S, origin=ORIGIN_DERIVED,
             call=ToolCall("search", {"q": 1}, True, "hits", True, start=2.0, end=3.0)),
        usage(22, 3, 4),
        Step(span_id=22_000_067, parent_span_id=99, start_ns=4 * S, end_ns=5 * S, origin=ORIGIN_DERIVED,
             call=ToolCall("read", {"d": 1}, True, "doc", True, start=4.0, end=5.0)),
        usage(13, 5, 6),
        usage(4, 7, 8),
    ]
    # Judged at the last span's end (8 s); two tool calls; nothing unread (the calls were derived).
    assert judge_of(_tid(1)).observed_at == 8.0
    assert (report.steps_used, report.unread, report.partial) == (2, (), False)


def test_a_call_never_answered_is_judged_without_a_result(judge_of: Callable[[str], _Recorder]) -> None:
    # The only turn asks for c1 and no later input comes: at the end c1 is judged without a result, from the turn's
    # end to its end (2 s); span id 11 * 1 000 003 + 1; marked at_end, so it is judged after the trace's other steps.
    collector = _collector()
    collector.add(_model(1, 11, 0, 2, outputs=_asks(("c1", "search", {"q": 1}))), "a")
    collector.finish()
    assert judge_of(_tid(1)).given[1:] == [
        Step(span_id=11_000_034, start_ns=2 * S, end_ns=2 * S, origin=ORIGIN_DERIVED,
             call=ToolCall("search", {"q": 1}, True, None, False, start=2.0, end=2.0), at_end=True)]


def test_a_turn_delivered_twice_is_read_once(judge_of: Callable[[str], _Recorder]) -> None:
    # The second delivery of turn 11 (same span id) is counted as a duplicate and adds nothing: not its bytes, not a
    # second usage step, not a second model span for the unread note (1 span).
    collector = _collector()
    turn = _model(1, 11, 0, 2)
    collector.add(turn, "a")
    collector.add(turn, "a")
    assert collector.duplicates == 1 and collector.held_bytes == ONE_TURN
    [report] = collector.finish()
    assert [s.span_id for s in judge_of(_tid(1)).given] == [11]
    assert [(u["reason"], u["spans"]) for u in report.unread] == [("no_tool_calls", 1)]


def test_a_tool_span_delivered_twice_is_read_once() -> None:
    # The judge refuses the second delivery: a duplicate, bytes unchanged, one call.
    collector = _collector()
    tool = _span(1, 7, 2, 3, TOOL, name="execute_tool search")
    collector.add(tool, "a")
    held = collector.held_bytes
    collector.add(tool, "a")
    assert collector.duplicates == 1 and collector.held_bytes == held
    [report] = collector.finish()
    assert report.steps_used == 1


def test_unread_notes() -> None:
    # Model spans and an agent span (each counted once, the agent span's second delivery too) and no tool call: one
    # no_tool_calls note over 3 spans, naming the GenAI keys seen (sorted).
    collector = _collector()
    agent = _span(1, 5, 0, 9, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"},
                  name="invoke_agent bot")
    for span in (agent, _model(1, 11, 0, 1), agent, _model(1, 12, 1, 2)):
        collector.add(span, "a")
    [report] = collector.finish()
    [note] = report.unread
    assert (note["reason"], note["spans"]) == ("no_tool_calls", 3)
    assert note["keys"] == ["gen_ai.agent.name", "gen_ai.operation.name", "gen_ai.response.model",
                            "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"]
    # A tool span whose result is under an attribute no convention reads: an unknown_attributes note naming it.
    collector = _collector()
    collector.add(_span(1, 7, 2, 3, {**{k: v for k, v in TOOL.items() if k != "gen_ai.tool.call.result"},
                                     "acme.output": "x"}, name="execute_tool search"), "a")
    [report] = collector.finish()
    assert [(u["reason"], u["keys"], u["spans"]) for u in report.unread] == [
        ("unknown_attributes", ["acme.output"], 1)]
    # Arguments and result both read: no note.
    collector = _collector()
    collector.add(_span(1, 7, 2, 3, TOOL, name="execute_tool search"), "a")
    assert collector.finish()[0].unread == ()


def test_sources_on_a_report() -> None:
    # Each source once, in order of first use, at most four named and " and more" beyond; a source given again
    # later is not repeated.
    collector = _collector()
    for i, source in enumerate(["a", "b", "a", "c", "d"]):
        collector.add(_model(1, 11 + i, 0, 1), source)
    collector.add(_model(2, 21, 0, 1), "x")
    assert [r.source for r in collector.finish()] == ["a, b, c, d", "x"]
    collector = _collector()
    for i, source in enumerate(["a", "b", "c", "d", "e", "f"]):
        collector.add(_model(1, 11 + i, 0, 1), source)
    assert [r.source for r in collector.finish()] == ["a, b, c, d and more"]


def test_grouping_attributes() -> None:
    # The earliest span (by start, end, then span id) that has an attribute gives its value, from the span's
    # attributes first, else its resource; an attribute no span has is left out. The spans come in no time order.
    collector = _collector(group_by=["team", "env", "missing"])
    spans = [
        _span(1, 8, 2, 4, {"team": "b"}, resource={"env": "dev"}),
        _span(1, 6, 2, 3, {"team": "a"}, resource={"team": "r", "env": "test"}),
        _span(1, 9, 5, 6, {"team": "late"}, resource={"env": "prod"}),
        _span(1, 7, 2, 3, {}, resource={"team": "r7"}),
        _span(1, 5, 1, 2, {"other": 1}),
    ]
    for span in spans:
        collector.add(span, "a")
    [report] = collector.finish()
    # team: span 6 (2-3 s, before span 7 of the same times by its id) is the earliest with one (span 5 has none),
    # its attribute before its resource; env: span 6 too, from its resource.
    assert report.attributes == {"team": "a", "env": "test"}
    # Without grouping attributes, none.
    collector = _collector()
    collector.add(spans[0], "a")
    assert collector.finish()[0].attributes == {}


def test_the_observation_time() -> None:
    # Given, it is used for every trace; else each trace's last span end (here 9 s, the agent span that ends last).
    collector = _collector(observed_at=100.0)
    collector.add(_model(1, 11, 0, 1), "a")
    collector.add(_model(1, 12, 1, 2), "a")
    judge_times = []
    original = TraceJudge.finish

    def finish(self: TraceJudge, observed_at: float | None = None) -> Any:
        judge_times.append(observed_at)
        return original(self, observed_at)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(TraceJudge, "finish", finish)
        collector.finish()
        collector = _collector()
        for span in (_span(1, 5, 0, 9, {"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent x"),
                     _model(1, 11, 0, 1)):
            collector.add(span, "a")
        collector.finish()
        # A trace of spans without an end time (0): judged without one.
        collector = _collector()
        collector.add(SpanRecord(1, 11, None, "chat m", 0, 0, MODEL), "a")
        collector.finish()
    assert judge_times == [100.0, 9.0, None]


def test_add_all_yields_the_traces_released_early() -> None:
    # With room for one trace of one turn, the second trace releases the first while the spans are read.
    collector = _collector(max_buffer_bytes=ONE_TURN)
    released = list(collector.add_all([_model(1, 11, 0, 1), _model(2, 21, 0, 1)], "f"))
    assert [(r.trace_id, r.source, r.partial) for r in released] == [(_tid(1), "f", True)]
    assert [r.trace_id for r in collector.finish()] == [_tid(2)]


def test_a_turn_without_its_input_does_not_answer(judge_of: Callable[[str], _Recorder]) -> None:
    # Turn 12 records no input (metadata only): it neither answers c1 nor makes it be judged without a result; turn
    # 13's input does answer it.
    collector = _collector()
    for span in (_model(1, 11, 0, 2, outputs=_asks(("c1", "search", {"q": 1}))), _model(1, 12, 3, 4),
                 _model(1, 13, 5, 6, inputs=_answers(("c1", "hits")))):
        collector.add(span, "a")
    collector.finish()
    assert [(s.call.result, s.end_ns) for s in judge_of(_tid(1)).given if s.call] == [("hits", 5 * S)]


def test_reports_come_in_order_of_first_appearance() -> None:
    # Trace 2 was active last (its second span), yet its report comes first: it appeared first (before trace 1).
    collector = _collector()
    for span in (_model(2, 21, 0, 1), _model(1, 11, 0, 1), _model(2, 22, 1, 2)):
        collector.add(span, "a")
    assert [r.trace_id for r in collector.finish()] == [_tid(2), _tid(1)]


def test_the_judge_bytes_of_every_tool_step_are_held(judge_of: Callable[[str], _Recorder]) -> None:
    # Two tool spans of one trace hold what each holds alone, the trace counted once. Their steps are given to the
    # judge without agent or conversation (not read for a report).
    first = _span(1, 7, 2, 3, {**TOOL, **CONTEXT}, name="execute_tool search")
    second = _span(1, 8, 4, 5, {**TOOL, "gen_ai.tool.name": "read", "gen_ai.tool.call.result": "a longer text"},
                   name="execute_tool read")
    sizes = []
    for span in (first, second):
        alone = _collector()
        alone.add(span, "a")
        sizes.append(alone.held_bytes)
    collector = _collector()
    collector.add(first, "a")
    collector.add(second, "a")
    assert collector.held_bytes == sizes[0] + sizes[1] - TRACE_OVERHEAD_BYTES
    collector.finish()
    assert [(s.span_id, s.agent, s.conversation) for s in judge_of(_tid(1)).given] == [(7, None, None),
                                                                                     (8, None, None)]


def test_a_tool_span_inside_the_same_call_is_one_step() -> None:
    # Span 8 (1-9 s) inside span 7 (0-10 s), both of "search": one call (the nesting every path judges with).
    collector = _collector()
    collector.add(_span(1, 8, 1, 9, TOOL, name="execute_tool search", parent=7), "a")
    collector.add(_span(1, 7, 0, 10, TOOL, name="execute_tool search"), "a")
    assert collector.finish()[0].steps_used == 1


def test_unread_tool_content_in_events_and_in_a_user_convention() -> None:
    # A GenAI tool span without its result attribute, whose result is in an event no convention reads: the note names
    # it event/key.
    collector = _collector()
    no_result = {k: v for k, v in TOOL.items() if k != "gen_ai.tool.call.result"}
    collector.add(_span(1, 7, 2, 3, no_result, name="execute_tool search",
                        events=(("acme.done", 3 * S, {"output": "x"}),)), "a")
    assert [(u["reason"], u["keys"]) for u in collector.finish()[0].unread] == [
        ("unknown_attributes", ["acme.done/output"])]
    # A user convention reads its arguments from acme.input: that key is known, so a span of it without its result
    # has no note; the convention applies to the collector through the engine's configuration.
    config = LoopGuardConfig(conventions={"acme": {"when": {"acme.kind": "tool"}, "tool_name": "acme.tool",
                                                   "arguments": "acme.input", "result": "acme.output"}})
    collector = TraceCollector(LoopEngine(config))
    collector.add(_span(1, 7, 2, 3, {"acme.kind": "tool", "acme.tool": "t", "acme.input": "{}"}), "a")
    [report] = collector.finish()
    assert (report.steps_used, report.unread) == (1, ())


def test_add_all_pauses_the_cyclic_collector() -> None:
    # While the spans are read (here: between the two released traces) the cyclic garbage collector is off; it is on
    # again after. When it was off before, it stays off.
    import gc

    collector = _collector(max_buffer_bytes=0)
    seen = []
    assert gc.isenabled()
    for _ in collector.add_all([_model(1, 11, 0, 1), _model(2, 21, 0, 1)], "f"):
        seen.append(gc.isenabled())
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        list(_collector(max_buffer_bytes=0).add_all([_model(1, 11, 0, 1)], "f"))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_after_a_tool_span_turns_keep_their_usage_only(judge_of: Callable[[str], _Recorder]) -> None:
    # Once the trace has a tool span, a later model span is read without its messages: it holds one bare turn
    # (256 bytes) and no call is derived from it, though it asks for one.
    tool = _span(1, 7, 2, 3, TOOL, name="execute_tool search")
    alone = _collector()
    alone.add(tool, "a")
    collector = _collector()
    collector.add(tool, "a")
    collector.add(_model(1, 11, 4, 5, outputs=_asks(("c1", "read", {"d": 1}))), "a")
    assert collector.held_bytes == alone.held_bytes + TURN_OVERHEAD_BYTES
    [report] = collector.finish()
    assert report.steps_used == 1
    assert [s.span_id for s in judge_of(_tid(1)).given] == [7, 11]


def test_duplicates_are_counted_each_time() -> None:
    # A tool span and a model span each delivered three times: two duplicates each.
    collector = _collector()
    for span in [_span(1, 7, 2, 3, TOOL, name="execute_tool search"), _model(1, 11, 0, 1)] * 3:
        collector.add(span, "a")
    assert collector.duplicates == 4


def test_a_result_text_at_the_limit() -> None:
    # The default limit is 65 536 bytes: a JSON string of 65 537 bytes is not unwrapped, one of 65 536 is.
    def result(size: int) -> Any:
        text = '"' + "a" * (size - 2) + '"'
        return StepReader().step(_span(1, 7, 2, 3, {**OI_TOOL, "output.value": text})).call.result  # type: ignore
    assert result(65_537) == '"' + "a" * 65_535 + '"'
    assert result(65_536) == "a" * 65_534


# A user convention known by its span name only, whose agent is the span name after the prefix.
BY_NAME = {"acme": {"span_name_prefix": "acme ", "arguments": "acme.input", "result": "acme.output",
                    "agent_name": {"span_name": True, "strip_prefix": "acme "}}}


def test_a_convention_known_by_span_name() -> None:
    # The agent of a step is read with the span's name: "acme bot" is agent "bot".
    reader = StepReader(config=LoopGuardConfig(conventions=BY_NAME))
    assert reader.step(_span(1, 7, 2, 3, {"acme.input": "{}"}, name="acme bot")).agent == "bot"  # type: ignore
    # Its arguments attribute is known by the span's name too: a span without its result has no unread note.
    collector = TraceCollector(LoopEngine(LoopGuardConfig(conventions=BY_NAME)))
    collector.add(_span(1, 7, 2, 3, {"acme.input": "{}"}, name="acme bot"), "a")
    [report] = collector.finish()
    assert (report.steps_used, report.unread) == (1, ())
