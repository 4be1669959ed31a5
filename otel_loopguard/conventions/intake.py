"""The intake of decoded spans (:class:`~.span.SpanRecord`), shared by ``serve``'s table and ``audit``'s and
calibration's reader: :class:`StepReader` reads a span's step, :class:`SpanTrace` is the per-trace record both keep.

Each adapter classifies a span once (:meth:`Extractor.read_role <.extract.Extractor.read_role>`), gives the step of
a tool or lane span (:meth:`StepReader.span_step`) to its judge its own way (``serve`` at once, ``audit`` when the
input ends), and reads model, agent and root spans into its :class:`SpanTrace`. What differs stays in the adapter:
arrival bookkeeping, kept bytes, when a trace is judged and what is made of it.
"""

from __future__ import annotations

from typing import Any

from ..core.config import LoopGuardConfig
from ..core.judge import Step, TraceJudge
from ..core.model import STEP_HANDOFF, STEP_TOOL
from ..core.outcome import TaskOutcome
from .agent_steps import ORIGIN_LANE_SPAN, SubAgents, lane_step_of_span
from .assembly import AgentSpan, TraceRecord, tool_span_step
from .extract import ROLE_LLM, ROLE_TOOL, Extractor, conversation_id, llm_usage
from .model_calls import Turn
from .nesting import tool_origin
from .span import SpanRecord, ended_in_error
from .unread import UnreadTrace

__all__ = ["MAX_AGENT_SPANS", "SpanTrace", "StepReader"]

#: Agent spans kept per trace (``SpanTrace.agents``), at most.
MAX_AGENT_SPANS = 64


def _outermost(agent: AgentSpan) -> tuple[int, int, int]:
    """The order of agent spans, outermost first: the earlier start, then the longer, then the smaller id."""
    return (agent.start_ns, -agent.end_ns, agent.span_id)


def _failed(span: SpanRecord) -> bool:
    """Whether a root or agent span ended in error (status or an exception event): the task's ``error``."""
    return ended_in_error(span.status_error, (e[0] for e in span.events))


def _first(ids: set[int], span_id: int, limit: int) -> bool:
    """Whether ``span_id`` is not in ``ids`` (then added, while fewer than ``limit``)."""
    if span_id in ids:
        return False
    if len(ids) < limit:
        ids.add(span_id)
    return True


class StepReader:
    """Reads decoded spans of every convention as judge steps.

    Args:
        max_argument_bytes: argument and result text longer than this is neither parsed nor unwrapped (the
            configuration's ``max_argument_bytes``).
        context: also read the agent name and conversation id of each step (``serve``'s events need them; a
            report does not).
        config: the configuration whose ``redacted_values`` and user-defined conventions apply (and whose
            ``max_argument_bytes`` wins over the argument).
    """

    __slots__ = ("_call_of", "_context", "_extractor", "_read_role")

    def __init__(self, max_argument_bytes: int = 65_536, *, context: bool = True,
                 config: LoopGuardConfig | None = None) -> None:
        self._extractor = Extractor.from_config(config) if config is not None else Extractor(max_argument_bytes)
        self._read_role = self._extractor.read_role
        self._call_of = self._extractor.call_of
        self._context = context

    @property
    def extractor(self) -> Extractor:
        """The extractor it reads with."""
        return self._extractor

    def read(self, span: SpanRecord, *, messages: bool = True) -> Step | Turn | None:
        """A tool span's step, a model span's :class:`~.model_calls.Turn` (``messages``: with its tool-call content,
        for deriving calls when the trace has no tool span), or None for any other span."""
        role, row = self._read_role(span.attributes, span.name)
        if role == ROLE_TOOL:
            return self.tool_step(span, row)
        if role == ROLE_LLM:
            return self._extractor.model_turn(span.attributes, span.name, span.span_id, span.parent_span_id,
                                              span.start_ns, span.end_ns, messages=messages, context=self._context)
        return None

    def step(self, span: SpanRecord) -> Step | None:
        """The step of one span: a tool call, a model call with token usage, or None for any other span."""
        role, row = self._read_role(span.attributes, span.name)
        if role == ROLE_TOOL:
            return self.tool_step(span, row)
        if role == ROLE_LLM:
            usage = llm_usage(span.attributes)
            if usage is None:
                return None
            agent, conversation = self._context_of(span) if self._context else (None, None)
            return Step(span_id=span.span_id, parent_span_id=span.parent_span_id, start_ns=span.start_ns,
                        end_ns=span.end_ns, model=usage[0], usage=usage[1], agent=agent, conversation=conversation)
        return None

    def tool_step(self, span: SpanRecord, row: Any) -> Step:
        """The step of a tool span, read in the row :meth:`Extractor.read_role` gave it."""
        events = span.events
        attrs = span.attributes
        call = self._call_of(
            row, attrs, span.name, span.start_ns, span.end_ns, span.status_error, span.status_message,
            ((ev_name, ev_attrs) for ev_name, _, ev_attrs in events) if events else (),
        )
        # (Built here, not through a shared helper: this runs for every tool span, ``audit``'s most common.)
        agent, conversation = self._context_of(span) if self._context else (None, None)
        return Step(span_id=span.span_id, parent_span_id=span.parent_span_id, start_ns=span.start_ns,
                    end_ns=span.end_ns, call=call, agent=agent, conversation=conversation, origin=tool_origin(attrs))

    def span_step(self, span: SpanRecord, role: str | None, row: Any) -> Step | None:
        """The step of a span that is no model or agent span, in the role and row :meth:`Extractor.read_role` gave
        it: a tool span's (a transfer or delegation tool read as a hand-off: :func:`~.assembly.tool_span_step`), or
        of a span no convention reads that is a hand-off or a model call (Logfire's); else None."""
        if role is None:
            return lane_step_of_span(span.attributes, span.name, span.span_id, span.parent_span_id, span.start_ns,
                                     span.end_ns)
        return tool_span_step(self.tool_step(span, row), span.attributes, span.name, self._extractor)

    def _context_of(self, span: SpanRecord) -> tuple[str | None, str | None]:
        """A step's agent name and conversation id (read only with ``context``)."""
        attrs = span.attributes
        return self._extractor.agent_name(attrs, name=span.name), conversation_id(attrs)


class SpanTrace(TraceRecord):
    """The per-trace record of the paths reading decoded spans (``serve``'s table, ``audit``'s and calibration's
    reader): the shared record, plus the root span's times, its agent spans (the outermost kept for the task) and the
    sub-agent steps they complete, and the intake of a model, agent, root or tool span's notes.

    Each adapter reads a span's role once, gives tool and lane spans' steps (:meth:`StepReader.span_step`) to its
    judge its own way (``serve`` now, ``audit`` at the end), and the rest here. The caller holds the trace's lock.
    """

    __slots__ = ("agent_ids", "outer", "root", "subagents")

    #: Model and agent span ids remembered per trace for de-duplication, at most (a span beyond is read again).
    max_ids = 1 << 16

    def __init__(self) -> None:
        super().__init__()
        # The root span's (start_ns, end_ns) (never the span: a finished trace may be remembered).
        self.root: tuple[int, int] | None = None
        # The outermost agent span (earliest start, then longest): the task's agent and, without a root, its times.
        self.outer: AgentSpan | None = None
        # The agent spans' names and the sub-agent steps waiting for their parent's span (made at the first).
        self.subagents: SubAgents | None = None
        # Agent span ids read (made at the first: most traces of a serve instance have none).
        self.agent_ids: set[int] | None = None

    def model_read_once(self, span: SpanRecord, extractor: Extractor, *, context: bool, agent: str | None,
                        with_news: bool) -> tuple[Turn | None, Step | None] | None:
        """Read a model span (None when read before: a delivery again counts once): its turn and its model-turn
        step (:meth:`TraceRecord.model_span <.assembly.TraceRecord.model_span>`)."""
        span_id = span.span_id
        ids = (self.turns or self.turns_now()).ids
        if span_id in ids:  # (not through _first: this runs for every model span)
            return None
        if len(ids) < self.max_ids:
            ids.add(span_id)
        return self.model_span(extractor, span.attributes, span.name, span_id, span.parent_span_id, span.start_ns,
                               span.end_ns, context=context, agent=agent, with_news=with_news)

    def root_read(self, span: SpanRecord) -> None:
        """Note the root span: its times (the task's duration) and, when it ended in error, the task's ``error``."""
        self.root = (span.start_ns, span.end_ns)
        if _failed(span):
            self.failed = True

    def agent_span(self, span: SpanRecord, extractor: Extractor) -> list[Step] | None:
        """Read an agent span (None when read before): noted for the unread note and the task, kept among the
        trace's agent spans, and the sub-agent steps it completes (:class:`~.agent_steps.SubAgents`) returned."""
        ids = self.agent_ids
        if ids is None:
            ids = self.agent_ids = set()
        if not _first(ids, span.span_id, self.max_ids):
            return None
        attrs = span.attributes
        self.agent_read(attrs, _failed(span))
        # Its attributes are final (the span ended): the calls it holds are named after it from now on.
        name = extractor.agent_name(attrs, name=span.name)
        agent = AgentSpan(span.span_id, name, start_ns=span.start_ns, end_ns=span.end_ns)
        if len(self.agents) < MAX_AGENT_SPANS:
            self.agents.append(agent)
        outer = self.outer
        if outer is None or _outermost(agent) < _outermost(outer):
            self.outer = agent
        subagents = self.subagents
        if subagents is None:
            subagents = self.subagents = SubAgents()
        return subagents.agent(attrs, span.span_id, span.parent_span_id, span.start_ns, span.end_ns, name)

    def other_read(self, span: SpanRecord, step: Step | None) -> None:
        """Note a span no tool, model or agent convention reads: unless it gave a step (a hand-off or a model call:
        read), an agent framework's structure span (:func:`~.unread.structure_span`) counts for the unread note."""
        if step is None:
            self.unread_now().other(span.attributes, span.span_id)

    def tool_read(self, step: Step, span: SpanRecord, extractor: Extractor,
                  missing: UnreadTrace | None) -> UnreadTrace | None:
        """Note a tool span's judged step for the unread note: read whole (or a hand-off) on the trace; part of the
        call not found, in ``missing`` (made when None, and returned: ``serve`` tells it per request)."""
        call = step.call
        if call is None:
            return missing
        kind = step.kind
        if kind == STEP_TOOL:
            if call.arguments_captured and call.result_captured:  # the usual tool span: read whole
                (self.unread or self.unread_now()).tool_read()
                return missing
        elif kind == STEP_HANDOFF and step.origin != ORIGIN_LANE_SPAN:  # a hand-off tool span: read
            (self.unread or self.unread_now()).tool_read()
            return missing
        else:
            return missing  # not a tool span's
        if missing is None:
            missing = UnreadTrace()
        missing.tool(span.attributes, call.arguments_captured, call.result_captured,
                     [(name, ev) for name, _, ev in span.events], extractor.convention(span.attributes, span.name))
        return missing

    def task(self, judge: TraceJudge | None) -> TaskOutcome:
        """How the trace's task ended so far (:meth:`TraceRecord.outcome`), named after its outermost agent span; the
        duration is its root span's, else its outermost agent span's."""
        outer = self.outer
        times = self.root if self.root is not None else (
            (outer.start_ns, outer.end_ns) if outer is not None else None)
        return self.outcome(judge, outer.name if outer is not None else None, times)
