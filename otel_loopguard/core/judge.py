"""One trace judge for every path: the processor, ``audit``, ``report`` and ``serve``.

A convention reader turns each span that matters into a :class:`Step` (a tool call, or a model call's token usage,
with its span and parent ids and times). A :class:`TraceJudge` takes the steps of one trace and owns everything
between the spans and the engine:

* **de-duplication**: a span id seen twice counts once (exporter and Collector retries, overlapping export files);
* **nesting**: nested tool spans of one call count once (:class:`Nesting`; the default joins an MCP client span
  into the ``execute_tool`` span around it);
* **order**: steps are judged in start-time order (ties by end time, then span id), whatever order they arrive in,
  except the steps known only when their trace ended (:attr:`Step.at_end`: calls derived from model spans that never
  got a result), judged after all the others: the live paths cannot know them earlier, so every path judges them
  last (:data:`STEP_ORDER`);
* **compact memory**: argument and result text longer than ``max_argument_bytes`` is replaced by a short digest
  text before it is kept (the engine never parses such text: it compares it whole, and so does the digest);
* **the engine**: :meth:`LoopEngine.observe`, :meth:`~LoopEngine.add_usage` and :meth:`~LoopEngine.reevaluate`;
* **the step audit**, incrementally (:class:`~.step_audit.StepAudit`: O(1) memory per trace);
* **the report** (:class:`TraceReport`).

Three ways to use it:

* *whole trace* (``audit``, ``report``): :meth:`TraceJudge.add` every step in any order, then
  :meth:`TraceJudge.finish` judges them once, in start order, and :meth:`TraceJudge.report` summarises.
* *live* (the processor): :meth:`TraceJudge.judge` each step as its span ends; an inner step whose parent tool span
  is still open (``parent_open=True``) waits for that parent, so the two are joined before either is judged.
* *live with late arrivals* (``serve``): :meth:`~TraceJudge.add` a batch, then :meth:`~TraceJudge.advance`. A step
  that starts before one already judged (or that joins a call already judged) is judged at once in arrival order,
  and the judge becomes *reordered*: what it says from then on is provisional (:attr:`Judged.provisional`), and
  :meth:`~TraceJudge.finish` judges the trace once more, exactly, in start order, from the steps it kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec

from .agent_steps import NEWS_ONLY, Lanes
from .cost import CostTotal, Usage
from .engine import LoopEngine, TraceState
from .fastpath import judge_alone, short_texts, sort_steps
from .model import STEP_MODEL, STEP_TOOL, STUCK, Intervention, Observation, StepKind, ToolCall, Transition, Verdict
from .outcome import TaskOutcome
from .signature import NUDGE_MARKER
from .step_audit import StepAudit

__all__ = [
    "MCP_CLIENT_NESTING",
    "ORIGIN_MCP_CLIENT",
    "STEP_ORDER",
    "Judged",
    "Nesting",
    "NestingRule",
    "Step",
    "TraceJudge",
    "TraceReport",
    "compact_value",
    "join_nested",
    "judge_in_order",
    "replay_calls",
]

#: :attr:`Step.origin` of an MCP client span (``mcp.method.name``): it repeats the call of an enclosing tool span.
ORIGIN_MCP_CLIENT = "mcp.client"

#: Transitions and interventions a judge keeps for its report (the engine's own bound on transitions).
MAX_KEPT_EVENTS = 1000
#: Span ids a judge remembers for de-duplication, at most (a trace with more steps is not checked beyond them).
MAX_SPAN_IDS = 1 << 16
#: Inner steps a live judge holds while their parent tool span is open, at most (more are judged on their own).
MAX_HELD = 256
#: Estimated bytes of one kept step besides its argument and result text (the struct, its call, ids and times).
STEP_OVERHEAD_BYTES = 480

#: The order a judge judges a trace's steps in: steps known only at the trace's end last, then start time, end time
#: and span id (``audit``, calibration's replay and ``serve``'s exact re-judgement sort by it; the live paths meet
#: it by judging :attr:`Step.at_end` steps when the trace ends). Lists are sorted by it with
#: :func:`~.fastpath.sort_steps`, which gives this order in two cheaper sorts.
STEP_ORDER = attrgetter("at_end", "start_ns", "end_ns", "span_id")


class Step(msgspec.Struct, frozen=True, gc=False):
    """One span that matters to the judge: a tool call, or a model call's token usage.

    Built by the convention readers from a span (``conventions.traces.StepReader`` for decoded spans, the processor
    for live ones); a frozen value, compared field by field. Not tracked by the garbage collector: its fields are
    decoded values and value types, which cannot refer back to it.

    Attributes:
        span_id: the span's id (64-bit int); two steps with one span id are one delivery of the same span.
        parent_span_id: the parent span's id, or None for a root span.
        start_ns: start time, ns since the epoch; with ``end_ns`` and ``span_id`` it orders the steps of a trace.
        end_ns: end time, ns since the epoch.
        call: the tool call, for a tool span (``ToolCall.start``/``end`` are the span's times in seconds).
        model: the model of a usage step, when known.
        usage: the token usage of a model call (a usage step has ``call`` None).
        agent: the agent name, when the span says it.
        conversation: the conversation (session) id, when the span says it.
        origin: the convention the span was read in, as far as :class:`Nesting` rules need it (e.g.
            :data:`ORIGIN_MCP_CLIENT`); "" when no rule looks at it.
        kind: the kind of step (:data:`~.model.STEP_KINDS`); a step of another kind than ``tool`` is judged in a
            sequence of its own (:class:`~.agent_steps.Lanes`), its ``call`` built by its reader.
        chunk: for a model turn, the chunk its output's tail repeats, as (length, count)
            (:func:`~.agent_steps.tail_repetition`).
        at_end: the step is known only when its trace ended (a call derived from a model span that never got its
            result): it is judged after every other step of the trace, whatever its times (:data:`STEP_ORDER`).
    """

    span_id: int
    parent_span_id: int | None = None
    start_ns: int = 0
    end_ns: int = 0
    call: ToolCall | None = None
    model: str | None = None
    usage: Usage | None = None
    agent: str | None = None
    conversation: str | None = None
    origin: str = ""
    kind: StepKind = STEP_TOOL
    chunk: tuple[int, int] | None = None
    at_end: bool = False


class NestingRule(msgspec.Struct, frozen=True):
    """When a tool step nested in another tool step is the same call.

    Attributes:
        inner: the :attr:`Step.origin` of the inner step this rule is about.
        join: called with (outer step, inner step), the inner span being a child of the outer one; returns the one
            step that stands for both (the outer, the inner, or a new step combining them) when they are one call,
            or None when they are two calls. The returned step's times place the call in the trace.
    """

    inner: str
    join: Callable[[Step, Step], Step | None]


class Nesting:
    """The rules that join nested tool spans of one call, tried in order; the first that joins decides.

    A convention adds a rule by naming the origin of the inner span and a join function, e.g. an OpenInference
    TOOL span (origin ``"openinference"``) wrapping the native ``execute_tool`` span (origin ``"genai"``) of the
    same tool, overlapping in time, the span that carries the content standing for the call::

        def wrapped(outer: Step, inner: Step) -> Step | None:
            if outer.origin != "openinference" or outer.call.tool != inner.call.tool:
                return None
            if not (inner.start_ns < outer.end_ns and outer.start_ns < inner.end_ns):
                return None
            return inner if inner.call.arguments_captured else outer

        nesting = Nesting(NestingRule("genai", wrapped), *MCP_CLIENT_NESTING.rules)
        judge = TraceJudge(engine, nesting=nesting)

    The judge offers a pair only when the inner step's parent span is a tool step of the same trace; it applies the
    rules when it orders a whole trace, when a batch holds both, and live (the processor) by holding an inner step
    whose parent tool span is still open until that parent ends. A pair that can only be joined after one of them
    was judged on its own (``serve``: the parent arrived later) makes the judge reordered, and its finish joins them.

    Args:
        rules: the rules. A step whose origin no rule names is never joined, and costs nothing to check.
    """

    __slots__ = ("inner_origins", "rules")

    def __init__(self, *rules: NestingRule) -> None:
        self.rules = rules
        #: Origins of inner steps that some rule may join into their parent.
        self.inner_origins = frozenset(rule.inner for rule in rules)

    def join(self, outer: Step, inner: Step) -> Step | None:
        """The step standing for ``outer`` and its child ``inner`` when they are one call, else None."""
        origin = inner.origin
        for rule in self.rules:
            if rule.inner == origin:
                joined = rule.join(outer, inner)
                if joined is not None:
                    return joined
        return None

    def __repr__(self) -> str:
        return f"Nesting({', '.join(rule.inner for rule in self.rules)})"


def _outer_stands(outer: Step, inner: Step) -> Step | None:
    # An MCP client span inside a tool span is the transport of that same call: the tool span counts.
    return outer if outer.call is not None else None


#: The default nesting: an MCP client span whose parent is a tool span is that call, counted once (the parent).
MCP_CLIENT_NESTING = Nesting(NestingRule(ORIGIN_MCP_CLIENT, _outer_stands))


class Judged(msgspec.Struct, frozen=True, gc=False):
    """An observation worth telling (a transition or an intervention), with what caused it.

    Attributes:
        observation: the engine's observation.
        step: the step that caused it; None for a re-evaluation at the end of the trace (an expired lease).
        steps: tool calls judged in the trace at that point.
        provisional: True when the trace's steps were not all judged in start order (a late arrival); the judge
            judges it again, exactly, when it finishes.
    """

    observation: Observation
    step: Step | None
    steps: int
    provisional: bool = False


def compact_value(value: Any, max_bytes: int) -> tuple[Any, int]:
    """A stand-in for an argument or result too large to keep, and the bytes the kept value holds.

    Text longer than ``max_bytes`` becomes ``<N characters, blake2b HEX>``: the engine never parses such text and
    compares it whole, and equal texts give equal stand-ins, so verdicts do not change. Other values (maps and
    lists from OTLP) are measured by their JSON encoding and replaced the same way when larger. A result's loopguard
    nudge (after :data:`~.signature.NUDGE_MARKER`) is cut first, as the engine cuts it.

    Args:
        value: the raw argument or result.
        max_bytes: the configuration's ``max_argument_bytes``.

    Returns:
        (the value to keep, its size in characters or bytes).
    """
    if value is None:
        return None, 0
    if value.__class__ is str:
        size = len(value)
        if size <= max_bytes:
            return value, size
        if NUDGE_MARKER in value:
            value = value.split(NUDGE_MARKER, 1)[0]
            if len(value) <= max_bytes:
                return value, len(value)
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
        text = f"<{len(value)} characters, blake2b {digest}>"
        return text, len(text)
    try:
        encoded = msgspec.json.encode(value, order="sorted")
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError):
        encoded = repr(value).encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return value, len(encoded)
    text = f"<{len(encoded)} bytes of JSON, blake2b {hashlib.blake2b(encoded, digest_size=12).hexdigest()}>"
    return text, len(text)


def _compact(step: Step, max_bytes: int) -> tuple[Step, int]:
    """``step`` with oversized argument and result text replaced by stand-ins, and its estimated size in bytes."""
    call = step.call
    if call is None:
        return step, STEP_OVERHEAD_BYTES
    kept = short_texts(call, max_bytes)  # core/fastpath.py
    if kept >= 0:
        return step, STEP_OVERHEAD_BYTES + kept
    args, result = call.arguments, call.result
    new_args, args_size = compact_value(args, max_bytes)
    new_result, result_size = compact_value(result, max_bytes)
    if new_args is not args or new_result is not result:
        call = ToolCall(
            tool=call.tool, arguments=new_args, arguments_captured=call.arguments_captured, result=new_result,
            result_captured=call.result_captured, error=call.error, progress=call.progress, start=call.start,
            end=call.end, lease=call.lease,
        )
        step = msgspec.structs.replace(step, call=call)
    return step, STEP_OVERHEAD_BYTES + args_size + result_size


def join_nested(steps: list[Step], nesting: Nesting) -> list[Step]:
    """Join the nested tool steps of one call; ``steps`` in start order, the answer too.

    A tool step whose origin a rule names and whose parent span is a tool step among ``steps`` is offered to the
    rules with the step that stands for its parent's call (already joined with earlier children); when a rule joins
    them, the pair counts as that one step. An inner step that sorts before its parent waits for it.
    """
    inner = nesting.inner_origins
    tool_ids = {s.span_id for s in steps if s.call is not None}
    if not any(s.parent_span_id in tool_ids and s.origin in inner for s in steps):
        return steps  # no step a rule may join: the usual trace, unchanged
    out: list[Step] = []
    position: dict[int, int] = {}  # span id of a tool step -> index in ``out`` of the step standing for its call
    waiting: dict[int, list[Step]] = {}  # parent span id -> inner steps that sorted before it
    joined = False

    def place(step: Step) -> None:
        nonlocal joined
        parent = step.parent_span_id
        if step.origin in inner and parent is not None and parent in tool_ids:
            at = position.get(parent)
            if at is None:
                waiting.setdefault(parent, []).append(step)
                return
            merged = nesting.join(out[at], step)
            if merged is not None:
                out[at] = merged
                position[step.span_id] = at
                joined = True
                for child in waiting.pop(step.span_id, ()):
                    place(child)
                return
        position[step.span_id] = len(out)
        out.append(step)
        for child in waiting.pop(step.span_id, ()):
            place(child)

    for step in steps:
        if step.call is None:
            out.append(step)
        else:
            place(step)
    for children in waiting.values():  # parents that never placed (a cycle of ids): counted on their own
        out.extend(children)
        joined = True
    if joined:
        sort_steps(out)
    return out


@dataclass(frozen=True)
class TraceReport:
    """The outcome of one trace.

    Attributes:
        source: where the trace came from (a file name, several joined by ", ", or ``serve``).
        trace_id: hex trace id, or None for steps files.
        verdict: the verdict after the last call (and after judging again at the observation time).
        stuck_period: the period of the cycle the trace is stuck in; None unless the final verdict is stuck.
        steps_used: tool calls in the trace.
        transitions: every change of verdict kind.
        interventions: every nudge and stop.
        ok: the step audit's result (no step-limit or repeated-call violation).
        violations: the step audit's violations, sorted.
        cost: model usage cost, when usage was seen or prices are configured.
        attributes: grouping attributes (for ``report``).
        partial: True when the trace was judged without some of its spans or not wholly in start order, because a
            memory bound forced it out early or its kept steps outgrew their budget.
        failed_calls: tool calls that failed.
        duplicates: spans of the trace delivered more than once (counted once).
        unread: why spans that look like an agent's could not be read as tool calls (JSON objects with
            ``reason``, ``keys``, ``spans``, ``message``; filled in by the conventions layer).
        task: how the trace ended (outcome, turns, tool calls, cost, duration), decided as the processor and
            ``serve`` decide it; filled in by the conventions layer for stored traces (``report``).
        versions: the trace's versions, (name, bounded value) sorted by name (``serve``; ``audit`` and ``report``
            when their collector is asked for them; see otel_loopguard/conventions/versions.py).
    """

    source: str
    trace_id: str | None
    verdict: Verdict
    stuck_period: int | None
    steps_used: int
    transitions: tuple[Transition, ...]
    interventions: tuple[Intervention, ...]
    ok: bool
    violations: tuple[str, ...]
    cost: CostTotal | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    partial: bool = False
    failed_calls: int = 0
    duplicates: int = 0
    unread: tuple[dict[str, Any], ...] = ()
    task: TaskOutcome | None = None
    versions: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The JSON object ``otel-loopguard audit --json`` prints for this trace."""
        out: dict[str, Any] = {
            "source": self.source,
            "trace_id": self.trace_id,
            "verdict": self.verdict.kind,
            "rule": self.verdict.rule,
            "period": self.stuck_period,
            "steps_used": self.steps_used,
            "ok": self.ok,
            "violations": list(self.violations),
            "transitions": [_transition_dict(t) for t in self.transitions],
            "interventions": [
                {"step": i.step, "call": i.step + 1, "action": i.action, "message": i.message, "rule": i.rule}
                for i in self.interventions
            ],
            "partial": self.partial,
        }
        _add_step_kind(out, self.verdict)
        if self.cost is not None:
            out["cost_usd"] = round(self.cost.usd, 6)
            if self.cost.unpriced_tokens:
                out["unpriced_tokens"] = self.cost.unpriced_tokens
                out["unpriced_models"] = sorted(self.cost.unpriced_models)
        if self.unread:
            out["unread"] = [dict(u) for u in self.unread]
        return out


def _transition_dict(transition: Transition) -> dict[str, Any]:
    # ``step`` is the 0-based index of the call, ``call`` its number from 1 (as ``loopguard.steps`` counts);
    # a period belongs to a stuck verdict only (an uncertain or retrying repetition has none to report).
    verdict = transition.verdict
    out = {
        "step": transition.step,
        "call": transition.step + 1,
        "from": transition.previous,
        "to": verdict.kind,
        "rule": verdict.rule,
        "period": verdict.period if verdict.kind == STUCK else None,
    }
    _add_step_kind(out, verdict)
    return out


def _add_step_kind(out: dict[str, Any], verdict: Verdict) -> None:
    # Tool calls keep the JSON they always had; other kinds of step say which, and the agents of the cycle.
    if verdict.step_kind != STEP_TOOL:
        out["step_kind"] = verdict.step_kind
        out["agents"] = list(verdict.agents)
        if verdict.chunk_length is not None:
            out["chunk_length"] = verdict.chunk_length
            out["chunk_count"] = verdict.repetitions


def _event_key(observation: Observation) -> tuple[Any, ...]:
    t, i = observation.transition, observation.intervention
    return (
        observation.index,
        (t.step, t.previous, t.verdict.kind, t.verdict.rule) if t is not None else None,
        (i.step, i.action, i.rule) if i is not None else None,
    )


class TraceJudge:
    """Judges one trace from its steps (see the module docstring for the three ways to use it).

    Not thread-safe: callers that share a judge between threads hold a lock around every call.

    Args:
        engine: the engine (and configuration) to judge with; its ``max_argument_bytes`` bounds kept text.
        nesting: the rules that join nested tool spans of one call.
        keep_steps: keep every step (compact) and the span ids seen, so the trace can be de-duplicated and judged
            again in start order (``audit``, ``report``, ``serve``). The live processor, which judges in end
            order and never re-judges, passes False.
        track_events: remember the events told so far, so an exact re-judge tells only new ones (``serve``).
        step_audit: compute the step audit (the processor, which reports none, passes False).
    """

    __slots__ = (
        "_audit",
        "_emitted",
        "_engine",
        "_held",
        "_held_count",
        "_ids",
        "_inner",
        "_inner_parents",
        "_interventions",
        "_lanes",
        "_lanes_read",
        "_last",
        "_late",
        "_log",
        "_max_bytes",
        "_nesting",
        "_ready",
        "_state",
        "_step_audit",
        "_transitions",
        "duplicates",
        "failed_calls",
        "kept_bytes",
        "partial",
        "rejudged",
        "reordered",
        "retracted",
        "seen_usage",
    )

    def __init__(
        self,
        engine: LoopEngine,
        *,
        nesting: Nesting = MCP_CLIENT_NESTING,
        keep_steps: bool = True,
        track_events: bool = False,
        step_audit: bool = True,
    ) -> None:
        self._engine = engine
        self._nesting = nesting
        self._inner = nesting.inner_origins
        self._max_bytes = engine.config.max_argument_bytes
        self._step_audit = step_audit
        self._log: list[Step] | None = [] if keep_steps else None
        self._ids: set[int] | None = set() if keep_steps else None
        self._emitted: set[tuple[Any, ...]] | None = set() if track_events else None
        self._ready: list[Step] = []
        self._held: dict[int, list[Step]] = {}
        self._held_count = 0
        self._inner_parents: set[int] = set()
        self._last: tuple[bool, int, int, int] | None = None
        # A step known only at the trace's end was added (the steps' sorts then check for them).
        self._late = False
        #: Bytes the kept steps hold (estimated); 0 when steps are not kept.
        self.kept_bytes = 0
        #: Deliveries of a span already seen.
        self.duplicates = 0
        #: True when a step was judged out of start order since the last exact judgement.
        self.reordered = False
        #: True when the report may miss spans or order (see :attr:`TraceReport.partial`).
        self.partial = False
        #: Exact re-judgements done by :meth:`finish`.
        self.rejudged = 0
        #: Events told earlier that an exact re-judgement no longer produced.
        self.retracted = 0
        self._reset()

    def _reset(self) -> None:
        # The engine's state and the step audit are made when first needed: a whole-trace judge (audit) holds
        # only its steps until the input ends, for every trace of the input at once.
        self._state: TraceState | None = None
        self._audit: StepAudit | None = None
        self._transitions: list[Transition] = []
        self._interventions: list[Intervention] = []
        # Hand-offs, sub-agent invocations and model turns, each in a sequence of its own (made on first use).
        self._lanes: Lanes | None = None
        self._lanes_read = False
        #: Tool calls judged that failed.
        self.failed_calls = 0
        #: Whether model usage was judged.
        self.seen_usage = False

    @property
    def state(self) -> TraceState:
        """The engine's state of the trace (read ``verdict``, ``steps``, ``cost``, ``stop``, ``last_intervention``)."""
        state = self._state
        if state is None:
            engine = self._engine
            state = self._state = engine.new_state()
            if self._step_audit:
                cfg = engine.config
                self._audit = StepAudit(cfg.max_steps, cfg.repeat_limit)
        return state

    # -- what the callers read ----------------------------------------------------------------------------------

    @property
    def verdict(self) -> Verdict:
        """The verdict now: the tool calls', unless the sequence of another kind of step is worse (stuck, then
        uncertain)."""
        lanes = self._lanes
        return self.state.verdict if lanes is None else lanes.worst(self.state.verdict)

    @property
    def has_lanes(self) -> bool:
        """Whether steps of another kind than tool calls (hand-offs, model turns) were judged in the trace."""
        return self._lanes is not None

    @property
    def lanes_read(self) -> bool:
        """Whether a hand-off, a sub-agent invocation, or a model turn with its input recorded was judged: the trace
        was read though it may have no tool call (a model turn without its input says too little: see
        :meth:`~otel_loopguard.conventions.unread.UnreadTrace.causes`)."""
        return self._lanes_read

    @property
    def steps(self) -> int:
        """Tool calls judged so far."""
        return self.state.steps

    @property
    def stop(self) -> Intervention | None:
        """The stop, once the trace was stopped (it stays), by its tool calls or another kind of step."""
        stop = self.state.stop
        if stop is None and self._lanes is not None:
            return self._lanes.stop
        return stop

    @property
    def last_intervention(self) -> Intervention | None:
        """The intervention decided by the last judged step, if any."""
        lanes = self._lanes
        if lanes is not None and lanes.latest is not None:
            return lanes.latest.last_intervention
        return self.state.last_intervention

    @property
    def review(self) -> Intervention | None:
        """The review asked for the trace (by its tool calls or another kind of step) and not answered yet."""
        review = self.state.review
        if review is None and self._lanes is not None:
            return self._lanes.review
        return review

    def resolve(self, approved: bool) -> list[Judged]:
        """A reviewer's answer to the pending reviews: the stops to tell when declined, else nothing."""
        observations = [self._engine.resolve(self.state, approved)]
        if self._lanes is not None:
            observations += self._lanes.resolve(approved)
        out: list[Judged] = []
        for observation in observations:
            if observation is not None:
                self._record(observation, None, out)
        return out

    @property
    def cost(self) -> CostTotal:
        """Model usage cost so far."""
        return self.state.cost

    @property
    def known_cost(self) -> float | None:
        """The trace's model cost in USD when it is known (usage was judged and every model had a price), else
        None: unpriced usage is never recorded as $0."""
        if not self.seen_usage:
            return None
        cost = self.state.cost
        return None if cost.unpriced_tokens else cost.usd

    @property
    def transitions(self) -> list[Transition]:
        """Every change of verdict kind so far (the first :data:`MAX_KEPT_EVENTS`)."""
        return list(self._transitions)

    @property
    def interventions(self) -> list[Intervention]:
        """Every nudge and stop so far (the first :data:`MAX_KEPT_EVENTS`)."""
        return list(self._interventions)

    @property
    def keeps_steps(self) -> bool:
        """Whether every step is still kept (False once :meth:`drop_steps` freed them, or never kept)."""
        return self._log is not None

    @property
    def pending(self) -> int:
        """Steps added but not judged yet."""
        return len(self._ready) + self._held_count

    # -- input --------------------------------------------------------------------------------------------------

    def add(self, step: Step, *, parent_open: bool = False) -> bool:
        """Take one step, in any order; :meth:`advance` or :meth:`finish` judges it.

        Args:
            step: the step.
            parent_open: the step's parent span is a tool span that has not ended yet (the processor knows);
                an inner step that a nesting rule may join then waits for that parent instead of being judged.

        Returns:
            False when the step's span was seen before (a duplicate delivery, counted once), else True.
        """
        ids = self._ids
        if ids is not None:
            span_id = step.span_id
            if span_id in ids:
                self.duplicates += 1
                return False
            if len(ids) < MAX_SPAN_IDS:
                ids.add(span_id)
        log = self._log
        if log is not None:
            step, size = _compact(step, self._max_bytes)
            log.append(step)
            self.kept_bytes += size
        else:
            step = _compact(step, self._max_bytes)[0]
        if step.at_end:
            self._late = True
        parent = step.parent_span_id
        if parent_open and parent is not None and step.origin in self._inner and self._held_count < MAX_HELD:
            self._held.setdefault(parent, []).append(step)
            self._held_count += 1
        else:
            self._ready.append(step)
        return True

    def assembled(self) -> list[Step]:
        """The steps :meth:`finish` would judge now, in its order with nested calls joined, without judging them.

        For a judge that has only taken steps (``audit``'s and calibration's readers): calibration replays these
        under many settings, so it judges exactly the steps ``audit`` judges.
        """
        steps = [*self._ready, *(s for children in self._held.values() for s in children)]
        sort_steps(steps, self._late)
        return join_nested(steps, self._nesting) if self._inner else steps

    def discard(self, origin: str) -> int:
        """Drop the kept and waiting steps of one origin (``serve``: tool calls derived from model spans, once the
        trace turns out to have tool spans or its model spans are derived again); the next :meth:`finish` judges
        the trace again, exactly, without them.

        Returns:
            How many steps were dropped (none when steps are not kept: the report is then marked partial).
        """
        log = self._log
        if log is None:
            self.partial = True
            return 0
        dropped = [s for s in log if s.origin == origin]
        if not dropped:
            return 0
        self._log = [s for s in log if s.origin != origin]
        self._ready = [s for s in self._ready if s.origin != origin]
        self.kept_bytes = sum(_compact(s, self._max_bytes)[1] for s in self._log)
        if self._ids is not None:
            self._ids.difference_update(s.span_id for s in dropped)
        self.reordered = True
        return len(dropped)

    def drop_steps(self) -> int:
        """Free the kept steps (a memory budget was hit); the trace can no longer be judged again exactly.

        Returns:
            The bytes freed.
        """
        freed = self.kept_bytes
        self._log = None
        self.kept_bytes = 0
        if self.reordered:
            self.partial = True
        return freed

    # -- judging ------------------------------------------------------------------------------------------------

    def judge(self, step: Step, *, parent_open: bool = False, untimed_at: float | None = None,
              judged: list[Step] | None = None) -> list[Judged]:
        """:meth:`add` one step and :meth:`advance` at once (the live processor's one call per span).

        The processor's usual step (no span ids kept, nothing ready, held or waiting, no nesting rule for its
        origin) is judged by :func:`~.fastpath.judge_alone`, with the outcome of the general path below.
        """
        if (
            self._ids is None
            and not self._ready
            and not self._held
            and not self._inner_parents
            and step.origin not in self._inner
        ):
            return judge_alone(self, step, untimed_at, judged)
        if not self.add(step, parent_open=parent_open):
            return []
        return self.advance(untimed_at, judged)

    def _compacted(self, step: Step) -> Step:
        """``step`` with oversized argument and result text replaced by stand-ins (:func:`compact_value`)."""
        return _compact(step, self._max_bytes)[0]

    def advance(self, untimed_at: float | None = None, judged: list[Step] | None = None) -> list[Judged]:
        """Judge the steps added since the last call, in start order, and return what is worth telling.

        A step that starts before one already judged is judged now all the same (a live judgement cannot wait),
        and the judge is marked :attr:`reordered`; :meth:`finish` then judges the trace again in start order.

        Args:
            untimed_at: the observation time for a call without start and end times (default: the engine's).
            judged: when given, every step judged now is appended to it (after nesting: one step per call).

        Returns:
            The transitions and interventions the steps caused, in order.
        """
        ready = self._ready
        if not ready:
            return []
        self._ready = []
        inner = self._inner
        if len(ready) > 1:
            sort_steps(ready, self._late)
            if inner:
                ready = self._live_join(ready)
        elif inner and (self._held or self._inner_parents or ready[0].origin in inner):
            # One step (the live processor's case): nesting has work only when something waits or may join.
            ready = self._live_join(ready)
        if judged is not None:
            judged.extend(ready)
        out: list[Judged] = []
        self._feed_all(ready, untimed_at, out, ordered=True)
        return out

    def finish(self, observed_at: float | None = None) -> list[Judged]:
        """Judge what is left and judge the trace again at ``observed_at`` (a lease may have expired).

        Held inner steps whose parent never came are judged on their own. When the judge is :attr:`reordered` and
        still keeps its steps, the trace is judged again from scratch in start order, and only events that were
        not told before are returned (those told before and no longer produced are counted in :attr:`retracted`).

        Args:
            observed_at: the observation time (``audit``: the trace's last span end, or ``--at``).

        Returns:
            The transitions and interventions decided now.
        """
        for children in self._held.values():
            self._ready.extend(children)
        self._held.clear()
        self._held_count = 0
        out: list[Judged] = []
        if self.reordered and self._log is not None:
            self._rejudge(out, observed_at)
        else:
            out.extend(self.advance(observed_at))
        if observed_at is not None:
            observation = self._engine.reevaluate(self.state, observed_at)
            if observation is not None:
                self._record(observation, None, out)
        return out

    def _rejudge(self, out: list[Judged], untimed_at: float | None) -> None:
        log = self._log
        assert log is not None
        self.rejudged += 1
        before = self._emitted
        if before is not None:
            self._emitted = set()
        self._reset()
        self._ready = []
        self.reordered = False
        steps = list(log)
        sort_steps(steps, self._late)
        if self._inner:
            steps = join_nested(steps, self._nesting)
        self._feed_all(steps, untimed_at, out, told=before)
        self._last = STEP_ORDER(steps[-1]) if steps else None
        if before is not None and self._emitted is not None:
            self.retracted += len(before - self._emitted)

    def _reorder(self) -> None:
        self.reordered = True
        if self._log is None:
            self.partial = True

    def _live_join(self, ready: list[Step]) -> list[Step]:
        """Join nested steps of one call among ``ready``, with held children, and note joins that come too late."""
        inner = self._inner
        held = self._held
        ids = self._ids
        inner_parents = self._inner_parents
        if not held and not inner_parents and not any(s.origin in inner for s in ready):
            return ready
        if held:
            # Children waiting for a parent that is now here join it (they sort after it: they started later).
            extra = []
            for step in ready:
                children = held.pop(step.span_id, None)
                if children is not None:
                    self._held_count -= len(children)
                    extra.extend(children)
            if extra:
                ready = ready + extra
                sort_steps(ready, self._late)
        in_batch = {s.span_id for s in ready if s.call is not None}
        joinable = False
        for step in ready:
            if inner_parents and step.span_id in inner_parents:
                # A parent whose inner step was judged alone earlier: whether they are one call is for the
                # exact judgement to say.
                inner_parents.discard(step.span_id)
                self._reorder()
            if step.origin in inner:
                parent = step.parent_span_id
                if parent is None:
                    continue
                if parent in in_batch:
                    joinable = True
                elif ids is not None and parent in ids:
                    self._reorder()  # a late inner step of a call already judged
                elif len(inner_parents) < MAX_HELD:
                    inner_parents.add(parent)
        return join_nested(ready, self._nesting) if joinable else ready

    def _feed_all(self, steps: list[Step], untimed_at: float | None, out: list[Judged], *, ordered: bool = False,
                  told: set[tuple[Any, ...]] | None = None) -> None:
        """Judge ``steps`` in the order given; with ``ordered``, a step that sorts before one judged earlier makes
        the judge reordered."""
        engine = self._engine
        state = self._state if self._state is not None else self.state
        audit = self._audit
        last = self._last
        for step in steps:
            if ordered:
                key = (step.at_end, step.start_ns, step.end_ns, step.span_id)
                if last is not None and key < last:
                    self._reorder()
                else:
                    last = key
            observation = self._observe(step, engine, state, audit, untimed_at)
            if observation is not None and (observation.transition is not None
                                            or observation.intervention is not None):
                self._record(observation, step, out, told)
        if ordered:
            self._last = last

    def _observe(self, step: Step, engine: LoopEngine, state: TraceState, audit: StepAudit | None,
                 untimed_at: float | None) -> Observation | None:
        """One step through the engine (and the run audit): what both the live path and :meth:`_feed_all` do."""
        call = step.call
        if call is not None:
            if step.kind != STEP_TOOL:
                return self._observe_lane(step, call, untimed_at)
            if self._lanes is not None:
                self._lanes.note(call)
            observation = engine.observe(state, call, untimed_at if call.end is None and call.start is None else None)
            if audit is not None:
                audit.add(call)
            if call.error is not None:
                self.failed_calls += 1
            return observation
        self.seen_usage = True
        usage = step.usage
        return engine.add_usage(state, step.model, usage if usage is not None else Usage())

    def _observe_lane(self, step: Step, call: ToolCall, untimed_at: float | None) -> Observation | None:
        """A hand-off, sub-agent invocation or model turn through its kind's sequence (not a tool call)."""
        lanes = self._lanes
        if lanes is None:
            if call.tool == NEWS_ONLY:
                return None  # news matters only after a hand-off: a trace without one stays without lanes
            lanes = self._lanes = Lanes(self._engine)
        if call.result_captured or step.kind != STEP_MODEL:
            self._lanes_read = True
        return lanes.observe(step.kind, call, step.chunk, untimed_at)

    def _record(self, observation: Observation, step: Step | None, out: list[Judged],
                told: set[tuple[Any, ...]] | None = None) -> None:
        transition, intervention = observation.transition, observation.intervention
        if transition is not None and len(self._transitions) < MAX_KEPT_EVENTS:
            self._transitions.append(transition)
        if intervention is not None and len(self._interventions) < MAX_KEPT_EVENTS:
            self._interventions.append(intervention)
        emitted = self._emitted
        if emitted is not None:
            key = _event_key(observation)
            emitted.add(key)
            if told is not None and key in told:
                return
        out.append(Judged(observation, step, self.state.steps, self.reordered))

    # -- the report ---------------------------------------------------------------------------------------------

    def report(self, source: str, trace_id: str | None, *, attributes: dict[str, Any] | None = None,
               with_cost: bool | None = None) -> TraceReport:
        """Summarise the trace as judged so far.

        Args:
            source: where the trace came from.
            trace_id: hex trace id, or None.
            attributes: grouping attributes to keep on the report.
            with_cost: include the cost; by default when prices are configured or usage was judged.
        """
        state = self.state
        verdict = self.verdict
        ok, violations = True, []
        if self._audit is not None:
            audit = self._audit.result()
            ok, violations = audit["ok"], audit["violations"]
        if with_cost is None:
            with_cost = bool(self._engine.config.prices) or self.seen_usage
        return TraceReport(
            source=source,
            trace_id=trace_id,
            verdict=verdict,
            stuck_period=verdict.period if verdict.kind == STUCK else None,
            steps_used=state.steps,
            transitions=tuple(self._transitions),
            interventions=tuple(self._interventions),
            ok=ok,
            violations=tuple(violations),
            cost=state.cost if with_cost else None,
            attributes=attributes or {},
            partial=self.partial,
            failed_calls=self.failed_calls,
            duplicates=self.duplicates,
        )


def judge_in_order(engine: LoopEngine, steps: Iterable[Step], observed_at: float | None) -> TraceJudge:
    """Judge ``steps`` exactly in the order given (a steps file), then again at ``observed_at``.

    Args:
        engine: the engine to judge with.
        steps: the steps, in the order to judge them (their span ids must differ).
        observed_at: the observation time; calls without times are judged at it.

    Returns:
        The judge, finished (read its verdict, transitions, interventions, or its :meth:`~TraceJudge.report`).
    """
    judge = TraceJudge(engine)
    for step in steps:
        judge.add(step)
        judge.advance(observed_at)
    judge.finish(observed_at)
    return judge


def replay_calls(engine: LoopEngine, calls: Iterable[ToolCall], observed_at: float | None) -> TraceJudge:
    """Judge tool calls in the order given, then again at ``observed_at`` (:func:`judge_in_order` of their steps)."""
    return judge_in_order(
        engine, (Step(span_id=i + 1, start_ns=i, end_ns=i, call=call) for i, call in enumerate(calls)), observed_at
    )

