"""Steps that are not tool calls: hand-offs, sub-agent invocations and model turns, and degenerate outputs.

A trace is judged in one sequence per kind of step (:data:`~.model.STEP_KINDS`): tool calls as before, and each
other kind in a lane of its own, by the same engine class (:meth:`LoopEngine.for_kind`), so a hand-off between two
tool calls never changes the tool calls' periods, and a trace without such steps costs exactly what it did.

* a **hand-off** (``triage → billing``) and a **sub-agent invocation** have the signature (from agent, to agent,
  normalised input digest) and the evidence the sub-agent's output digest (or the state the hand-off carries);
* a **model turn** has the signature of its normalised answer (:func:`text_digest`) and the evidence of what was new
  in the conversation since the model last answered;
* a **degenerate output** is one model answer whose last :data:`OUTPUT_TAIL_BYTES` end in one chunk repeated
  (:func:`tail_repetition`): ``stuck`` at once, rule ``output_repetition``.

:class:`Lanes` holds one trace's lanes for its :class:`~.judge.TraceJudge`.
"""

from __future__ import annotations

import hashlib
import re

from .config import LoopGuardConfig
from .engine import LoopEngine, TraceState
from .model import STEP_AGENT, STEP_HANDOFF, STEP_MODEL, STUCK, UNCERTAIN, Intervention, Observation, ToolCall, Verdict

__all__ = [
    "LANE_SPAN_BIT",
    "MAX_CHUNK_CHARS",
    "NEWS_ONLY",
    "OUTPUT_TAIL_BYTES",
    "Lanes",
    "tail_repetition",
    "text_digest",
]

#: A model output is checked for repetition over its last this many bytes (UTF-8): a degenerate answer can run on
#: for megabytes, and its end is where the loop is.
OUTPUT_TAIL_BYTES = 16 * 1024
#: The longest repeated chunk looked for, in characters (a paragraph; longer loops are a model turn repeating).
MAX_CHUNK_CHARS = 1024

#: Set in the span id of a step read from a span that also gives another step (a model span's turn beside its usage):
#: no real span id has it (they are 64-bit), so the judge's de-duplication keeps both.
LANE_SPAN_BIT = 1 << 64

#: The ``tool`` of a model step that is only news for the next hand-off (a model call that asked for tools: its new
#: input, such as the tool results it was given, is what the agents received since the last hand-off); never judged.
NEWS_ONLY = "\x00news"

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w")


def text_digest(text: str) -> str:
    """A digest of ``text`` normalised (case folded, runs of white space as one space, ends stripped).

    Two answers that differ only in case or spacing are the same answer to a reader, and to the model's next turn.
    """
    normal = _SPACE.sub(" ", text.casefold()).strip()
    return hashlib.blake2b(normal.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def tail_repetition(text: str) -> tuple[int, int] | None:
    """The chunk that repeats most at the very end of ``text``: (its length in characters, its count), or None.

    Only the last :data:`OUTPUT_TAIL_BYTES` are read. A chunk counts when it holds a letter or digit (a rule of
    dashes or a run of blank lines is layout, not a loop) and repeats at least twice back to back up to the end;
    among chunks with the most repeats the shortest wins. Linear in the tail per chunk length tried, and most
    lengths are rejected by one character comparison.

    >>> tail_repetition("Answer: " + "I will check the file. " * 12)
    (23, 12)
    >>> tail_repetition("----------") is None
    True
    """
    tail = text.encode("utf-8", "surrogatepass")[-OUTPUT_TAIL_BYTES:].decode("utf-8", "ignore")
    n = len(tail)
    best: tuple[int, int] | None = None
    last = tail[-1:]
    for length in range(1, min(MAX_CHUNK_CHARS, n // 2) + 1):
        if tail[n - 1 - length] != last:
            continue
        chunk = tail[n - length:]
        count, end = 1, n - length
        while end >= length and tail.startswith(chunk, end - length):
            count += 1
            end -= length
        if count >= 2 and (best is None or count > best[1]) and _WORD.search(chunk):
            best = (length, count)
    return best


class Lanes:
    """The lanes of one trace for the kinds of step other than tool calls, made on first use.

    Args:
        engine: the trace judge's engine (of tool calls); the lanes' engines come from :meth:`LoopEngine.for_kind`.
    """

    __slots__ = ("_engine", "_news", "_states", "latest")

    def __init__(self, engine: LoopEngine) -> None:
        self._engine = engine
        self._states: dict[str, tuple[LoopEngine, TraceState]] = {}
        #: The lane state of the step judged last (None after a tool call).
        self.latest: TraceState | None = None
        # What the trace did since the last hand-off: the evidence of the next one that carries
        # none of its own.
        self._news = hashlib.blake2b(digest_size=16)

    def note(self, call: ToolCall) -> None:
        """Take a tool call or model turn into what happened since the last hand-off (the next one's evidence)."""
        self.latest = None
        news = self._news
        news.update(call.tool.encode("utf-8", "surrogatepass"))
        for value in (call.arguments, call.result, call.error, call.progress):
            news.update(b"\x1f" + repr(value).encode("utf-8", "surrogatepass"))

    def enabled(self, kind: str) -> bool:
        """Whether the configuration judges steps of ``kind``."""
        cfg: LoopGuardConfig = self._engine.config
        if kind == STEP_HANDOFF:
            return cfg.handoff_steps
        if kind == STEP_AGENT:
            return cfg.agent_steps
        return kind == STEP_MODEL and (cfg.model_steps or cfg.output_repetition)

    def observe(self, kind: str, call: ToolCall, chunk: tuple[int, int] | None,
                untimed_at: float | None) -> Observation | None:
        """Judge one step of ``kind`` in its lane; None when that kind is switched off."""
        if not self.enabled(kind):
            return None
        if call.tool == NEWS_ONLY:
            self.note(call)
            return None
        lane = self._states.get(kind)
        if lane is None:
            engine = self._engine.for_kind(kind)  # type: ignore[arg-type]
            lane = self._states[kind] = (engine, engine.new_state())
        engine, state = lane
        if kind == STEP_MODEL:
            self.note(call)
            if call.tool == NEWS_ONLY:
                return None
        elif kind == STEP_HANDOFF and not call.result_captured:
            # A hand-off carrying no state: its evidence is what the agents did since the last one. (A sub-agent
            # step's evidence is its output: without one it has none.)
            call = ToolCall(tool=call.tool, arguments=call.arguments, arguments_captured=call.arguments_captured,
                            result="news " + self._news.hexdigest(), result_captured=True, start=call.start,
                            end=call.end)
            self._news = hashlib.blake2b(digest_size=16)
        self.latest = state
        cfg = engine.config
        if kind == STEP_MODEL and not cfg.model_steps:
            # Only degenerate outputs are judged: each turn on its own (a fresh window per turn).
            state = engine.new_state()
        observation = engine.observe(state, call, untimed_at if call.end is None and call.start is None else None)
        if (kind == STEP_MODEL and cfg.output_repetition and chunk is not None
                and chunk[1] >= cfg.output_repeat_limit):
            degenerate = engine.degenerate_output(state, chunk[0], chunk[1])
            if observation.transition is not None and degenerate.transition is not None:
                # One step, two changes (e.g. working → uncertain → stuck): told as one, from the first kind.
                degenerate = Observation(degenerate.index, degenerate.verdict,
                                         type(degenerate.transition)(degenerate.transition.step,
                                                                     observation.transition.previous,
                                                                     degenerate.verdict),
                                         degenerate.intervention, degenerate.signature_digest)
            observation = degenerate
        return observation

    def states(self) -> list[TraceState]:
        """The lanes' states, in the order the lanes were made."""
        return [state for _, state in self._states.values()]

    @property
    def stop(self) -> Intervention | None:
        """The first lane's stop, if any lane was stopped."""
        for _, state in self._states.values():
            if state.stop is not None:
                return state.stop
        return None

    @property
    def review(self) -> Intervention | None:
        """The first lane's pending review, if any lane asked for one."""
        for _, state in self._states.values():
            if state.review is not None:
                return state.review
        return None

    def resolve(self, approved: bool) -> list[Observation]:
        """A reviewer's answer, given to every lane with a pending review: the stops when declined."""
        out = []
        for engine, state in self._states.values():
            observation = engine.resolve(state, approved)
            if observation is not None:
                out.append(observation)
        return out

    def worst(self, verdict: Verdict) -> Verdict:
        """``verdict`` (the tool calls') unless a lane's is worse: stuck, then uncertain, over the rest."""
        for rank in (STUCK, UNCERTAIN):
            if verdict.kind == rank:
                return verdict
            for _, state in self._states.values():
                if state.verdict.kind == rank:
                    return state.verdict
        return verdict
