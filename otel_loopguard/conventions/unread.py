"""Unread input is never silent: why spans that look like an agent's could not be read as tool calls.

Two causes, each reported once (per process, per cause and set of attribute keys) by every path — the processor
and ``serve`` as a WARNING log record and the counter ``loopguard.spans.unread{reason}``, ``serve`` also as an
OTLP ``partial_success`` (``rejected_spans = 0``), ``audit`` as a note on the trace:

* :data:`NO_TOOL_CALLS`: a trace has GenAI spans (model calls, agent spans, or only a framework's structure
  spans: OpenInference ``CHAIN``, OpenLLMetry ``task``/``workflow``, Langfuse and MLflow spans of other types) but no
  tool call can be read from them: no tool span of a known convention, and no tool call in the model spans' messages
  (content not captured, or written to log records: openai-v2's ``EVENT_ONLY``). The keys named are those of these
  spans. A trace whose hand-offs, sub-agent invocations or model turns (with their input) were judged, and whose
  model spans were offered no tool, is read though it has no tool call (an agent that only talks or delegates): it
  gets no such note (nor :data:`AGENT_TURNS_WITHOUT_CONTENT`). Tools offered, or model turns whose input is not
  recorded (Haystack under OpenLLMetry), keep the note: tool calls may have happened unread.
* :data:`CALLS_WITHOUT_CONTENT`: model spans say that tool calls happened (a finish reason naming tool calls, a
  tool-call count, or tools offered and a ``tool`` message without content) but record neither the calls nor their
  results (content capture off), and the trace has no readable tool span: its calls are judged as calls that cannot
  be compared (at most ``uncertain``). The keys named are the evidence seen.
* :data:`AGENT_TURNS_WITHOUT_CONTENT`: as :data:`NO_TOOL_CALLS`, but the trace's only GenAI spans are agent turns
  (``invoke_agent``) that record no message text and no model call: a group chat whose turns are each traced on
  their own without content (AutoGen's native tracing). A repeated turn or hand-off cannot be seen, and nothing is
  guessed; the note says which instrumentation records the messages.
* :data:`UNKNOWN_ATTRIBUTES`: a tool span whose arguments or result were not found where its convention writes
  them, while it carries attributes (or span-event attributes) that look like content no convention reads. The
  keys named are those attributes: a ``[conventions.NAME]`` table can read them.

This module classifies; the paths report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..core.cache import BoundedCache, small
from ..core.escape import escaped
from . import names as n
from .model_calls import offers_tools, tool_activity
from .table import AGENT_SPANS, TOOL_CONVENTIONS, Convention

__all__ = [
    "AGENT_TURNS_WITHOUT_CONTENT",
    "CALLS_WITHOUT_CONTENT",
    "CONVENTIONS_PAGE",
    "INVALID_IDS",
    "NO_TOOL_CALLS",
    "TRACE_CAUSES",
    "UNKNOWN_ATTRIBUTES",
    "Unread",
    "UnreadTrace",
    "message",
    "structure_span",
    "unknown_content_keys",
]

NO_TOOL_CALLS = "no_tool_calls"
CALLS_WITHOUT_CONTENT = "calls_without_content"
AGENT_TURNS_WITHOUT_CONTENT = "agent_turns_without_content"
#: Causes known only when the whole trace has been read (``serve`` tells them in a later answer to the sender).
TRACE_CAUSES = frozenset({NO_TOOL_CALLS, CALLS_WITHOUT_CONTENT, AGENT_TURNS_WITHOUT_CONTENT})
UNKNOWN_ATTRIBUTES = "unknown_attributes"
#: Where the documentation explains what is read and how to make the rest readable.
CONVENTIONS_PAGE = "the documentation page 'Conventions read' (docs/conventions.md)"
#: ``serve`` only: spans rejected for an all-zero trace id or span id (OTLP ``partial_success.rejected_spans``).
INVALID_IDS = "invalid_ids"

#: Attribute keys named in a note at most (the rest are counted).
MAX_KEYS = 12
#: Characters of one attribute key named in a note at most: a sender chooses its keys, and a note is kept, logged
#: and answered (a 1 MB key would otherwise be held and logged whole).
MAX_KEY_CHARS = 128

# The last word(s) of an attribute key that holds a call's content (arguments, result) rather than metadata.
_CONTENT_WORDS = frozenset({
    "input", "inputs", "output", "outputs", "arg", "args", "argument", "arguments", "param", "params", "parameters",
    "result", "results", "response", "request", "payload", "content", "body", "kwargs",
})


def _known_keys() -> frozenset[str]:
    keys: set[str] = set()
    for convention in TOOL_CONVENTIONS:
        for sources in (convention.tool_name, convention.arguments, convention.result, convention.error,
                        convention.call_id, convention.agent_name):
            for source in sources:
                if source.attribute:
                    keys.add(f"{source.event}/{source.attribute}" if source.event else source.attribute)
    for agent in AGENT_SPANS:
        keys.update(s.attribute for s in agent.agent_name if s.attribute)
    # Content-like keys that are known not to be a call's content: schemas, definitions, descriptions, mime types.
    keys.update({
        n.OI_TOOL_PARAMETERS, n.GEN_AI_TOOL_JSON_SCHEMA, n.GEN_AI_TOOL_DEFINITIONS, n.GEN_AI_TOOL_DESCRIPTION,
        n.OI_INPUT_MIME_TYPE, n.OI_OUTPUT_MIME_TYPE, n.GEN_AI_INPUT_MESSAGES, n.GEN_AI_OUTPUT_MESSAGES,
        n.ADK_LLM_REQUEST, n.ADK_LLM_RESPONSE, n.MASTRA_METADATA_BODY,
    })
    return frozenset(keys)


KNOWN_KEYS = _known_keys()
_BUILT_IN = frozenset(c.name for c in TOOL_CONVENTIONS)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _content_like(key: str) -> bool:
    # The key's last word: ``acme.tool_input``, ``mlflow.toolInput`` and ``myfw.output`` are content,
    # ``acme.request_id`` is not.
    last = _CAMEL.sub("_", key.rsplit(".", 1)[-1]).lower().replace("-", "_").rsplit("_", 1)[-1]
    return last in _CONTENT_WORDS


def unknown_content_keys(attrs: Mapping[str, Any], events: Iterable[tuple[str, Mapping[str, Any]]] = (),
                         known: frozenset[str] = KNOWN_KEYS) -> tuple[str, ...]:
    """Attribute keys (``event/key`` for span-event attributes) that look like a call's content and that no
    convention reads, sorted."""
    out = {_key(k) for k in attrs if k not in known and _content_like(k)}
    for name, event_attrs in events:
        if name == n.EVENT_EXCEPTION:
            continue
        for key in event_attrs:
            full = f"{name}/{key}"
            if full not in known and _content_like(key):
                out.add(_key(full))
    return tuple(sorted(out))


def _key(key: str) -> str:
    """A key as a note names it: escaped and at most :data:`MAX_KEY_CHARS` characters."""
    return escaped(key, MAX_KEY_CHARS)


class Unread(NamedTuple):
    """One cause of unread input.

    Attributes:
        reason: :data:`NO_TOOL_CALLS` or :data:`UNKNOWN_ATTRIBUTES` (the counter's ``reason`` attribute).
        keys: the attribute keys seen (at most :data:`MAX_KEYS`, sorted).
        spans: how many spans it concerns.
        structure_only: :data:`NO_TOOL_CALLS` of a trace with no model or agent span at all, only a framework's
            structure spans (its message says so).
    """

    reason: str
    keys: tuple[str, ...]
    spans: int
    structure_only: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of ``audit --json``'s ``unread`` entries."""
        return {"reason": self.reason, "keys": list(self.keys), "spans": self.spans, "message": message(self)}


def message(unread: Unread) -> str:
    """The one-line explanation of a cause, naming the keys seen and the documentation page (no attribute values)."""
    keys = ", ".join(unread.keys) if unread.keys else "none"
    if unread.reason == CALLS_WITHOUT_CONTENT:
        return (f"{unread.spans} model span(s) say tool calls happened but record neither the calls nor their "
                f"results (message content not captured), so the calls cannot be compared and the trace is at most "
                f"uncertain; evidence seen: {keys}; capture message content on spans, see {CONVENTIONS_PAGE}")
    if unread.reason == AGENT_TURNS_WITHOUT_CONTENT:
        return (f"{unread.spans} agent turn span(s) with no message text and no model call in the trace (a group "
                f"chat whose turns are each traced apart without content, as AutoGen's native tracing does), so "
                f"repeated turns and hand-offs cannot be judged and nothing is inferred; attributes seen: {keys}; "
                f"record the messages (for AutoGen: openinference-instrumentation-autogen-agentchat), see "
                f"{CONVENTIONS_PAGE}")
    if unread.reason == NO_TOOL_CALLS and unread.structure_only:
        return (f"{unread.spans} span(s) of an agent framework (OpenInference CHAIN, OpenLLMetry task or workflow, "
                f"...) but no tool or model span, so no tool call could be read: the instrumentation does not record "
                f"the agent's tool or model calls; attributes seen: {keys}; instrument the model client or the tools "
                f"(OpenTelemetry GenAI, OpenInference or OpenLLMetry), see {CONVENTIONS_PAGE}")
    if unread.reason == NO_TOOL_CALLS:
        return (f"{unread.spans} GenAI span(s) but no tool call could be read: no tool span of a known convention, "
                f"and no tool call in the model spans' messages (content not captured, or sent to log records: "
                f"set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY); model span attributes seen: "
                f"{keys}; see {CONVENTIONS_PAGE}")
    return (f"{unread.spans} tool span(s) whose arguments or result are in attributes no convention reads: {keys}; "
            f"describe them in a [conventions.NAME] table, see {CONVENTIONS_PAGE}")


# The GenAI attribute keys of a model span, by its key tuple (spans of one instrumentation share one).
_GENAI_KEYS: BoundedCache[tuple[str, ...], frozenset[str]] = BoundedCache(1024)


def _bare_agent_turn(attrs: Mapping[str, Any]) -> bool:
    """An agent span that records a turn but none of its messages (AutoGen's native ``invoke_agent`` spans)."""
    return attrs.get(n.GEN_AI_OPERATION_NAME) == n.OP_INVOKE_AGENT and not any(
        key.endswith("messages") or _content_like(key) for key in attrs)


def _bounded(keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(keys)))[:MAX_KEYS]


class UnreadTrace:
    """The unread causes of one trace, as its spans are read (any order).

    Call :meth:`tool` for each tool span read, :meth:`model` for each model or agent span, :meth:`derived` when
    model spans gave tool calls, then :meth:`causes` when the trace is done.
    """

    __slots__ = ("_activity", "_activity_spans", "_bare_turns", "_derived", "_last_keys", "_model_keys", "_model_spans",
                 "_other_ids", "_other_spans", "_tool_calls", "_tools_offered", "_unknown", "_unknown_spans")

    def __init__(self) -> None:
        self._tool_calls = 0
        self._derived = 0
        self._model_spans = 0
        self._model_keys: set[str] = set()
        self._last_keys: frozenset[str] | None = None
        self._unknown: set[str] = set()
        self._unknown_spans = 0
        self._activity: set[str] = set()
        self._activity_spans = 0
        # Agent spans without message text (a trace of nothing else has nothing to judge: its own note).
        self._bare_turns = 0
        self._other_spans = 0
        self._other_ids: set[int] = set()
        # A model span was offered tools: a trace without tool calls may have had some unread.
        self._tools_offered = False

    def tool(self, attrs: Mapping[str, Any], arguments_captured: bool, result_captured: bool,
             events: Iterable[tuple[str, Mapping[str, Any]]] = (), convention: Convention | None = None) -> None:
        """One tool span read: a cause when part of the call was not found and unknown content-like keys are there."""
        self._tool_calls += 1
        if arguments_captured and result_captured:
            return
        known = KNOWN_KEYS
        if convention is not None and convention.name not in _BUILT_IN:
            known = known | {s.attribute for s in (*convention.arguments, *convention.result) if s.attribute}
        keys = unknown_content_keys(attrs, events, known)
        if keys:
            self._unknown_spans += 1
            if len(self._unknown) < 4 * MAX_KEYS:
                self._unknown.update(keys)

    def tool_read(self) -> None:
        """One tool span read whose arguments and result were both found (:meth:`tool`'s cheap case)."""
        self._tool_calls += 1

    def model(self, attrs: Mapping[str, Any]) -> None:
        """One model or agent span (one that says tool calls happened without recording them is noted)."""
        self._model_spans += 1
        if _bare_agent_turn(attrs):
            self._bare_turns += 1
        if not self._tools_offered and offers_tools(attrs):
            self._tools_offered = True
        activity = tool_activity(attrs)
        if activity is not None:
            self._activity_spans += 1
            self._activity.add(activity)
        if len(self._model_keys) < 4 * MAX_KEYS:
            keys = tuple(attrs)
            genai = _GENAI_KEYS.get(keys)
            if genai is None:
                genai = frozenset(_key(k) for k in keys if k.startswith(n.GENAI_KEY_PREFIXES))
                if small(keys):
                    _GENAI_KEYS.put(keys, genai)
            # The spans of one instrumentation have the same keys: the second and later add nothing.
            if genai is not self._last_keys:
                self._last_keys = genai
                self._model_keys |= genai

    def other(self, attrs: Mapping[str, Any], span_id: int) -> None:
        """A span of an agent framework's structure that is no tool, model or agent span (:func:`structure_span`):
        counted once per span id for :data:`NO_TOOL_CALLS`, its keys named."""
        if span_id in self._other_ids or not structure_span(attrs):
            return
        if len(self._other_ids) < _MAX_OTHER_IDS:
            self._other_ids.add(span_id)
        self._other_spans += 1
        if len(self._model_keys) < 4 * MAX_KEYS:
            self._model_keys.update(_key(k) for k in attrs if k.startswith(_STRUCTURE_KEY_PREFIXES))

    def derived(self, count: int) -> None:
        """Tool calls read from model spans."""
        self._tool_calls += count
        self._derived += count

    def set_derived(self, count: int) -> None:
        """The tool calls read from model spans, counted again (the derivation was done again)."""
        self._tool_calls += count - self._derived
        self._derived = count

    def merge(self, other: UnreadTrace) -> None:
        """Add what ``other`` noted (the spans of one more batch of the same trace)."""
        self._tool_calls += other._tool_calls
        self._derived += other._derived
        self._model_spans += other._model_spans
        self._unknown_spans += other._unknown_spans
        self._activity_spans += other._activity_spans
        self._bare_turns += other._bare_turns
        self._activity.update(other._activity)
        self._other_spans += other._other_spans
        self._tools_offered |= other._tools_offered
        if len(self._model_keys) < 4 * MAX_KEYS:
            self._model_keys.update(other._model_keys)
        if len(self._unknown) < 4 * MAX_KEYS:
            self._unknown.update(other._unknown)

    @property
    def tool_calls(self) -> int:
        """Tool calls read so far (from tool spans, or derived from model spans)."""
        return self._tool_calls

    def causes(self, steps_judged: bool = False) -> list[Unread]:
        """What could not be read in the trace (empty when everything that looks like an agent's was read).

        Args:
            steps_judged: steps of another kind than tool calls (hand-offs, sub-agent invocations, model turns
                with their input) were judged in the trace (:attr:`~otel_loopguard.core.judge.TraceJudge.lanes_read`):
                unless a model span was offered tools, the trace was read and having no tool call is no cause (an
                agent that only talks or delegates has none to read).
        """
        out = []
        if self._unknown_spans:
            out.append(Unread(UNKNOWN_ATTRIBUTES, _bounded(self._unknown), self._unknown_spans))
        if self._activity_spans and self._tool_calls == self._derived:
            # No tool span was read: the calls derived from these model spans are all there is, and cannot be compared.
            out.append(Unread(CALLS_WITHOUT_CONTENT, _bounded(self._activity), self._activity_spans))
        elif (self._model_spans or self._other_spans) and not self._tool_calls and (
                self._tools_offered or not steps_judged):
            if self._model_spans and self._bare_turns == self._model_spans:
                out.append(Unread(AGENT_TURNS_WITHOUT_CONTENT, _bounded(self._model_keys), self._model_spans))
            else:
                out.append(Unread(NO_TOOL_CALLS, _bounded(self._model_keys), self._model_spans + self._other_spans,
                                  structure_only=not self._model_spans))
        return out


#: Keys that mark a span of an agent framework's structure (any value): OpenInference, OpenLLMetry, Langfuse, MLflow.
_STRUCTURE_KEYS = (n.OPENINFERENCE_SPAN_KIND, n.TRACELOOP_SPAN_KIND, n.LANGFUSE_OBSERVATION_TYPE, n.MLFLOW_SPAN_TYPE)
#: The keys of such a span named in a note.
_STRUCTURE_KEY_PREFIXES = (*n.GENAI_KEY_PREFIXES, "openinference.")
#: Structure-span ids remembered per trace (for a span delivered twice); beyond, spans are only counted.
_MAX_OTHER_IDS = 1024


def structure_span(attrs: Mapping[str, Any]) -> bool:
    """Whether a span no convention reads as a tool, model or agent span still marks an agent framework's run
    (OpenInference ``CHAIN``, OpenLLMetry ``task``/``workflow``, Langfuse ``span``, MLflow ``CHAIN``, ...): a trace of
    only such spans has no readable tool call and gets :data:`NO_TOOL_CALLS` (Haystack under OpenInference)."""
    return any(key in attrs for key in _STRUCTURE_KEYS)


