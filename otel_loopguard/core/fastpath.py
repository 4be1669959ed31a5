"""The package's speed tricks, in one place: each takes a common case past general code, with the same outcome.

A trick stays only while ``tests/benchmarks/fastpath.py`` (the trick and the general code interleaved in one
process, whole-process CPU per tool call, medians of per-round ratios) shows it saves at least 2 %; its comment
says how much. Tests run the general code too and require the same outcome. Tricks measured as saving less are
removed, not kept "just in case" (``docs/architecture.md``, Speed tricks, lists them). Two are measured by
instruction counts of the whole ``audit`` command instead, where they are part of what keeps it at the speed it had
before the shared intake (issue 24): :func:`sort_steps` and :func:`short_texts`.

Three tricks of the readers above ``core/`` stay beside the code they speed up, where the layers put them; the
same benchmark measures them: the typed decoder of OTLP/JSON requests in the common shape (``otlp/json_typed.py``:
24-27 % of the general decoder's time saved), the general decoder's inline reads of string and integer
attributes (``otlp/json_general.py`` ``attributes``: 14-15 %) and the extractor's inline reads of plain attribute
keys (``conventions/extract.py``: 13-14 % of reading a tool span).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from .model import Observation, ToolCall

if TYPE_CHECKING:
    from .judge import Judged, Step, TraceJudge
    from .ladder import LadderState

__all__ = ["judge_alone", "quiet_observation", "short_texts", "sort_steps"]

_BY_TIME = attrgetter("start_ns", "end_ns", "span_id")
_AT_END = attrgetter("at_end")


def quiet_observation(ladder: LadderState, index: int, max_steps: int) -> Observation | None:
    """The observation of a call that changes nothing, or None when the engine's decision order must run.

    :meth:`LoopEngine.observe <.engine.LoopEngine.observe>` asks this when no detector found a repetition. While
    the trace is working with nothing pending on the ladder (:attr:`~.ladder.LadderState.quiet`) and under its step
    budget, the decision order would keep the working verdict and the ladder would change nothing: that verdict is
    the observation, and nothing is built. ``LoopEngine.fast = False`` skips it (tests compare both).

    Saves 4-6 % of the live judge's CPU per tool call and 3-5.5 % of ``audit``'s judging, against the
    decision order and the ladder (``live, no quiet`` and ``audit, no quiet`` in the benchmark).
    """
    if ladder.quiet and index < max_steps:
        return Observation(index, ladder.verdict)
    return None


def short_texts(call: ToolCall, max_bytes: int) -> int:
    """The characters of a call's argument and result text when both are short enough to keep as they are (or
    absent), else -1: then :func:`~.judge.compact_value` must look at them.

    Most calls' texts are short: this test spares the judge two calls of ``compact_value`` per step, in
    :func:`judge_alone` and in every other step's compaction (``TraceJudge.add``). Saves about 6 % of the live
    judge's CPU per tool call (``live, lone step compacting`` in the benchmark) and 0.24-0.32 % of the whole
    ``audit`` command's instructions (callgrind, 10 000 tool spans of ``tests/benchmarks/audit.py``'s files).
    """
    args, result = call.arguments, call.result
    if (args is None or (args.__class__ is str and len(args) <= max_bytes)) and (
            result is None or (result.__class__ is str and len(result) <= max_bytes)):
        return (len(args) if args else 0) + (len(result) if result else 0)
    return -1


def sort_steps(steps: list[Step], late: bool = True) -> None:
    """Sort ``steps`` in place in the judge's order (:data:`~.judge.STEP_ORDER`: steps known only at the trace's
    end last, then start time, end time, span id), in two stable sorts: by the times, then, when some step is known
    only at the end (rare: a derived call that never got a result), by that flag alone. ``late=False``: the caller
    knows that no step is (a judge notes it as steps are added), so none is looked for.

    The same order as ``sort(key=STEP_ORDER)`` (a stable sort by the flag keeps the time order within each group),
    cheaper: a key tuple led by a bool, equal in nearly every pair, loses CPython's integer comparison of the keys'
    first members. Saves 0.14-0.15 % of the whole ``audit`` command's instructions (callgrind, 10 000 tool spans of
    ``tests/benchmarks/audit.py``'s files), the sorts' share of it.
    """
    steps.sort(key=_BY_TIME)
    if late and any(map(_AT_END, steps)):
        steps.sort(key=_AT_END)


def judge_alone(judge: TraceJudge, step: Step, untimed_at: float | None, judged: list[Step] | None) -> list[Judged]:
    """:meth:`TraceJudge.judge <.judge.TraceJudge.judge>` of the live processor's usual step.

    The judge calls it when it keeps no span ids, nothing is ready, held or waiting for a parent, and no nesting
    rule names the step's origin: then :meth:`~.judge.TraceJudge.add` and :meth:`~.judge.TraceJudge.advance`
    would only compact the step, check its order and feed it to the engine, which is what this does, inline.

    Saves 9-10 % of the live judge's CPU per tool call against ``add`` + ``advance`` (``live, no lone step`` in
    the benchmark): the inline copy of ``_feed_all``'s work for one step, and the short-text check below, which
    alone saves about 6 % (``live, lone step compacting``: the step compacted by the judge every time).
    """
    call = step.call
    if call is not None and short_texts(call, judge._max_bytes) < 0:  # else kept as it is
        step = judge._compacted(step)
    if judged is not None:
        judged.append(step)
    out: list[Judged] = []
    key = (step.at_end, step.start_ns, step.end_ns, step.span_id)
    last = judge._last
    if last is not None and key < last:
        judge._reorder()
    else:
        judge._last = key
    state = judge._state
    if state is None:
        state = judge.state
    observation = judge._observe(step, judge._engine, state, judge._audit, untimed_at)
    if observation is not None and (observation.transition is not None or observation.intervention is not None):
        judge._record(observation, step, out)
    return out
