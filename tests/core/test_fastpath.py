"""The speed tricks of ``core/fastpath.py`` give exactly what the general code they bypass gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.fastpath import judge_alone, short_texts, sort_steps
from otel_loopguard.core.judge import ORIGIN_MCP_CLIENT, STEP_ORDER, Judged, Step, TraceJudge, compact_value
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000
T0 = 1_700_000_000 * S
#: Small enough that the long argument below is replaced by a digest before it is judged.
ENGINE = LoopEngine(LoopGuardConfig(max_argument_bytes=40))
LONG = '{"q": "' + "x" * 60 + '"}'

# One step: (start second, tool, argument, result, error, a usage step instead, an MCP client origin).
STEPS = st.tuples(
    st.integers(0, 12), st.sampled_from(["search", "fetch"]), st.sampled_from(['{"q": "a"}', '{"q": "b"}', LONG]),
    st.sampled_from(["r", None]), st.booleans(), st.integers(0, 9), st.integers(0, 9),
)


def _steps(drawn: list[tuple[int, str, str, str | None, bool, int, int]]) -> list[Step]:
    steps = []
    for i, (at, tool, args, result, failed, usage, mcp) in enumerate(drawn):
        start, end = T0 + at * S, T0 + at * S + S // 2
        if usage == 0:
            steps.append(Step(span_id=100 + i, parent_span_id=1, start_ns=start, end_ns=end, model="m",
                              usage=Usage(input_tokens=10)))
            continue
        call = ToolCall(tool=tool, arguments=args, result=result, result_captured=result is not None,
                        error="timeout" if failed else None, start=start / S, end=end / S)
        # An MCP client span whose parent is an earlier step: the judge must take the general path for it.
        origin, parent = (ORIGIN_MCP_CLIENT, 100 + i - 1) if mcp == 0 and i else ("", 1)
        steps.append(Step(span_id=100 + i, parent_span_id=parent, start_ns=start, end_ns=end, call=call,
                          origin=origin))
    return steps


def _replay(steps: list[Step], lone: bool) -> tuple[object, ...]:
    judge = TraceJudge(ENGINE, keep_steps=False, step_audit=False)
    told: list[Judged] = []
    judged: list[Step] = []
    for step in steps:
        if lone:
            told += judge.judge(step, judged=judged)
        else:
            judge.add(step)
            told += judge.advance(None, judged)
    told += judge.finish(None)
    return told, judged, judge.verdict, judge.reordered, judge.partial, judge.failed_calls, judge.cost


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEPS, min_size=1, max_size=30))
def test_the_lone_step_path_judges_as_add_and_advance(drawn: list[tuple[int, str, str, str | None, bool, int, int]]
                                                      ) -> None:
    """Steps in any order (late ones make the judge reordered), long arguments, errors, usage and MCP client steps:
    ``judge`` (taking ``judge_alone`` when it applies) tells, judges and concludes exactly what ``add`` + ``advance``
    do."""
    steps = _steps(drawn)
    assert _replay(steps, lone=True) == _replay(steps, lone=False)


def test_judge_alone_records_a_loop_and_the_order_it_saw() -> None:
    """Identical calls through ``judge_alone`` alone: stuck with a nudge at the third (period 1), stopped at the
    fourth (as tests/core/test_judge.py derives); a fifth that starts before the fourth marks the judge reordered,
    and each of the five was appended to ``judged``."""
    judge = TraceJudge(LoopEngine(), keep_steps=False, step_audit=False)
    judged: list[Step] = []
    told = []
    for i, at in enumerate((0, 1, 2, 3, 2)):
        call = ToolCall(tool="search", arguments='{"q": "x"}', result="none", result_captured=True,
                        start=at + 0.0, end=at + 0.5)
        step = Step(span_id=10 + i, parent_span_id=1, start_ns=at * S, end_ns=at * S + S // 2, call=call)
        told.append([(j.observation.verdict.kind, j.observation.intervention.action if j.observation.intervention
                      else None) for j in judge_alone(judge, step, None, judged)])
        if i == 3:
            assert not judge.reordered
    assert told[:4] == [[], [], [("stuck", "nudge")], [("stuck", "stop")]]
    assert judge.reordered
    assert [s.span_id for s in judged] == [10, 11, 12, 13, 14]


# One step to sort: (start, end, span id, known only at the end), times and ids drawn from few values for ties.
ORDERED = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 5), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(ORDERED, max_size=20))
def test_sort_steps_gives_the_step_order(drawn: list[tuple[int, int, int, bool]]) -> None:
    """Two stable sorts (times, then the at-end flag) put any steps in exactly STEP_ORDER's order."""
    steps = [Step(span_id=i, start_ns=a, end_ns=b, at_end=late) for a, b, i, late in drawn]
    sorted_steps = list(steps)
    sort_steps(sorted_steps)
    assert sorted_steps == sorted(steps, key=STEP_ORDER)
    if not any(late for *_, late in drawn):
        without_check = list(steps)
        sort_steps(without_check, late=False)
        assert without_check == sorted_steps


def test_sort_steps_puts_a_late_step_last_whatever_its_start() -> None:
    """A step known only at the end sorts after later-starting steps; the others keep start, end, id order."""
    early_late = Step(span_id=1, start_ns=1, end_ns=2, at_end=True)
    tie_b = Step(span_id=9, start_ns=5, end_ns=6)
    tie_a = Step(span_id=3, start_ns=5, end_ns=6)
    first = Step(span_id=7, start_ns=3, end_ns=9)
    steps = [early_late, tie_b, tie_a, first]
    sort_steps(steps)
    assert [s.span_id for s in steps] == [7, 3, 9, 1]


def test_short_texts_counts_short_texts_and_refuses_the_rest() -> None:
    """Short or absent texts give their length sum (3 + 2, 0); a long text or a non-text value gives -1."""
    assert short_texts(ToolCall(tool="t", arguments="abc", result="de"), 10) == 5
    assert short_texts(ToolCall(tool="t"), 10) == 0
    assert short_texts(ToolCall(tool="t", arguments="a" * 11, result="de"), 10) == -1
    assert short_texts(ToolCall(tool="t", arguments="abc", result="r" * 11), 10) == -1
    assert short_texts(ToolCall(tool="t", arguments={"q": 1}), 10) == -1


@given(st.one_of(st.none(), st.text(max_size=12)), st.one_of(st.none(), st.text(max_size=12)))
def test_short_texts_agrees_with_compact_value(args: str | None, result: str | None) -> None:
    """When the check keeps a call's texts, compact_value keeps them too and counts the same characters."""
    kept = short_texts(ToolCall(tool="t", arguments=args, result=result), 6)
    (new_args, args_size), (new_result, result_size) = compact_value(args, 6), compact_value(result, 6)
    if kept >= 0:
        assert new_args is args and new_result is result and kept == args_size + result_size
    else:
        assert len(args or "") > 6 or len(result or "") > 6
