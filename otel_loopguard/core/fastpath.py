"""The package's speed tricks, in one place: each takes a common case past general code, with the same outcome.

A trick stays only while ``tests/benchmarks/fastpath.py`` (the trick and the general code interleaved in one
process, whole-process CPU per tool call, medians of per-round ratios) shows it saves at least 2 %; its comment
says how much. Tests run the general code too and require the same outcome. Tricks measured as saving less are
removed, not kept "just in case" (``docs/architecture.md``, Speed tricks, lists them).

Three tricks of the readers above ``core/`` stay beside the code they speed up, where the layers put them; the
same benchmark measures them: the typed decoder of OTLP/JSON requests in the common shape (``otlp/json_typed.py``:
24-27 % of the general decoder's time saved), the general decoder's inline reads of string and integer
attributes (``otlp/json_general.py`` ``attributes``: 14-15 %) and the extractor's inline reads of plain attribute
keys (``conventions/extract.py``: 13-14 % of reading a tool span).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Observation

if TYPE_CHECKING:
    from .judge import Judged, Step, TraceJudge
    from .ladder import LadderState

__all__ = ["judge_alone", "quiet_observation"]


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
    if call is not None:
        # Most calls' texts are short (or absent) and kept as they are: compact only when one is not.
        args, result = call.arguments, call.result
        max_bytes = judge._max_bytes
        if not ((args is None or (args.__class__ is str and len(args) <= max_bytes))
                and (result is None or (result.__class__ is str and len(result) <= max_bytes))):
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
