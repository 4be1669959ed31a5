"""The speed tricks of ``core/fastpath.py`` give exactly what the general code they bypass gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.fastpath import judge_alone
from otel_loopguard.core.judge import ORIGIN_MCP_CLIENT, Judged, Step, TraceJudge
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
