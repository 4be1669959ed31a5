"""Tool calls from model spans, for agents instrumented only at the model client (no tool span anywhere).

An application that instruments only its model client (the OpenAI, Anthropic instrumentations; LiteLLM) with a
hand-written agent loop has no tool span: but each model-call span records the tool calls the model asked for (its
output) and, in the next call's input, their results. This module reads them:

* :func:`read_turn` reads one model span as a :class:`Turn`: its token usage, the calls in its output, the results
  and earlier calls in its input, in the span's convention (:data:`MESSAGE_READERS`):

  - GenAI latest conventions (``gen_ai.output.messages`` parts ``tool_call``; results as ``tool_call_response``
    parts of ``gen_ai.input.messages``; LiteLLM's ``tool_call_id`` on a ``tool`` message and its
    ``gen_ai.completion.0.function_call`` without an id),
  - OpenInference (``llm.output_messages.N.message.tool_calls.M.tool_call.*``; results as
    ``llm.input_messages.K.message`` with role ``tool``; which of them failed, from the Anthropic request kept in
    ``input.value``),
  - OpenLLMetry before the GenAI messages (``gen_ai.completion.N.tool_calls.M.*``; results as ``gen_ai.prompt.K``
    with role ``tool``, or Anthropic ``tool_result`` blocks in a ``user`` prompt),

  A result that Anthropic's ``tool_result`` block marks ``"is_error": true`` is a :class:`Failed` result: the
  derived call failed (its error class is the result's text, bounded), so it is never progress and feeds the retry
  rule. No other recorded message shape says a call failed (the GenAI ``tool_call_response`` part and OpenAI's
  ``tool`` message have no such field): a failure returned as plain text reads as a result.
  - the OpenAI Chat Completions request and response as JSON text (Logfire ``instrument_openai`` version 1,
    Langfuse generations, MLflow chat spans: one reader, :func:`_chat_reader`);

* :class:`TurnJudge` turns a trace's model turns, in end order, into judge steps: each model call's usage once
  (an instrumentation's span and the Anthropic SDK's own span of one call share a ``gen_ai.response.id``; ADK's
  ``call_llm`` wraps its ``generate_content`` span), and, while the trace has no tool span, a *derived* tool call
  per requested call, its result taken from the first later input that holds it (matched by call id: ids are
  volatile, never part of a signature). Derived steps have origin :data:`ORIGIN_DERIVED`. A call whose result is
  still missing when the trace ends is judged without one, after every other step of the trace
  (:attr:`~otel_loopguard.core.judge.Step.at_end`): the live paths learn only then that no result will come.

Call identity: a call id joins a call with its result, and one call recorded by two spans, but an id repeated by
another model turn is a new call (numbered by occurrence, in the requests and in the results alike), and an id of
the shape ``<tool>_<n>`` (Gemini's ``search_0`` on every turn) never merges two calls.

Content written to log records instead of spans (openai-v2 ``EVENT_ONLY``), or not captured, is not on the spans;
when a model span's finish reason still says it asked for tools (:func:`tool_activity`), the extractor reads one
call that cannot be compared (no name, arguments or result), so such a trace is uncertain, never working for want
of calls. :mod:`.unread` reports both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from ..core.cost import Usage
from ..core.judge import STEP_ORDER, Step
from ..core.model import ToolCall
from . import names as n

__all__ = [
    "MAX_ERROR_LEN",
    "MESSAGE_READERS",
    "ORIGIN_DERIVED",
    "Failed",
    "Turn",
    "TurnJudge",
    "by_occurrence",
    "failure_class",
    "offers_tools",
    "read_messages",
    "refused",
    "synthetic_id",
    "tool_activity",
]

#: :attr:`Step.origin` of a tool call derived from model spans.
ORIGIN_DERIVED = "model.tool_call"

#: The longest error class kept (a class may be a failed call's message: bounded, like every emitted string).
MAX_ERROR_LEN = 200

_NS = 1e-9
_MASK64 = (1 << 64) - 1


class Turn(NamedTuple):
    """What one model-call span says.

    Attributes:
        span_id, parent_span_id, start_ns, end_ns: the span's.
        response_id: ``gen_ai.response.id``, when recorded (one model call may have two spans).
        usage: (model, usage) when the span reports token usage.
        calls: (call id or None, tool name, arguments) the model asked for in this call's output.
        results: (call id, result) in this call's input; None when the span records no input messages.
        history: (call id, tool name, arguments) of earlier calls repeated in this call's input.
        agent: the agent name, when the span says it.
        conversation: the conversation id, when the span says it.
    """

    span_id: int
    parent_span_id: int | None
    start_ns: int
    end_ns: int
    response_id: str | None
    usage: tuple[str | None, Usage] | None
    calls: tuple[tuple[str | None, str, Any], ...] = ()
    results: tuple[tuple[str, Any], ...] | None = None
    history: tuple[tuple[str, str, Any], ...] = ()
    agent: str | None = None
    conversation: str | None = None


class Failed(NamedTuple):
    """A tool call's result that its message marks as a failure (Anthropic ``tool_result`` with ``is_error``).

    Attributes:
        result: the result as recorded (its text).
        error: the derived call's error class (:func:`failure_class` of the text).
    """

    result: Any
    error: str


def failure_class(message: str | None) -> str:
    """The error class of a failure known only by its message: the message, bounded, else ``error``."""
    return (message or "error")[:MAX_ERROR_LEN]


class Messages(NamedTuple):
    """The tool-call content of one model span."""

    calls: tuple[tuple[str | None, str, Any], ...] = ()
    results: tuple[tuple[str, Any], ...] | None = None
    history: tuple[tuple[str, str, Any], ...] = ()


# -- readers ---------------------------------------------------------------------------------------------------------

def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value


def _text(value: Any) -> Any:
    """A result as text: Anthropic content blocks ``[{"type": "text", "text": ...}]`` become their joined text."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(b, Mapping) and "text" in b for b in value):
        return "".join(str(b["text"]) for b in value)
    return value


_TOOL_FINISH = frozenset({"tool_calls", "tool_call", "function_call", "tool_use"})
#: Finish reasons of a refused model call (OpenAI's ``content_filter``, Anthropic's ``refusal``).
_REFUSAL_FINISH = frozenset({"content_filter", "refusal"})


def _genai(attrs: Mapping[str, Any]) -> Messages | None:
    """GenAI latest conventions: ``gen_ai.output.messages`` / ``gen_ai.input.messages`` (JSON text or structured)."""
    out_raw, in_raw = attrs.get(n.GEN_AI_OUTPUT_MESSAGES), attrs.get(n.GEN_AI_INPUT_MESSAGES)
    if out_raw is None and in_raw is None:
        return None
    calls: list[tuple[str | None, str, Any]] = []
    finish: list[str] = []
    for message in _json(out_raw) or ():
        if not isinstance(message, Mapping):
            continue
        finish.append(str(message.get("finish_reason")))
        for part in message.get("parts") or ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call" and part.get("name"):
                calls.append((part.get("id"), str(part["name"]), part.get("arguments")))
    if not calls and any(reason in _TOOL_FINISH for reason in finish):
        # LiteLLM: only the first call, without an id, beside an output message that says it asked for tools. (Its
        # default mode overwrites the user's span call after call: a final answer beside a stale function_call.)
        name = attrs.get(n.LITELLM_FUNCTION_CALL_NAME)
        if name:
            calls.append((None, str(name), attrs.get(n.LITELLM_FUNCTION_CALL_ARGUMENTS)))
    results: list[tuple[str, Any]] | None = None
    history: list[tuple[str, str, Any]] = []
    messages = _json(in_raw)
    if messages is not None:
        results = []
        for message in messages or ():
            if not isinstance(message, Mapping):
                continue
            parts = message.get("parts") or ()
            for part in parts:
                if not isinstance(part, Mapping):
                    continue
                kind = part.get("type")
                if kind == "tool_call_response" and part.get("id") is not None:
                    results.append((str(part["id"]), _text(part.get("response"))))
                elif kind == "tool_call" and part.get("id") is not None and part.get("name"):
                    history.append((str(part["id"]), str(part["name"]), part.get("arguments")))
            # LiteLLM: a tool message with its call id beside text parts; earlier calls in OpenAI's shape.
            if message.get("role") == "tool" and message.get("tool_call_id") is not None:
                text = "".join(str(p.get("content", "")) for p in parts if isinstance(p, Mapping))
                results.append((str(message["tool_call_id"]), text))
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and call.get("id") is not None and function.get("name"):
                    history.append((str(call["id"]), str(function["name"]), function.get("arguments")))
    return Messages(tuple(calls), tuple(results) if results is not None else None, tuple(history))


def _block_result(block: Mapping[str, Any]) -> Any:
    """The result of an Anthropic ``tool_result`` block: its text, :class:`Failed` when ``is_error`` is true."""
    result = _text(block.get("content"))
    if block.get("is_error") is True:
        return Failed(result, failure_class(result if isinstance(result, str) else None))
    return result


def _anthropic_failures(request: Any) -> dict[str, Failed]:
    """The failed results of an Anthropic request body (``messages`` of ``tool_result`` blocks with ``is_error``),
    by ``tool_use_id``; parsed only when the text names ``is_error``."""
    if not isinstance(request, str) or '"is_error"' not in request:
        return {}
    messages = _at(request, ("messages",))
    out: dict[str, Failed] = {}
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if (isinstance(block, Mapping) and block.get("type") == "tool_result" and block.get("tool_use_id")
                    and block.get("is_error") is True):
                failed = _block_result(block)
                out[str(block["tool_use_id"])] = failed
    return out


def _flat(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``<prefix><N>.<rest>`` attributes grouped by N."""
    out: dict[int, dict[str, Any]] = {}
    size = len(prefix)
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[size:].partition(".")
            if index.isdigit():
                out.setdefault(int(index), {})[rest] = value
    return out


def _flat_calls(fields: Mapping[str, Any], prefix: str, id_key: str, name_key: str, args_key: str,
                ) -> list[tuple[str | None, str, Any]]:
    calls = _flat(fields, prefix)
    out: list[tuple[str | None, str, Any]] = []
    for index in sorted(calls):
        call = calls[index]
        if call.get(name_key):
            identifier = call.get(id_key)
            out.append((str(identifier) if identifier is not None else None, str(call[name_key]), call.get(args_key)))
    return out


def _openinference(attrs: Mapping[str, Any]) -> Messages | None:
    """OpenInference: ``llm.output_messages.N.message.tool_calls.M.tool_call.*``, ``llm.input_messages.K.message.*``."""
    outputs = _flat(attrs, "llm.output_messages.")
    inputs = _flat(attrs, "llm.input_messages.")
    if not outputs and not inputs:
        return None
    calls: list[tuple[str | None, str, Any]] = []
    for index in sorted(outputs):
        calls += _flat_calls(outputs[index], "message.tool_calls.", "tool_call.id", "tool_call.function.name",
                             "tool_call.function.arguments")
    results: list[tuple[str, Any]] | None = [] if inputs else None
    history: list[tuple[str, str, Any]] = []
    # The flattened messages drop Anthropic's is_error; the request body kept beside them has it.
    failures = _anthropic_failures(attrs.get(n.OI_INPUT_VALUE)) if inputs else {}
    for index in sorted(inputs):
        message = inputs[index]
        if message.get("message.role") == "tool" and message.get("message.tool_call_id") is not None:
            assert results is not None
            call_id = str(message["message.tool_call_id"])
            content = message.get("message.content")
            failed = failures.get(call_id)
            results.append((call_id, content if failed is None else Failed(content, failed.error)))
        for identifier, name, args in _flat_calls(message, "message.tool_calls.", "tool_call.id",
                                                  "tool_call.function.name", "tool_call.function.arguments"):
            if identifier is not None:
                history.append((identifier, name, args))
    return Messages(tuple(calls), tuple(results) if results is not None else None, tuple(history))


def _openllmetry_flat(attrs: Mapping[str, Any]) -> Messages | None:
    """OpenLLMetry before the GenAI messages: ``gen_ai.completion.N.tool_calls.M.*``, ``gen_ai.prompt.K.*``."""
    completions = _flat(attrs, n.GEN_AI_COMPLETION_PREFIX)
    prompts = _flat(attrs, n.GEN_AI_PROMPT_PREFIX)
    if not completions and not prompts:
        return None
    calls: list[tuple[str | None, str, Any]] = []
    for index in sorted(completions):
        calls += _flat_calls(completions[index], "tool_calls.", "id", "name", "arguments")
    results: list[tuple[str, Any]] | None = [] if prompts else None
    history: list[tuple[str, str, Any]] = []
    for index in sorted(prompts):
        prompt = prompts[index]
        assert results is not None
        role = prompt.get("role")
        if role == "tool" and prompt.get("tool_call_id") is not None:
            results.append((str(prompt["tool_call_id"]), prompt.get("content")))
        elif role == "user" and isinstance(prompt.get("content"), str) and '"tool_result"' in prompt["content"]:
            # Anthropic (0.53): the results are tool_result blocks of a user prompt, as JSON text.
            for block in _json(prompt["content"]) or ():
                if isinstance(block, Mapping) and block.get("type") == "tool_result" and block.get("tool_use_id"):
                    results.append((str(block["tool_use_id"]), _block_result(block)))
        for identifier, name, args in _flat_calls(prompt, "tool_calls.", "id", "name", "arguments"):
            if identifier is not None:
                history.append((identifier, name, args))
    return Messages(tuple(calls), tuple(results) if results is not None else None, tuple(history))


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` inside JSON text or a structure (None when a step is missing)."""
    value = _json(value)
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and -len(value) <= step < len(value) else None
        else:
            value = value.get(step) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def _openai_calls(message: Any) -> list[tuple[str | None, str, Any]]:
    """(id, name, arguments) of the ``tool_calls`` of an OpenAI Chat Completions assistant message."""
    out: list[tuple[str | None, str, Any]] = []
    for call in (message.get("tool_calls") or ()) if isinstance(message, Mapping) else ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            identifier = call.get("id")
            out.append((str(identifier) if identifier is not None else None, str(function["name"]),
                        function.get("arguments")))
    return out


def _chat_reader(request: str, messages: tuple[str | int, ...], response: str, message: tuple[str | int, ...],
                 ) -> Callable[[Mapping[str, Any]], Messages | None]:
    """A reader of a model span that records the OpenAI Chat Completions request and response as JSON text: the
    request's ``messages`` at ``messages`` inside attribute ``request``, the assistant message at ``message`` inside
    attribute ``response`` (Logfire ``instrument_openai`` version 1, Langfuse generations, MLflow chat spans)."""

    def read(attrs: Mapping[str, Any]) -> Messages | None:
        out_raw, in_raw = attrs.get(response), attrs.get(request)
        if out_raw is None and in_raw is None:
            return None
        calls = _openai_calls(_at(out_raw, message)) if out_raw is not None else []
        inputs = _at(in_raw, messages) if in_raw is not None else None
        if not isinstance(inputs, list):
            return Messages(tuple(calls))
        results: list[tuple[str, Any]] = []
        history: list[tuple[str, str, Any]] = []
        for item in inputs:
            if not isinstance(item, Mapping):
                continue
            if item.get("role") == "tool" and item.get("tool_call_id") is not None:
                results.append((str(item["tool_call_id"]), _text(item.get("content"))))
            history += [(i, name, args) for i, name, args in _openai_calls(item) if i is not None]
        return Messages(tuple(calls), tuple(results), tuple(history))

    return read


def _openlit_tools(attrs: Mapping[str, Any]) -> Messages | None:
    """OpenLIT: the calls a chat span asked for, in ``gen_ai.tool.name`` / ``gen_ai.tool.call.id`` /
    ``gen_ai.tool.args`` (or ``gen_ai.tool.call.arguments``), each joined by ``", "`` over the response's calls; kept
    with content capture off, so the calls are compared though their results are not recorded.

    The arguments of several calls are split as consecutive JSON values; when they do not split into one per call,
    no call has arguments (never arguments given to the wrong call).
    """
    names = attrs.get(n.GEN_AI_TOOL_NAME)
    if not isinstance(names, str) or not names:
        return None
    tools = names.split(n.OPENLIT_JOIN)
    ids = str(attrs.get(n.GEN_AI_TOOL_CALL_ID) or "").split(n.OPENLIT_JOIN)
    raw = attrs.get(n.GEN_AI_TOOL_ARGS, attrs.get(n.GEN_AI_TOOL_CALL_ARGUMENTS))
    args = _joined_json(raw, len(tools)) if isinstance(raw, str) else None
    return Messages(tuple((ids[i] if len(ids) == len(tools) and ids[i] else None, tool,
                           args[i] if args is not None else None) for i, tool in enumerate(tools) if tool))


_DECODER = json.JSONDecoder()


def _joined_json(text: str, count: int) -> list[str] | None:
    """``count`` JSON texts joined by ``", "`` (one text is itself), or None when they do not split so."""
    if count == 1:
        return [text]
    out: list[str] = []
    index = 0
    try:
        while index < len(text) and len(out) < count:
            _, end = _DECODER.raw_decode(text, index)
            out.append(text[index:end])
            index = end + len(n.OPENLIT_JOIN) if text.startswith(n.OPENLIT_JOIN, end) else end
    except (ValueError, RecursionError):
        return None
    return out if len(out) == count and index >= len(text) else None


#: Message readers by name (a model-span convention names those that apply to it, in order).
MESSAGE_READERS: dict[str, Callable[[Mapping[str, Any]], Messages | None]] = {
    "genai_messages": _genai,
    "openinference_messages": _openinference,
    "openllmetry_flat": _openllmetry_flat,
    "logfire_chat": _chat_reader(n.LOGFIRE_REQUEST_DATA, ("messages",), n.LOGFIRE_RESPONSE_DATA, ("message",)),
    "langfuse_chat": _chat_reader(n.LANGFUSE_INPUT, ("messages",), n.LANGFUSE_OUTPUT, ()),
    "mlflow_chat": _chat_reader(n.MLFLOW_SPAN_INPUTS, ("messages",), n.MLFLOW_SPAN_OUTPUTS, ("choices", 0, "message")),
    "openlit_tools": _openlit_tools,
}


#: Attributes (and key prefixes) in which the readers of :data:`MESSAGE_READERS` find a model call's output.
_OUTPUT_KEYS = (n.GEN_AI_OUTPUT_MESSAGES, n.LITELLM_FUNCTION_CALL_NAME, n.LOGFIRE_RESPONSE_DATA, n.LANGFUSE_OUTPUT,
                n.MLFLOW_SPAN_OUTPUTS)
_OUTPUT_PREFIXES = ("llm.output_messages.", n.GEN_AI_COMPLETION_PREFIX)


def tool_activity(attrs: Mapping[str, Any]) -> str | None:
    """The attribute that says a model call used tools while what it asked is not recorded, or None.

    Metadata kept when message content is not: OpenLIT's tool names and arguments, a finish reason naming tool calls
    (``tool_calls``, ``tool_use``, ``function_call``) or a count of tool calls, while the output is not recorded; or
    tools offered to the model and a ``tool`` message without content in its input (a tool ran, its result not
    captured). With content off these are the only signs that the agent called tools at all.
    """
    role = _empty_tool_message(attrs)
    if any(k in attrs for k in _OUTPUT_KEYS) or any(k.startswith(_OUTPUT_PREFIXES) for k in attrs):
        return role
    return _tool_named(attrs) or _tool_finish(attrs) or _tool_count(attrs) or role


def _tool_named(attrs: Mapping[str, Any]) -> str | None:
    """OpenLIT's tool arguments (or, without them, tool names) on a model span whose messages are not recorded."""
    for key in (n.GEN_AI_TOOL_ARGS, n.GEN_AI_TOOL_CALL_ARGUMENTS, n.GEN_AI_TOOL_NAME):
        if attrs.get(key):
            return key
    return None


def _tool_count(attrs: Mapping[str, Any]) -> str | None:
    """The attribute that counts the tool calls a model asked for, when it says one or more."""
    for key in n.TOOL_CALL_COUNT_KEYS:
        value = attrs.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return key
    return None


def offers_tools(attrs: Mapping[str, Any]) -> bool:
    """Whether a model span records tool definitions offered to the model (the agent can call tools)."""
    return any(k in attrs for k in n.TOOL_DEFINITION_KEYS) or any(
        k.startswith(n.TOOL_DEFINITION_PREFIXES) for k in attrs)


def _empty_tool_message(attrs: Mapping[str, Any]) -> str | None:
    """The role attribute of a ``tool`` message without content in the input of a model span offered tools, or None.

    OpenInference ``llm.input_messages.K.message.role``, OpenLLMetry ``gen_ai.prompt.K.role``, or a ``tool`` message
    of ``gen_ai.input.messages`` with no part that holds content.
    """
    if not offers_tools(attrs):
        return None
    for prefix, role_key, content_keys in _TOOL_MESSAGE_SHAPES:
        for index, fields in _flat(attrs, prefix).items():
            if fields.get(role_key) == n.TOOL_ROLE and not any(
                    k.startswith(content_keys) and v not in (None, "") for k, v in fields.items()):
                return f"{prefix}{index}.{role_key}"
    for message in _json(attrs.get(n.GEN_AI_INPUT_MESSAGES)) or ():
        if isinstance(message, Mapping) and message.get("role") == n.TOOL_ROLE and not any(
                isinstance(p, Mapping) and (p.get("response") is not None or p.get("content") not in (None, ""))
                for p in message.get("parts") or ()):
            return n.GEN_AI_INPUT_MESSAGES
    return None


#: Flattened input messages: (key prefix, role field, fields that hold content).
_TOOL_MESSAGE_SHAPES = (
    (n.OI_INPUT_MESSAGES_PREFIX, "message.role", ("message.content", "message.contents.")),
    (n.GEN_AI_PROMPT_PREFIX, "role", ("content",)),
)


def _tool_finish(attrs: Mapping[str, Any]) -> str | None:
    """The finish-reason attribute that names a tool call, or None."""
    return _finish_in(attrs, _TOOL_FINISH)


def refused(attrs: Mapping[str, Any]) -> bool:
    """Whether a model span says the model refused, by any of these sources:

    - finish reasons ``content_filter`` or ``refusal`` (``gen_ai.response.finish_reasons``, ``llm.finish_reason``);
    - OpenLLMetry's ``gen_ai.completion.<n>.refusal`` (an OpenAI message's refusal text; the first 4 choices);
    - a refusal in a recorded output (:data:`_OUTPUT_BODIES`): an item of type ``refusal`` (OpenAI Responses
      content; a GenAI output-message part, which the conventions allow though they define no such type) or a
      message's non-empty ``refusal`` text (OpenAI Chat Completions).

    (The OpenTelemetry openai-v2 instrumentation records a refusal as a text part: only its finish reason shows.)
    """
    if _finish_in(attrs, _REFUSAL_FINISH) is not None:
        return True
    if any(attrs.get(key) for key in _OPENLLMETRY_REFUSALS):
        return True
    for key in _OUTPUT_BODIES:
        value = attrs.get(key)
        if (value is not None and (not isinstance(value, str) or _REFUSAL_TOKEN in value)
                and _refusal_in(_json(value), 0)):
            return True
    return False


#: OpenLLMetry's refusal text of the first choices.
_OPENLLMETRY_REFUSALS = tuple(f"{n.GEN_AI_COMPLETION_PREFIX}{i}{n.REFUSAL_SUFFIX}" for i in range(4))
#: Attributes that record a model call's output as JSON text or a structure: GenAI output messages, an OpenAI
#: response (OpenInference ``output.value``, Logfire ``response_data`` and ``response``), Langfuse and MLflow outputs.
_OUTPUT_BODIES = (n.GEN_AI_OUTPUT_MESSAGES, n.OI_OUTPUT_VALUE, n.LOGFIRE_RESPONSE_DATA, n.LOGFIRE_RESPONSE,
                  n.LANGFUSE_OUTPUT, n.MLFLOW_SPAN_OUTPUTS)
#: Text without it holds no refusal: the body is parsed only when it appears.
_REFUSAL_TOKEN = f'"{n.REFUSAL}"'
#: How deep a refusal is looked for (OpenAI Chat: choices, a choice, its message).
_MAX_REFUSAL_DEPTH = 6


def _refusal_in(value: Any, depth: int) -> bool:
    """Whether a parsed output holds an item ``{"type": "refusal"}`` or a non-empty ``"refusal"`` text."""
    if depth > _MAX_REFUSAL_DEPTH:
        return False
    if isinstance(value, Mapping):
        text = value.get(n.REFUSAL)
        if value.get("type") == n.REFUSAL or (isinstance(text, str) and text):
            return True
        return any(_refusal_in(v, depth + 1) for v in value.values() if isinstance(v, (Mapping, list, tuple)))
    if isinstance(value, (list, tuple)):
        return any(_refusal_in(v, depth + 1) for v in value if isinstance(v, (Mapping, list, tuple)))
    return False


def _finish_in(attrs: Mapping[str, Any], wanted: frozenset[str]) -> str | None:
    """The finish-reason attribute holding one of ``wanted`` (a list, a JSON list or one string), or None."""
    for key in (n.GEN_AI_RESPONSE_FINISH_REASONS, n.OI_LLM_FINISH_REASON):
        value = attrs.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            parsed = _json(value) if value[:1] == "[" else value
            value = parsed if parsed is not None else value
        reasons = (value,) if isinstance(value, str) else value
        if isinstance(reasons, (list, tuple)) and any(str(r) in wanted for r in reasons):
            return key
    return None


def read_messages(attrs: Mapping[str, Any], readers: Iterable[str]) -> Messages:
    """The tool-call content of a model span: calls from the first reader that finds any, results merged.

    A call id that repeats in one input (Gemini's ``search_0`` on every turn) names a new call each time: its
    occurrences are numbered (:func:`by_occurrence`), as :class:`TurnJudge` numbers the calls asked for.
    """
    calls: tuple[tuple[str | None, str, Any], ...] = ()
    results: list[tuple[str, Any]] | None = None
    history: list[tuple[str, str, Any]] = []
    for name in readers:
        messages = MESSAGE_READERS[name](attrs)
        if messages is None:
            continue
        if not calls:
            calls = messages.calls
        if messages.results is not None:
            results = [*(results or ()), *by_occurrence(messages.results)]
        history += by_occurrence(messages.history)
    return Messages(calls, tuple(results) if results is not None else None, tuple(history))


_T = TypeVar("_T", bound=tuple[Any, ...])


def by_occurrence(items: Sequence[_T]) -> Sequence[_T]:
    """Items keyed by call id (first field), a repeated id numbered by its occurrence: ``id``, ``id#1``, ``id#2``.

    The n-th result of ``search_0`` in a request answers the n-th call asked for as ``search_0``.
    """
    if len({item[0] for item in items}) == len(items):
        return items
    seen: dict[Any, int] = {}
    out = []
    for item in items:
        count = seen.get(item[0], 0)
        seen[item[0]] = count + 1
        out.append(item if not count else (f"{item[0]}#{count}", *item[1:]))
    return out  # type: ignore[return-value]


#: A call id made of a tool name and a counter (Gemini's ``search_0``): synthesised per request, never an identity.
_SYNTHETIC_ID = re.compile(r"[A-Za-z_][\w.-]*_\d+")


def synthetic_id(call_id: str) -> bool:
    """Whether a call id has the shape ``<tool>_<n>`` (it is then never used to merge two calls)."""
    return _SYNTHETIC_ID.fullmatch(call_id) is not None


# -- the trace's turns, as judge steps ---------------------------------------------------------------------------------

class _Pending(NamedTuple):
    turn: Turn
    position: int
    call_id: str | None
    tool: str
    arguments: Any


def _same_call(a: Turn, b: Turn) -> bool:
    """Whether two model spans record one model call: the same response id, or spans that overlap in time."""
    if a.response_id is not None and a.response_id == b.response_id:
        return True
    return a.start_ns < b.end_ns and b.start_ns < a.end_ns


class _Once:
    """Recognises a model call seen again: the same ``gen_ai.response.id``, or a model span around (or inside) one
    already seen (ADK's ``call_llm`` around ``generate_content``)."""

    __slots__ = ("counted", "parents", "responses")

    def __init__(self) -> None:
        self.responses: set[str] = set()
        self.counted: set[int] = set()
        self.parents: set[int] = set()

    def first(self, turn: Turn) -> bool:
        """Whether ``turn`` is a model call not seen before (it is then remembered)."""
        if turn.response_id is not None:
            if turn.response_id in self.responses:
                return False
            self.responses.add(turn.response_id)
        if turn.span_id in self.parents or turn.parent_span_id in self.counted:
            return False
        self.counted.add(turn.span_id)
        if turn.parent_span_id is not None:
            self.parents.add(turn.parent_span_id)
        return True


class TurnJudge:
    """One trace's model turns (fed in end order) as judge steps: usage once per model call, derived tool calls.

    Args:
        derive: derive tool calls from the turns (the caller turns it off for a trace with tool spans).

    A model call is counted once: a turn whose ``gen_ai.response.id`` was counted, or whose model-span child was
    counted (ADK's ``call_llm`` around ``generate_content``), adds no usage. Derived calls wait for the first later
    turn that records its input; a call whose result never comes is judged without one at :meth:`finish`.
    """

    __slots__ = ("_asked", "_calls", "_emitted", "_known", "_pending", "_usage_once", "derive", "derived")

    def __init__(self, derive: bool = True) -> None:
        self.derive = derive
        #: Derived tool calls produced so far.
        self.derived = 0
        # Model calls counted once for their usage (among those that report one), and once as turns (all); made at
        # the first turn (``audit`` holds a trace's turns until the input ends, and a trace's six sets add up).
        self._usage_once: _Once | None = None
        self._calls: _Once | None = None
        self._pending: list[_Pending] = []
        self._known: set[str] = set()
        self._emitted: set[str] = set()
        # The turns that asked for each call id (a repeated id is a new call unless it is the same model call).
        self._asked: dict[str, list[Turn]] = {}

    @property
    def calls(self) -> int:
        """Model calls so far, each counted once, whether or not they report token usage (a task's turns)."""
        return len(self._calls.counted) if self._calls is not None else 0

    @property
    def pending(self) -> int:
        """Derived calls waiting for their result (judged at :meth:`finish` when it never comes)."""
        return len(self._pending) if self.derive else 0

    def tool_span_seen(self) -> None:
        """The trace has a tool span: its calls are read there, never derived (pending ones are dropped)."""
        self.derive = False
        self._pending.clear()

    def add(self, turn: Turn) -> list[Step]:
        """The steps one more turn gives: derived calls it completes (in order), then its usage."""
        out: list[Step] = []
        if self.derive:
            if turn.results is not None and self._pending:
                out += self._complete(turn)
            self._request(turn)
        calls = self._calls
        if calls is None:
            calls = self._calls = _Once()
            self._usage_once = _Once()
        calls.first(turn)
        usage = self._usage(turn)
        if usage is not None:
            out.append(usage)
        return out

    def finish(self) -> list[Step]:
        """Derived calls still waiting for a result: judged without one, after every other step of the trace
        (:attr:`~otel_loopguard.core.judge.Step.at_end`), in the order the judge sorts them."""
        out = [self._step(p, None, None) for p in self._pending] if self.derive else []
        self._pending.clear()
        out.sort(key=STEP_ORDER)
        return out

    # -- internals -------------------------------------------------------------------------------------------------

    def _usage(self, turn: Turn) -> Step | None:
        if turn.usage is None or not self._usage_once.first(turn):  # type: ignore[union-attr]  # made by add
            return None
        model, usage = turn.usage
        return Step(span_id=turn.span_id, parent_span_id=turn.parent_span_id, start_ns=turn.start_ns,
                    end_ns=turn.end_ns, model=model, usage=usage, agent=turn.agent, conversation=turn.conversation)

    def _request(self, turn: Turn) -> None:
        for index, (call_id, tool, arguments) in enumerate(turn.calls):
            if call_id is not None and not synthetic_id(call_id):
                call_id = self._identity(call_id, turn)
                if call_id is None:
                    continue
            elif turn.response_id is not None:
                # No id, or one made of the tool's name and a counter: one model call is known by its response id.
                key = f"{turn.response_id}#{index}"
                if key in self._known:
                    continue
                self._known.add(key)
            if call_id is not None and synthetic_id(call_id):
                call_id = self._numbered(call_id, turn)
            self._pending.append(_Pending(turn, index, call_id, tool, arguments))

    def _identity(self, call_id: str, turn: Turn) -> str | None:
        """The key of a requested call, or None when it is a call already asked for.

        One call recorded by two spans (an instrumentation's and the SDK's own: the same response id, or spans that
        overlap in time) is asked for once. The same id from another model turn is a new call: numbered by occurrence.
        """
        turns = self._asked.get(call_id)
        if turns is not None and any(_same_call(other, turn) for other in turns):
            return None
        return self._numbered(call_id, turn)

    def _numbered(self, call_id: str, turn: Turn) -> str:
        turns = self._asked.setdefault(call_id, [])
        key = f"{call_id}#{len(turns)}" if turns else call_id
        turns.append(turn)
        self._known.add(key)
        return key

    def _complete(self, turn: Turn) -> list[Step]:
        results = dict(turn.results or ())
        out = []
        waiting = []
        for pending in self._pending:
            call_id = pending.call_id
            if call_id is None:
                call_id = self._adopt(pending, turn)
            if call_id is not None and call_id in results:
                out.append(self._step(pending, results[call_id], turn))
            else:
                waiting.append(pending)
        # A call whose result is not in this input will not be in a later one either: judged without a result.
        out += [self._step(p, None, turn) for p in waiting if p.turn.end_ns <= turn.start_ns]
        self._pending = [p for p in waiting if p.turn.end_ns > turn.start_ns]
        return out

    def _adopt(self, pending: _Pending, turn: Turn) -> str | None:
        # A call recorded without an id (LiteLLM) takes the id its next input gives the same tool's earlier call.
        for call_id, tool, _ in turn.history:
            if tool == pending.tool and call_id not in self._emitted and call_id not in self._known:
                self._known.add(call_id)
                return call_id
        return None

    def _step(self, pending: _Pending, result: Any, at: Turn | None) -> Step:
        # ``at``: the turn whose input shows the call's result, or that it has none; None at the trace's end.
        turn = pending.turn
        if pending.call_id is not None:
            self._emitted.add(pending.call_id)
        self.derived += 1
        end_ns = at.start_ns if at is not None else turn.end_ns
        error = None
        if isinstance(result, Failed):
            result, error = result
        call = ToolCall(
            tool=pending.tool,
            arguments=pending.arguments,
            arguments_captured=pending.arguments is not None,
            result=result,
            result_captured=result is not None,
            error=error,
            start=turn.end_ns * _NS,
            end=end_ns * _NS,
        )
        # A span id of its own, derived from the model span's, so a re-delivered trace de-duplicates it too.
        span_id = (turn.span_id * 1_000_003 + pending.position + 1) & _MASK64 or 1
        return Step(span_id=span_id, parent_span_id=turn.parent_span_id, start_ns=turn.end_ns,
                    end_ns=max(end_ns, turn.end_ns), call=call, agent=turn.agent, conversation=turn.conversation,
                    origin=ORIGIN_DERIVED, at_end=at is None)
