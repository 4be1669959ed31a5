"""Span attributes -> hand-off and model-turn steps (the kinds of step that are not tool calls).

Called where tool and model spans are read (the processor, ``serve``'s trace table, ``audit``'s collector); each
function looks at one span and answers None for any span it is not about, cheaply (a name or tool-name test first).

Hand-offs, as the instrumentations record them (checked against fixtures recorded from the real packages):

* OpenAI Agents SDK under OpenInference: a TOOL span ``handoff to <Agent>``, the from-agent in ``input.value`` and
  the to-agent in ``output.value``;
* OpenAI Agents SDK under Logfire: a ``Handoff: A → B`` span with ``from_agent`` and ``to_agent``;
* ``transfer_to_<agent>`` tool calls (OpenAI Agents SDK's handoff tools, LangGraph supervisor and swarm) and Google
  ADK's ``transfer_to_agent(agent_name=...)``: their output (a Command holding the tool-call id; a fresh ``adk-`` id)
  differs on every call, so it is never evidence;
* CrewAI's ``Delegate work to coworker`` tool with ``{task, context, coworker}``: the coworker's answer is evidence.

A hand-off without evidence of its own gets, in its sequence, the digest of what the trace did since the previous
hand-off (:class:`~otel_loopguard.core.agent_steps.Lanes`): agents that hand a task back and forth doing nothing
in between are stuck; agents whose work in between changes are working.

A sub-agent invocation is an agent span (GenAI ``invoke_agent``, OpenInference ``AGENT``) whose parent span is
another agent's: a step of the parent agent's, signature (parent agent, sub-agent, normalised input), evidence the
digest of the sub-agent's output text (:func:`subagent_step`; :class:`SubAgents` pairs them when spans come in any
order). Google ADK's ``LoopAgent`` running ``writer`` then ``critic`` gives such spans; ADK's transfers do not
(the agents' spans are siblings under the workflow span: the transfer tool is the hand-off). A span that carries
a model call (OpenInference kind ``LLM`` on an ``invoke_agent`` span, as ADK's model calls are recorded onto the
agent span when both ADK's and OpenInference's tracing run) is a model call, never a sub-agent step.

A model turn is a model span whose output is assistant text without a tool call: its signature is the normalised
text's digest, its evidence the digest of the input messages after the last assistant message (what is new since
the model last spoke), None when the input was not recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..core.agent_steps import LANE_SPAN_BIT, NEWS_ONLY, tail_repetition, text_digest
from ..core.config import DEFAULT_REDACTED_VALUES, normalize_key
from ..core.engine import AGENT_ARROW
from ..core.judge import Step
from ..core.model import STEP_AGENT, STEP_HANDOFF, STEP_MODEL, StepKind, ToolCall
from . import names as n

__all__ = [
    "HANDOFF_MARKERS",
    "MAX_AGENT_NAME",
    "ORIGIN_LANE_SPAN",
    "SubAgents",
    "handoff_of_span",
    "handoff_of_tool",
    "is_handoff_tool",
    "lane_step_of_span",
    "model_step",
    "subagent_step",
]

#: Attribute keys of a hand-off span that no tool or model convention marks (Logfire's ``Handoff`` span): a live
#: reader that looks only at marked spans adds these.
HANDOFF_MARKERS = frozenset({n.LOGFIRE_FROM_AGENT})

#: :attr:`Step.origin` of a step read from a span that is not a tool span (no nesting rule names it): a reader
#: that tells whether a trace has tool spans leaves these out.
ORIGIN_LANE_SPAN = "lane"
#: Agent names are cut to this many characters (they reach events and messages).
MAX_AGENT_NAME = 64
_UNKNOWN_AGENT = "(unknown agent)"
# Keys (folded, last dotted segment) of ids that differ on every message or call.
_VOLATILE_IDS = frozenset({"id", "callid", "toolcallid", "messageid", "responseid"})
_NS = 1e-9


def _agent(value: Any) -> str:
    if isinstance(value, str):
        text = value.strip().strip('"')
        if text.startswith("{"):  # OpenInference may write {"assistant": "Name"}
            decoded = _decoded(text)
            if isinstance(decoded, dict) and len(decoded) == 1:
                text = str(next(iter(decoded.values())))
        if text:
            return text[:MAX_AGENT_NAME]
    return _UNKNOWN_AGENT


def _handoff(step_fields: tuple[int, int | None, int, int], source: str, target: str, arguments: Any,
             result: Any = None, result_captured: bool = False, kind: StepKind = STEP_HANDOFF) -> Step:
    span_id, parent, start_ns, end_ns = step_fields
    call = ToolCall(tool=source + AGENT_ARROW + target, arguments=arguments, result=result,
                    result_captured=result_captured, start=start_ns * _NS if start_ns else None,
                    end=end_ns * _NS if end_ns else None)
    return Step(span_id=span_id, parent_span_id=parent, start_ns=start_ns, end_ns=end_ns, call=call,
                agent=source, kind=kind)


def handoff_of_span(attrs: Mapping[str, Any], span_name: str, span_id: int, parent_span_id: int | None,
                    start_ns: int, end_ns: int) -> Step | None:
    """The hand-off step of a span that is not a tool span (Logfire's ``Handoff: A → B``), else None."""
    if not span_name.startswith(n.LOGFIRE_HANDOFF_SPAN_PREFIX):
        return None
    source, target = attrs.get(n.LOGFIRE_FROM_AGENT), attrs.get(n.LOGFIRE_TO_AGENT)
    if source is None or target is None:
        return None
    return _handoff((span_id, parent_span_id, start_ns, end_ns), _agent(source), _agent(target), None)


def lane_step_of_span(attrs: Mapping[str, Any], span_name: str, span_id: int, parent_span_id: int | None,
                      start_ns: int, end_ns: int) -> Step | None:
    """The step of a span that the tool and model conventions do not read: a hand-off span (Logfire), or a model
    call recorded without an operation name (Logfire's streamed ``Chat completion`` span), else None."""
    step = handoff_of_span(attrs, span_name, span_id, parent_span_id, start_ns, end_ns)
    if step is None and n.GEN_AI_REQUEST_MODEL in attrs:
        step = model_step(attrs, span_id, parent_span_id, start_ns, end_ns, None)
    return None if step is None else msgspec.structs.replace(step, origin=ORIGIN_LANE_SPAN)


def is_handoff_tool(tool: str, span_name: str) -> bool:
    """Whether a tool span may be a hand-off (a cheap test of names before :func:`handoff_of_tool` reads it)."""
    return (tool.startswith(n.TRANSFER_TOOL_PREFIX) or tool == n.CREWAI_DELEGATE_TOOL
            or span_name.startswith(n.OI_HANDOFF_SPAN_PREFIX))


def handoff_of_tool(step: Step, attrs: Mapping[str, Any], span_name: str,
                    agent_name: Callable[..., str | None] | None = None) -> Step | None:
    """The hand-off that a tool span's step stands for (a transfer or delegation tool), else None.

    Args:
        step: the tool span's step, as the tool conventions read it.
        attrs, span_name: the span's.
        agent_name: the extractor's ``agent_name`` (called with the attributes and ``name=``), for a step read
            without its agent: the agent that calls a transfer tool is the one handing off.
    """
    call = step.call
    if call is None:
        return None
    tool = call.tool
    if not is_handoff_tool(tool, span_name):
        return None
    if step.agent is None:
        # The tool convention's agent, else the GenAI one (ADK's OpenInference tool spans carry gen_ai.agent.name).
        agent = agent_name(attrs, name=span_name) if agent_name is not None else None
        step = msgspec.structs.replace(step, agent=agent or attrs.get(n.GEN_AI_AGENT_NAME))
    fields = (step.span_id, step.parent_span_id, step.start_ns, step.end_ns)
    if span_name.startswith(n.OI_HANDOFF_SPAN_PREFIX):
        target = attrs.get(n.OI_OUTPUT_VALUE) or span_name[len(n.OI_HANDOFF_SPAN_PREFIX):]
        return _handoff(fields, _agent(attrs.get(n.OI_INPUT_VALUE)), _agent(target), None)
    if tool.startswith(n.TRANSFER_TOOL_PREFIX):
        args = _decoded(call.arguments)
        if tool == n.ADK_TRANSFER_TOOL and isinstance(args, dict):
            target = args.get(n.ADK_TRANSFER_AGENT_ARGUMENT)
        else:
            target = tool[len(n.TRANSFER_TOOL_PREFIX):]
        return _handoff(fields, _agent(step.agent), _agent(target), args)
    if tool == n.CREWAI_DELEGATE_TOOL:
        args = _decoded(call.arguments)
        if not isinstance(args, dict):
            return None
        task = {key: value for key, value in args.items() if key != n.CREWAI_COWORKER_ARGUMENT}
        return _handoff(fields, _agent(step.agent), _agent(args.get(n.CREWAI_COWORKER_ARGUMENT)), task,
                        call.result, call.result_captured and call.error is None)
    return None


# -- sub-agent invocations --------------------------------------------------------------------------------------------

def subagent_step(attrs: Mapping[str, Any], span_id: int, parent_span_id: int | None, start_ns: int, end_ns: int,
                  parent_agent: str | None, agent: str | None) -> Step | None:
    """The sub-agent step of an agent span whose parent span is the agent span of ``parent_agent``, else None.

    Signature: (parent agent, sub-agent, digest of the normalised input); evidence: the digest of the output's text
    (missing when no output was recorded). None when neither was recorded (content capture off: a graph running its
    agent node again is no sign of a loop), and for a span that carries a model call (OpenInference kind ``LLM``):
    a model span named like an agent span.
    """
    if attrs.get(n.OPENINFERENCE_SPAN_KIND) == n.OI_KIND_LLM:
        return None
    given = _io_digest(attrs.get(n.OI_INPUT_VALUE, attrs.get(n.GEN_AI_INPUT_MESSAGES)))
    output = _io_digest(attrs.get(n.OI_OUTPUT_VALUE, attrs.get(n.GEN_AI_OUTPUT_MESSAGES)))
    if given is None and output is None:
        return None  # content not recorded: that an agent ran under another is no sign of a loop
    return _handoff((span_id, parent_span_id, start_ns, end_ns), _agent(parent_agent), _agent(agent), given, output,
                    output is not None, STEP_AGENT)


def _io_digest(value: Any) -> str | None:
    """The digest of an agent's input or output: its text (the ``text``/``content`` strings of a JSON value, such as
    ADK's ``{"content": {"parts": [{"text": ...}]}, "usage_metadata": ...}``), else the value without volatile
    ids; None when nothing was recorded (or a placeholder such as OpenInference's ``__REDACTED__``). Token counts
    and ids that change on every call never reach it."""
    if value is None or (value.__class__ is str and value in _PLACEHOLDERS):
        return None
    decoded = _decoded(value)
    texts: list[str] = []
    _texts(decoded, texts, 0)
    if texts:
        return text_digest("\n".join(texts))
    if isinstance(decoded, str):
        return text_digest(decoded)
    return text_digest(_canonical(decoded))


# Placeholders meaning "not recorded" in any attribute (the defaults of ``redacted_values``).
_PLACEHOLDERS = frozenset(p.value for p in DEFAULT_REDACTED_VALUES if not p.attributes)
_TEXT_KEYS = frozenset({"text", "content"})
_MAX_DEPTH = 16


def _texts(value: Any, out: list[str], depth: int) -> None:
    """Append the string values of ``text``/``content`` keys found in ``value``, depth first (bounded depth)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _TEXT_KEYS and isinstance(item, str) and item:
                out.append(item)
            else:
                _texts(item, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _texts(item, out, depth + 1)


class SubAgents:
    """The agent spans of one trace, by span id, and the sub-agent steps waiting for their parent's span.

    A reader that gets spans in any order (``audit``, ``serve``) gives every agent span to :meth:`agent`; a child
    usually ends, and so comes, before its parent. At most :data:`MAX_AGENT_SPANS` agent spans and as many waiting
    steps are kept per trace (more are not read as sub-agent steps).
    """

    __slots__ = ("names", "waiting", "waiting_steps")

    def __init__(self) -> None:
        self.names: dict[int, str | None] = {}
        self.waiting: dict[int, list[Step]] = {}
        self.waiting_steps = 0

    def agent(self, attrs: Mapping[str, Any], span_id: int, parent_span_id: int | None, start_ns: int, end_ns: int,
              name: str | None) -> list[Step]:
        """Note one agent span; returns the sub-agent steps it completes: its own when its parent agent span is
        known, and those of its children that waited for it."""
        names = self.names
        if span_id in names or len(names) >= MAX_AGENT_SPANS:
            return []
        names[span_id] = name
        done = self.waiting.pop(span_id, [])
        self.waiting_steps -= len(done)
        out = [_with_source(step, name) for step in done]
        if parent_span_id is None:
            return out
        step = subagent_step(attrs, span_id, parent_span_id, start_ns, end_ns, None, name)
        if step is None:
            return out
        if parent_span_id in names:
            out.append(_with_source(step, names[parent_span_id]))
        elif self.waiting_steps < MAX_AGENT_SPANS:
            self.waiting.setdefault(parent_span_id, []).append(step)
            self.waiting_steps += 1
        return out


#: Agent spans (and waiting sub-agent steps) :class:`SubAgents` keeps per trace, at most.
MAX_AGENT_SPANS = 4096


def _with_source(step: Step, source: str | None) -> Step:
    """``step`` (read without its parent agent) as a step of ``source``."""
    call = step.call
    if call is None:
        return step
    agent = _agent(source)
    target = call.tool.split(AGENT_ARROW, 1)[1]
    return msgspec.structs.replace(step, agent=agent,
                                   call=msgspec.structs.replace(call, tool=agent + AGENT_ARROW + target))


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):  # RecursionError: nested deeper than msgspec decodes
            return value
    return value


# -- model turns -------------------------------------------------------------------------------------------------------

def model_step(attrs: Mapping[str, Any], span_id: int, parent_span_id: int | None, start_ns: int, end_ns: int,
               agent: str | None, *, with_news: bool = True) -> Step | None:
    """The model-turn step of a model span whose output is assistant text without a tool call, else None.

    A model call that asked for tools gives, with ``with_news``, a step that is only news for the next hand-off
    (:data:`~otel_loopguard.core.agent_steps.NEWS_ONLY`): the live processor asks for it only once its trace had
    a hand-off (reading a model call's input costs, and before a hand-off it is not needed).

    Its span id is the model span's with :data:`~otel_loopguard.core.agent_steps.LANE_SPAN_BIT` set, so the
    span's usage step and its turn are two steps of the trace.
    """
    if not with_news:
        raw = attrs.get(n.GEN_AI_OUTPUT_MESSAGES)
        if raw.__class__ is str and '"tool_call"' in raw:
            return None  # the usual model span of an agent asking for tools, told without decoding it
    output = _output(attrs)
    if output is None:
        return None
    text, calls = output
    if calls and not with_news:
        return None
    if calls:
        # Not a model turn (its tool calls are judged), but what it was given is news for the next hand-off.
        given = _news(attrs)
        if given is None:
            return None
        return Step(span_id=span_id | LANE_SPAN_BIT, parent_span_id=parent_span_id, start_ns=start_ns, end_ns=end_ns,
                    call=ToolCall(tool=NEWS_ONLY, arguments=text_digest(text) if text else None, result=given,
                                  result_captured=True), kind=STEP_MODEL)
    if not text:
        return None
    news = _news(attrs)
    call = ToolCall(tool=(agent or "model")[:MAX_AGENT_NAME], arguments=text_digest(text),
                    result=news, result_captured=news is not None,
                    start=start_ns * _NS if start_ns else None, end=end_ns * _NS if end_ns else None)
    return Step(span_id=span_id | LANE_SPAN_BIT, parent_span_id=parent_span_id, start_ns=start_ns, end_ns=end_ns,
                call=call, agent=agent, kind=STEP_MODEL, chunk=tail_repetition(text))


def _output(attrs: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(assistant text, whether a tool call was asked for) of a model span, or None when no output was recorded."""
    messages = _json_list(attrs.get(n.GEN_AI_OUTPUT_MESSAGES))
    if messages is not None:
        return _parts_output(messages)
    flat = _flattened(attrs, n.OI_OUTPUT_MESSAGES_PREFIX, "message.") or _flattened(attrs,
                                                                                   n.GEN_AI_COMPLETION_PREFIX, "")
    if flat:
        texts: list[str] = []
        calls = False
        for fields in flat:
            calls = calls or any("tool_call" in key or "function_call" in key for key in fields)
            texts.extend(v for k, v in sorted(fields.items()) if isinstance(v, str) and _is_text(k))
        return "\n".join(texts), calls
    for key in (n.LOGFIRE_RESPONSE, n.LOGFIRE_OUTPUT, n.OI_OUTPUT_VALUE):
        items = _response_items(attrs.get(key))
        if items is not None:
            return _items_output(items)
    return None


def _parts_output(messages: list[Any]) -> tuple[str, bool]:
    """GenAI ``gen_ai.output.messages``: text parts, and whether a ``tool_call`` part is there."""
    texts, calls = [], False
    for message in messages:
        for part in message.get("parts", ()) if isinstance(message, dict) else ():
            if isinstance(part, dict):
                if part.get("type") == "text" and isinstance(part.get("content"), str):
                    texts.append(part["content"])
                elif part.get("type") == "tool_call":
                    calls = True
    return "\n".join(texts), calls


def _response_items(value: Any) -> list[Any] | None:
    """The ``output`` items of an OpenAI Responses object (or of the first of a list of them), else None."""
    if not isinstance(value, str) or '"output"' not in value:
        return None
    try:
        decoded = msgspec.json.decode(value)
    except (msgspec.DecodeError, RecursionError):
        return None
    if isinstance(decoded, list) and decoded:
        decoded = decoded[0]
    if isinstance(decoded, dict) and decoded.get("object") == "response":
        output = decoded.get("output")
        if isinstance(output, list):
            return output
    return None


def _items_output(items: list[Any]) -> tuple[str, bool]:
    """Responses output items: the text of ``message`` items, and whether a ``function_call`` item is there."""
    texts, calls = [], False
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls = True
        for part in item.get("content") or () if item.get("type") == "message" else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n".join(texts), calls


def _news(attrs: Mapping[str, Any]) -> str | None:
    """The digest of the input messages after the last assistant message, or None when no input was recorded."""
    messages = _json_list(attrs.get(n.GEN_AI_INPUT_MESSAGES))
    if messages is None:
        messages = _json_list(attrs.get(n.LOGFIRE_RAW_INPUT)) or _json_list(attrs.get(n.LOGFIRE_INPUT))
    if messages is None:
        messages = _flattened(attrs, n.OI_INPUT_MESSAGES_PREFIX, "message.") or _flattened(
            attrs, n.GEN_AI_PROMPT_PREFIX, "")
        if not messages:
            return None
    rows = [(_role(m), _canonical(m)) for m in messages if isinstance(m, dict)]
    last = max((i for i, (role, _) in enumerate(rows) if role in ("assistant", "model")), default=-1)
    return text_digest("\n".join(f"{role}: {content}" for role, content in rows[last + 1:]))


def _canonical(value: Any) -> str:
    """``value`` (decoded JSON) as compact JSON with sorted keys, without volatile ids (:func:`_stable`); a value
    nested too deep for that is taken as its ``repr``, whole."""
    try:
        return msgspec.json.encode(_stable(value), order="sorted").decode()
    except RecursionError:
        return repr(value)


def _stable(value: Any) -> Any:
    """``value`` without the ids every call or message gets anew (a tool-call id, a message id): news is what was
    said, not which call said it."""
    if isinstance(value, dict):
        return {key: _stable(item) for key, item in value.items()
                if normalize_key(key.rsplit(".", 1)[-1]) not in _VOLATILE_IDS}
    if isinstance(value, list):
        return [_stable(item) for item in value]
    return value


def _role(message: dict[str, Any]) -> str:
    # A Responses function_call item is the assistant's; its function_call_output is news (a tool result).
    if message.get("type") == "function_call":
        return "assistant"
    return str(message.get("role", message.get("type", "")))


def _is_text(key: str) -> bool:
    return key == "content" or key.endswith("message_content.text")


def _json_list(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):  # RecursionError: nested deeper than msgspec decodes
            return None
    return value if isinstance(value, list) else None


def _flattened(attrs: Mapping[str, Any], prefix: str, inner: str) -> list[dict[str, Any]]:
    """Flattened messages ``<prefix><i>.<inner><field>`` as one dict of fields per message, in index order."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix):].partition(".")
        if not index.isdigit() or not rest.startswith(inner):
            continue
        by_index.setdefault(int(index), {})[rest[len(inner):]] = value
    return [by_index[i] for i in sorted(by_index)]
