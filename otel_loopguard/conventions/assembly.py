"""The live paths' per-trace bookkeeping, shared by the processor and ``serve``'s table.

Both keep, per trace and beside its judge, the same record: what could not be read, the end times of its tool calls
(for agent spans counted after the fact), whether it has tool spans (then no call is derived from its model spans),
and what its task outcome needs (an error, a refusal). :class:`TraceRecord` is that record; each adapter adds only
what its source needs (the processor: open agent spans and the root span; ``serve``: arrival bookkeeping).
:class:`TurnLog` keeps a trace's model turns to derive its calls again exactly; :class:`UnreadLog` logs each cause
of unread input once per processor or server.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from ..core.judge import Step, TraceJudge
from ..core.outcome import TaskOutcome, outcome_of
from .agent_steps import handoff_of_tool, is_handoff_tool, model_step
from .extract import Extractor
from .model_calls import Turn, TurnJudge, refused
from .unread import Unread, UnreadTrace
from .versions import TraceVersions

#: Tool-call end times kept per trace, at most.
MAX_TOOL_ENDS = 4096
#: Causes of unread input logged per processor or server, at most.
MAX_UNREAD_LOGGED = 256
#: Model turns (and their results, one per call id) kept per trace for deriving its calls again, at most.
MAX_TURNS = 4096
#: The end of an agent span still open: it holds every time after its start.
OPEN_NS = 1 << 63
# The order calls are derived in: a derived call takes its result from the next model call's input.
TURN_ORDER = attrgetter("end_ns", "start_ns", "span_id")


def _no_span() -> Any:
    return None


def tool_span_step(step: Step, attrs: Mapping[str, Any], name: str, extractor: Extractor) -> Step:
    """A tool span's step as both live paths judge it: a transfer or delegation tool as a hand-off between agents
    (:func:`~.agent_steps.handoff_of_tool`), any other as the tool call it is."""
    call = step.call
    if is_handoff_tool(call.tool if call is not None else "", name):
        return handoff_of_tool(step, attrs, name, extractor.agent_name) or step
    return step


class AgentSpan:
    """An agent span of a trace, as the live paths attribute tool calls to agents: the innermost one (latest start,
    then earliest end) whose time holds the call's end (:meth:`TraceRecord.agent_span_at`).

    ``serve`` keeps every one received, with its times; the processor keeps them from their start, open ones ending
    at :data:`OPEN_NS`, each with a weak reference to its span while open (where span events go: one that ends unseen
    frees itself), and counts the calls attributed to each.
    """

    __slots__ = ("end_ns", "name", "span", "span_id", "start_ns", "told", "tool_calls")

    def __init__(self, span_id: int, name: str | None, span: Any = None, start_ns: int = 0, end_ns: int = 0) -> None:
        self.span_id = span_id
        self.name = name
        self.span: Any = weakref.ref(span) if span is not None else _no_span
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.tool_calls = 0
        # Whether its tool calls were recorded in the histogram (``serve``: once, at the first finish after it came).
        self.told = False

    def close(self, end_ns: int) -> None:
        """The span ended at ``end_ns``: it holds times up to then, and its span is no longer referenced."""
        self.end_ns = end_ns
        self.span = _no_span

    def holds(self, end_ns: int) -> bool:
        """Whether its time holds ``end_ns``."""
        return self.start_ns <= end_ns <= self.end_ns


class TraceRecord:
    """What a live path keeps about one trace besides its judge (the caller holds the trace's lock).

    Attributes:
        agents: its agent spans with their times (``serve``: every one received; the processor: from their start).
        unread: what could not be read (made on first use: :meth:`unread_now`).
        turns: its model turns (made at the first model span: :meth:`turns_now`).
        tool_ends: end times of the trace's judged tool calls (bounded), for agent spans counted afterwards.
        has_tools: the trace has a tool span: its calls are read from tool spans, none derived from model spans.
        failed: an agent or root span ended in error (the task's ``error`` outcome).
        refused: a model call was refused (the task's ``refused`` outcome).
        versions: the versions its spans carry (conventions/versions.py), for its events and its task outcome.
    """

    __slots__ = ("agents", "failed", "has_tools", "refused", "tool_ends", "turns", "unread", "versions")

    def __init__(self) -> None:
        self.agents: list[AgentSpan] = []
        self.unread: UnreadTrace | None = None
        self.turns: TurnLog | None = None
        self.tool_ends: list[int] = []
        self.has_tools = False
        self.failed = False
        self.refused = False
        self.versions = TraceVersions()

    def unread_now(self) -> UnreadTrace:
        """The trace's unread-input record (made on first use)."""
        unread = self.unread
        if unread is None:
            unread = self.unread = UnreadTrace()
        return unread

    def turns_now(self) -> TurnLog:
        """The trace's model turns (made on first use; deriving no call when the trace has a tool span)."""
        turns = self.turns
        if turns is None:
            turns = self.turns = TurnLog()
            if self.has_tools:
                turns.forget()
        return turns

    def tools_seen(self) -> TurnLog | None:
        """The trace has a tool span: its calls are read from tool spans from now on, none derived from its model
        spans (what was kept to derive them is dropped). Returns its model turns, if any."""
        self.has_tools = True
        turns = self.turns
        if turns is not None and turns.judge.derive:
            turns.forget()
        return turns

    def model_calls(self) -> int:
        """Model calls with token usage so far, each counted once (the task's turns)."""
        return self.turns.judge.calls if self.turns is not None else 0

    def tool_ended(self, end_ns: int) -> None:
        """Note a judged tool call's end time (the first :data:`MAX_TOOL_ENDS` of a trace)."""
        if len(self.tool_ends) < MAX_TOOL_ENDS:
            self.tool_ends.append(end_ns)

    def calls_between(self, start_ns: int, end_ns: int) -> int:
        """The trace's tool calls that ended within ``[start_ns, end_ns]`` (an agent span's, counted afterwards)."""
        return sum(1 for t in self.tool_ends if start_ns <= t <= end_ns)

    def agent_span_at(self, end_ns: int) -> AgentSpan | None:
        """The innermost agent span holding ``end_ns``: the latest to start, then the earliest to end (ties: the one
        noted first), or None. One rule for both live paths."""
        agents = self.agents
        if len(agents) == 1:  # the usual trace: one agent span
            only = agents[0]
            return only if only.start_ns <= end_ns <= only.end_ns else None
        best: AgentSpan | None = None
        for agent in agents:
            start = agent.start_ns
            if start <= end_ns <= agent.end_ns and (
                    best is None or start > best.start_ns or (start == best.start_ns and agent.end_ns < best.end_ns)):
                best = agent
        return best

    def agent_at(self, end_ns: int) -> str | None:
        """The name of the innermost agent span holding ``end_ns`` (:meth:`agent_span_at`), or None."""
        best = self.agent_span_at(end_ns)
        return best.name if best is not None else None

    def agent_calls(self) -> tuple[tuple[str | None, int], ...]:
        """(name, tool calls) of the agent spans not told yet; each call counts for the innermost one holding it."""
        agents = self.agents
        if not agents or all(a.told for a in agents):
            return ()
        if len(agents) == 1:
            # One agent span (the usual trace): the calls its time holds.
            only = agents[0]
            only.told = True
            return ((only.name, self.calls_between(only.start_ns, only.end_ns)),)
        counts = dict.fromkeys(map(id, agents), 0)
        for end in self.tool_ends:
            best = self.agent_span_at(end)
            if best is not None:
                counts[id(best)] += 1
        out = []
        for agent in agents:
            if not agent.told:
                agent.told = True
                out.append((agent.name, counts[id(agent)]))
        return tuple(out)

    def outcome(self, judge: TraceJudge | None, agent: str | None, times: tuple[int, int] | None) -> TaskOutcome:
        """How the trace's task ended so far: its judge's stop and figures (none without a judge), an error or a
        refusal noted, ``agent`` (the adapter's choice), the duration of ``times`` (start, end in ns) and its
        versions."""
        return TaskOutcome(
            outcome=outcome_of(stopped=judge is not None and judge.stop is not None, error=self.failed,
                               refused=self.refused),
            agent=agent,
            turns=self.model_calls(),
            tool_calls=judge.steps if judge is not None else 0,
            tool_errors=judge.failed_calls if judge is not None else 0,
            cost_usd=judge.known_cost if judge is not None else None,
            duration_s=(times[1] - times[0]) * 1e-9 if times is not None and times[1] >= times[0] else None,
            versions=dict(self.versions.values()),
        )

    def model_span(self, extractor: Extractor, attrs: Mapping[str, Any], name: str, span_id: int,
                   parent_span_id: int | None, start_ns: int, end_ns: int, *, context: bool, agent: str | None,
                   with_news: bool) -> tuple[Turn | None, Step | None]:
        """Read a model span of the trace: a refused call and its keys for the unread note noted, its turn (with its
        messages while the trace's calls are derived from them) and its lane step
        (:func:`~.agent_steps.model_step`, named after the turn's agent with ``context``, else after ``agent``)."""
        if refused(attrs):
            self.refused = True
        (self.unread or self.unread_now()).model(attrs)
        turn = extractor.model_turn(attrs, name, span_id, parent_span_id, start_ns, end_ns,
                                    messages=(self.turns or self.turns_now()).judge.derive, context=context)
        if context and turn is not None:
            agent = turn.agent
        return turn, model_step(attrs, span_id, parent_span_id, start_ns, end_ns, agent, with_news=with_news)

    def agent_read(self, attrs: Mapping[str, Any], error: bool) -> None:
        """Note an agent span that ended: its keys for the unread note; in ``error``, the task's ``error`` outcome."""
        self.unread_now().model(attrs)
        if error:
            self.failed = True

    def pending_calls(self) -> list[Step]:
        """At the trace's finish: the calls derived from its model spans that never got a result, to be judged now
        without one, after the trace's other steps (none while its calls are read from tool spans)."""
        turns = self.turns
        return turns.judge.finish() if turns is not None and turns.judge.derive else []


class TurnLog:
    """A trace's model turns: usage once per model call, and its tool calls derived from them while it has no tool
    span (live, in arrival order; again, exactly, in end order at the finish when they arrived out of order)."""

    __slots__ = ("full", "ids", "judge", "last", "log", "results", "unordered")

    def __init__(self) -> None:
        self.judge = TurnJudge()
        self.ids: set[int] = set()
        self.log: list[Turn] = []
        # Result of each call id: (the earliest input holding it, as (start_ns, span_id), the result).
        self.results: dict[str, tuple[tuple[int, int], Any]] = {}
        self.last: tuple[int, int, int] | None = None
        self.unordered = False
        self.full = False

    def keep(self, turn: Turn) -> None:
        """Log a turn for an exact derivation later (each result once, with the earliest input holding it)."""
        key = TURN_ORDER(turn)
        if self.last is not None and key < self.last:
            self.unordered = True
        else:
            self.last = key
        if len(self.log) >= MAX_TURNS or len(self.results) >= MAX_TURNS:
            self.full = True
            return
        self.log.append(self._first_results(turn)[0])

    def derive_again(self) -> list[Step]:
        """Every derived call, from the logged turns in end order (as ``audit`` derives them)."""
        fresh = TurnJudge()
        out: list[Step] = []
        for turn in self.in_end_order():
            out += [s for s in fresh.add(turn) if s.call is not None]
        out += fresh.finish()
        self.judge = fresh
        self.unordered = False
        return out

    def forget(self) -> None:
        """The trace has tool spans: nothing is derived, nothing kept for it."""
        self.judge.tool_span_seen()
        self.log = []
        self.results = {}

    def in_end_order(self) -> list[Turn]:
        """The logged turns in end order, each input holding the results first recorded in it (:meth:`keep`)."""
        by_turn: dict[int, list[tuple[str, Any]]] = {}
        for call_id, ((_, span_id), result) in self.results.items():
            by_turn.setdefault(span_id, []).append((call_id, result))
        return [turn._replace(results=tuple(by_turn.get(turn.span_id, ()))) if turn.results is not None else turn
                for turn in sorted(self.log, key=TURN_ORDER)]

    def hold(self, turn: Turn) -> int:
        """Log a turn until its trace is judged whole (``audit``: bounded by the caller's byte budget, not
        :data:`MAX_TURNS`); returns the estimated bytes newly held (:func:`turn_bytes`)."""
        added = 0
        if turn.results:
            turn, added = self._first_results(turn)
        self.log.append(turn)
        return added + turn_bytes(turn)

    def held_bytes(self) -> int:
        """Estimated bytes of the logged turns and results (:func:`turn_bytes`)."""
        return sum(map(turn_bytes, self.log)) + sum(_result_bytes(r) for _, r in self.results.values())

    def drop_messages(self) -> int:
        """The trace has a tool span (``audit``, holding turns until the end): nothing is derived, the logged turns
        keep only their usage. Returns the estimated bytes freed."""
        self.judge.tool_span_seen()
        if not self.results and not any(t.calls or t.history for t in self.log):
            return 0
        before = self.held_bytes()
        self.log = [t._replace(calls=(), results=None, history=()) for t in self.log]
        self.results = {}
        return before - self.held_bytes()

    def _first_results(self, turn: Turn) -> tuple[Turn, int]:
        """Each input repeats every earlier result: each is kept once, with the earliest input holding it (whatever
        order the spans arrive in); the turn keeps only that its input was recorded. Returns the turn and the
        estimated bytes of the results newly kept."""
        if not turn.results:
            return turn, 0
        first = self.results
        at = (turn.start_ns, turn.span_id)
        added = 0
        for call_id, result in turn.results:
            known = first.get(call_id)
            if known is None:
                added += _result_bytes(result)
                first[call_id] = (at, result)
            elif at < known[0]:
                first[call_id] = (at, result)
        return turn._replace(results=()), added


class UnreadLog:
    """Which causes of unread input (reason and keys) were logged: each is logged once per processor or server, at
    most :data:`MAX_UNREAD_LOGGED`. Remembered by a 16-byte digest: the keys are bounded already, but 256 causes of
    12 keys each would still be kept for the process's life. Thread-safe."""

    __slots__ = ("_lock", "_seen")

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def first(self, cause: Unread) -> bool:
        """Whether ``cause`` is to be logged now (never logged before, and the limit not reached)."""
        key = hashlib.blake2b(repr((cause.reason, cause.keys)).encode("utf-8", "surrogatepass"),
                              digest_size=16).digest()
        with self._lock:
            if key in self._seen or len(self._seen) >= MAX_UNREAD_LOGGED:
                return False
            self._seen.add(key)
            return True


#: Estimated bytes of one held model turn besides its message content.
TURN_OVERHEAD_BYTES = 256


def turn_bytes(turn: Turn) -> int:
    """Estimated bytes of a held model turn (``audit``'s budget): its calls, history and results."""
    size = TURN_OVERHEAD_BYTES
    for _, name, args in (*turn.calls, *turn.history):
        size += 64 + len(name) + (len(args) if isinstance(args, str) else 256)
    for call_id, result in turn.results or ():
        size += 64 + len(call_id) + (len(result) if isinstance(result, str) else 256)
    return size


def _result_bytes(result: Any) -> int:
    return 64 + (len(result) if isinstance(result, str) else 256)
