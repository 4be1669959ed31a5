"""Span → tool call: read GenAI, OpenInference and OpenLLMetry spans into engine values.

Works on plain attribute mappings, so the processor (live SDK spans), ``audit``
and ``serve`` (decoded OTLP) share one reading of every convention.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.cache import BoundedCache
from ..core.cost import Usage
from ..core.model import Lease, ToolCall
from . import names as n

ROLE_TOOL = "tool"
ROLE_LLM = "llm"
ROLE_AGENT = "agent"

#: A span carries at least one of these keys when it can matter to loopguard;
#: checking for them first keeps unrelated spans cheap.
MARKER_KEYS = frozenset({n.GEN_AI_OPERATION_NAME, n.OPENINFERENCE_SPAN_KIND, n.TRACELOOP_SPAN_KIND})

_OI_ROLES = {n.OI_KIND_TOOL: ROLE_TOOL, n.OI_KIND_LLM: ROLE_LLM, n.OI_KIND_AGENT: ROLE_AGENT}
_TL_ROLES = {n.TL_KIND_TOOL: ROLE_TOOL, n.TL_KIND_AGENT: ROLE_AGENT}

_NS = 1e-9
_CACHE_ENTRIES = 2048
_MAX_ERROR_LEN = 200
_REDACTED = "__REDACTED__"


def span_role(attrs: Mapping[str, Any]) -> str | None:
    """The role of a span (tool, llm or agent) in any of the three conventions, or None."""
    op = attrs.get(n.GEN_AI_OPERATION_NAME)
    if op is not None:
        if op == n.OP_EXECUTE_TOOL:
            return ROLE_TOOL
        if op == n.OP_INVOKE_AGENT:
            return ROLE_AGENT
        # SDK attributes and OTLP kvlists may hold dicts, which are unhashable: only strings can name a role.
        if isinstance(op, str) and op in n.LLM_OPERATIONS:
            return ROLE_LLM
    kind = attrs.get(n.OPENINFERENCE_SPAN_KIND)
    if kind is not None:
        return _OI_ROLES.get(kind) if isinstance(kind, str) else None
    kind = attrs.get(n.TRACELOOP_SPAN_KIND)
    if kind is not None:
        return _TL_ROLES.get(kind) if isinstance(kind, str) else None
    return None


def agent_name(attrs: Mapping[str, Any], default: str | None = None) -> str | None:
    """The agent's name from any convention."""
    name = attrs.get(n.GEN_AI_AGENT_NAME) or attrs.get(n.OI_AGENT_NAME) or attrs.get(n.TRACELOOP_ENTITY_NAME)
    return str(name) if name else default


def conversation_id(attrs: Mapping[str, Any]) -> str | None:
    """The conversation (session) id, when the span has one."""
    value = attrs.get(n.GEN_AI_CONVERSATION_ID) or attrs.get(n.OI_SESSION_ID)
    return str(value) if value else None


def is_mcp_client(attrs: Mapping[str, Any]) -> bool:
    """True for an MCP client span (it may repeat the call of its parent ``execute_tool`` span)."""
    return attrs.get(n.MCP_METHOD_NAME) is not None


def _int(value: Any) -> int:
    # Counts are ints or absent; int(None) would cost a raised and caught TypeError per missing count.
    if value.__class__ is int:
        return value
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float token count
        return 0


def llm_usage(attrs: Mapping[str, Any]) -> tuple[str | None, Usage] | None:
    """The model id and token usage of an LLM span, or None when it reports no usage."""
    if attrs.get(n.GEN_AI_USAGE_INPUT_TOKENS) is not None or attrs.get(n.GEN_AI_USAGE_OUTPUT_TOKENS) is not None:
        model = attrs.get(n.GEN_AI_RESPONSE_MODEL) or attrs.get(n.GEN_AI_REQUEST_MODEL)
        write = attrs.get(n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
        if write is None:
            write = attrs.get(n.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS)
        # The GenAI conventions count cached tokens inside input_tokens.
        usage = Usage(
            input_tokens=_int(attrs.get(n.GEN_AI_USAGE_INPUT_TOKENS)),
            output_tokens=_int(attrs.get(n.GEN_AI_USAGE_OUTPUT_TOKENS)),
            cache_read_tokens=_int(attrs.get(n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
            cache_write_tokens=_int(write),
            cache_included_in_input=True,
        )
        return (str(model) if model else None), usage
    if attrs.get(n.OI_TOKEN_PROMPT) is not None or attrs.get(n.OI_TOKEN_COMPLETION) is not None:
        model = attrs.get(n.OI_LLM_MODEL_NAME)
        # OpenInference's prompt count includes its cache details, like the GenAI one.
        usage = Usage(
            input_tokens=_int(attrs.get(n.OI_TOKEN_PROMPT)),
            output_tokens=_int(attrs.get(n.OI_TOKEN_COMPLETION)),
            cache_read_tokens=_int(attrs.get(n.OI_TOKEN_CACHE_READ)),
            cache_write_tokens=_int(attrs.get(n.OI_TOKEN_CACHE_WRITE)),
            cache_included_in_input=True,
        )
        return (str(model) if model else None), usage
    return None


def error_class(
    attrs: Mapping[str, Any],
    status_error: bool,
    status_message: str | None,
    events: Iterable[tuple[str, Mapping[str, Any]]] = (),
) -> str | None:
    """The error class of a failed call: ``error.type``, else the exception event's type, else the status text."""
    value = attrs.get(n.ERROR_TYPE)
    if value:
        return str(value)
    if not status_error:
        return None
    for name, event_attrs in events:
        if name == n.EVENT_EXCEPTION and event_attrs.get(n.EXCEPTION_TYPE):
            return str(event_attrs[n.EXCEPTION_TYPE])
    return (status_message or "error")[:_MAX_ERROR_LEN]


class Extractor:
    """Turns tool spans into :class:`ToolCall` values, unwrapping framework envelopes.

    Envelope unwrapping parses JSON, so its results are cached by raw text: a
    loop repeats the same text, and the cache makes each repeat a dict lookup.

    Args:
        max_bytes: text longer than this is passed on as it is, neither parsed nor cached, so a huge
            argument costs the host no parse and the caches hold no huge keys (the canonicalizer
            digests such text whole).
    """

    def __init__(self, max_bytes: int = 65_536) -> None:
        self._max_bytes = max_bytes
        self._args_cache: BoundedCache[str, Any] = BoundedCache(_CACHE_ENTRIES)
        self._result_cache: BoundedCache[str, Any] = BoundedCache(_CACHE_ENTRIES)

    def tool_call(
        self,
        attrs: Mapping[str, Any],
        span_name: str,
        start_ns: int | None,
        end_ns: int | None,
        status_error: bool = False,
        status_message: str | None = None,
        events: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ) -> ToolCall:
        """Read one tool span (of any convention) as a :class:`ToolCall`."""
        get = attrs.get
        tool = get(n.GEN_AI_TOOL_NAME) or get(n.OI_TOOL_NAME) or get(n.TRACELOOP_ENTITY_NAME) or span_name or "unknown"
        args = get(n.GEN_AI_TOOL_CALL_ARGUMENTS)
        if args is None:
            args = get(n.OI_INPUT_VALUE)
            if args is None:
                args = get(n.TRACELOOP_ENTITY_INPUT)
        result = get(n.GEN_AI_TOOL_CALL_RESULT)
        if result is None:
            result = get(n.OI_OUTPUT_VALUE)
            if result is None:
                result = get(n.TRACELOOP_ENTITY_OUTPUT)
        lease = None
        deadline = get(n.LOOPGUARD_WAIT_DEADLINE)
        if deadline is not None:
            try:
                lease = Lease(str(get(n.LOOPGUARD_WAIT_OWNER) or ""), float(deadline))
            except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float range
                lease = None
        # OpenInference's hide_inputs/hide_outputs leave a placeholder: that is "not recorded", not a value.
        if args == _REDACTED:
            args = None
        if result == _REDACTED:
            result = None
        progress = get(n.LOOPGUARD_PROGRESS)
        # The common cases inline (plain text too long to unwrap or without an envelope's keys; an error.type
        # or no error); the rest through the same helpers.
        limit = self._max_bytes
        if args is not None and (
            # '"input' is the common prefix of '"input_str"' and '"inputs"': one scan of the text instead of two.
            args.__class__ is not str or (len(args) <= limit and '"input' in args)
        ):
            args_value = self._unwrap_args(args)
        else:
            args_value = args
        if result is not None and (
            result.__class__ is not str
            or (len(result) <= limit and ('"tool_call_id"' in result or '"kwargs"' in result))
        ):
            result_value = self._unwrap_result(result)
        else:
            result_value = result
        error = get(n.ERROR_TYPE)
        if error:
            error = str(error)
        elif status_error:
            error = error_class(attrs, status_error, status_message, events)
        else:
            error = None
        return ToolCall(
            tool=tool if tool.__class__ is str else str(tool),
            arguments=args_value,
            arguments_captured=args is not None,
            result=result_value,
            result_captured=result is not None,
            error=error,
            progress=str(progress) if progress is not None else None,
            start=start_ns * _NS if start_ns else None,
            end=end_ns * _NS if end_ns else None,
            lease=lease,
        )

    def _unwrap_args(self, args: Any) -> Any:
        # OpenLLMetry on LangChain/LangGraph: {"input_str": repr, "tags", "metadata", "inputs": {...real...}, "kwargs"}.
        if isinstance(args, str):
            if len(args) > self._max_bytes or ('"input_str"' not in args and '"inputs"' not in args):
                return args
            return _cached(self._args_cache, args, _unwrap_args_text)
        if isinstance(args, Mapping):
            return _inner_args(args)
        return args

    def _unwrap_result(self, result: Any) -> Any:
        # Serialised LangChain ToolMessages carry a per-call tool_call_id; only the content is evidence.
        if isinstance(result, str):
            if len(result) > self._max_bytes or ('"tool_call_id"' not in result and '"kwargs"' not in result):
                return result
            return _cached(self._result_cache, result, _unwrap_result_text)
        if isinstance(result, Mapping):
            return _inner_result(result)
        return result


def _cached(cache: BoundedCache[str, Any], text: str, fn: Any) -> Any:
    hit = cache.get(text, cache)
    if hit is not cache:
        return hit
    return cache.put(text, fn(text))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _unwrap_args_text(text: str) -> Any:
    doc = _loads(text)
    if isinstance(doc, dict):
        inner = _inner_args(doc)
        if inner is not doc:
            # Back to text, so the canonicalizer's text cache serves every repeat.
            return inner if isinstance(inner, str) else json.dumps(inner, default=repr)
    return text


def _inner_args(doc: Mapping[str, Any]) -> Any:
    inputs = doc.get("inputs")
    if inputs is not None and ("input_str" in doc or "metadata" in doc or "tags" in doc):
        return inputs
    if "input_str" in doc and inputs is None:
        # No structured inputs: the repr string is the best stable form of the arguments.
        return doc["input_str"]
    return doc


def _unwrap_result_text(text: str) -> Any:
    doc = _loads(text)
    if isinstance(doc, dict):
        inner = _inner_result(doc)
        if inner is not doc:
            return inner
    return text


def _inner_result(doc: Mapping[str, Any]) -> Any:
    # OpenLLMetry: {"output": {"lc": 1, "kwargs": {"content": ..., "tool_call_id": ...}}, "kwargs": {...}}
    output = doc.get("output")
    if isinstance(output, Mapping):
        kwargs = output.get("kwargs")
        if isinstance(kwargs, Mapping) and "content" in kwargs:
            return kwargs["content"]
    # OpenInference: {"type": "tool", "data": {"content": ..., "tool_call_id": ...}}
    data = doc.get("data")
    if isinstance(data, Mapping) and "content" in data and "tool_call_id" in data:
        return data["content"]
    # A bare serialised ToolMessage: {"lc": 1, "kwargs": {"content": ..., "tool_call_id": ...}}
    kwargs = doc.get("kwargs")
    if isinstance(kwargs, Mapping) and "content" in kwargs and "tool_call_id" in kwargs:
        return kwargs["content"]
    if "content" in doc and "tool_call_id" in doc:
        return doc["content"]
    return doc
