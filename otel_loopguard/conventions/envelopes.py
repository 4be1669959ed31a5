"""Envelopes: wrappers some instrumentations put around a tool call's arguments or result.

A convention names the envelopes to peel off (``unwrap_arguments`` / ``unwrap_result`` in :mod:`.table` or in a
``[conventions.NAME]`` table), so only the call's own content is compared. Each function takes the value and a
JSON parser (cached by the extractor; None for text that is not JSON) and returns the inner value, or the very
same value object when it is not in that envelope.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

Parse = Callable[[str], Any]


def _dumps(value: Any) -> str:
    # Back to text, so the canonicalizer's text cache serves every repeat.
    return json.dumps(value, default=repr)


def _inner_args(doc: Mapping[str, Any]) -> Any:
    # OpenLLMetry on LangChain/LangGraph: {"input_str": repr, "tags", "metadata", "inputs": {...real...}, "kwargs"}.
    inputs = doc.get("inputs")
    if inputs is not None and ("input_str" in doc or "metadata" in doc or "tags" in doc):
        return inputs
    if "input_str" in doc and inputs is None:
        # No structured inputs: the repr string is the best stable form of the arguments.
        return doc["input_str"]
    return doc


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


def _object_envelope(inner: Callable[[Mapping[str, Any]], Any], markers: tuple[str, str],
                     as_text: bool) -> Callable[[Any, Parse], Any]:
    """An envelope that is a JSON object (as text or as a mapping) whose ``inner`` part is the value.

    Args:
        inner: the value inside a parsed object, or the object itself when it is not this envelope.
        markers: quoted keys one of which the text of such an object must contain (a test before parsing).
        as_text: an inner value found in text is given back as JSON text (a string stays itself).
    """
    first, second = markers

    def unwrap(value: Any, parse: Parse) -> Any:
        if value.__class__ is str:
            if first not in value and second not in value:
                return value
            doc = parse(value)
            if isinstance(doc, dict):
                found = inner(doc)
                if found is not doc:
                    return _dumps(found) if as_text and not isinstance(found, str) else found
            return value
        if isinstance(value, Mapping):
            return inner(value)
        return value

    return unwrap


# OpenLLMetry on LangChain/LangGraph: only the structured inputs are the call's arguments.
_langchain_inputs = _object_envelope(_inner_args, ('"input_str"', '"inputs"'), as_text=True)
# Serialised LangChain ToolMessages carry a per-call tool_call_id; only the content is evidence.
_tool_message = _object_envelope(_inner_result, ('"tool_call_id"', '"kwargs"'), as_text=False)


def _json_string(value: Any, parse: Parse) -> Any:
    # JSON.stringify of a string result (Vercel AI SDK), or a JSON-encoded return value (DSPy): "\"text\"".
    if value.__class__ is str and len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        doc = parse(value)
        if doc.__class__ is str:
            return doc
    return value


def _call_arguments(marker: str, keys: frozenset[str]) -> Callable[[Any, Parse], Any]:
    """A decorated Python function's recorded call, ``{"args": [...], "kwargs": {...}}`` (keys within ``keys``), as
    the call's own arguments: the keyword arguments, the positional ones, or both as one object."""

    def unwrap(value: Any, parse: Parse) -> Any:
        if value.__class__ is str and marker in value:
            doc = parse(value)
            if isinstance(doc, dict) and doc and set(doc) <= keys:
                args, kwargs = doc.get("args") or [], doc.get("kwargs") or {}
                if isinstance(kwargs, dict) and isinstance(args, list):
                    if not args:
                        return _dumps(kwargs)
                    if not kwargs:
                        return _dumps(args)
                    return _dumps({"args": args, **kwargs})
        return value

    return unwrap


# smolagents under OpenInference: {"args": [...], "sanitize_inputs_outputs": bool, "kwargs": {...}}.
_python_call = _call_arguments('"sanitize_inputs_outputs"', frozenset({"args", "kwargs", "sanitize_inputs_outputs"}))
# Langfuse's @observe: {"args": [...], "kwargs": {...}}.
_args_kwargs = _call_arguments('"kwargs"', frozenset({"args", "kwargs"}))


def _kwargs_only(value: Any, parse: Parse) -> Any:
    # DSPy under OpenInference: {"kwargs": {...}}.
    if value.__class__ is str and value.startswith('{"kwargs"'):
        doc = parse(value)
        if isinstance(doc, dict) and len(doc) == 1 and isinstance(doc.get("kwargs"), dict):
            return _dumps(doc["kwargs"])
    return value


def _input_options(value: Any, parse: Parse) -> Any:
    # BeeAI under OpenInference: {"input": {...}, "options": null}; the options are the run's, not the call's.
    if value.__class__ is str and value.startswith('{"input"'):
        doc = parse(value)
        if isinstance(doc, dict) and set(doc) == {"input", "options"}:
            inner = doc["input"]
            return inner if isinstance(inner, str) else _dumps(inner)
    return value


#: Characters of Python literal text read at most (longer text stays opaque text).
MAX_LITERAL_CHARS = 65_536


def _literal(text: str) -> Any:
    """A Python literal (``ast.literal_eval``: literal syntax only, never code), or None when ``text`` is not one or
    is longer than :data:`MAX_LITERAL_CHARS`."""
    if len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _python_dict(value: Any, parse: Parse) -> Any:
    # OpenLIT on LangChain: the arguments as a Python dict's repr, {'query': 'x'}, not JSON.
    if value.__class__ is str and value.startswith("{'") and parse(value) is None:
        doc = _literal(value)
        if isinstance(doc, dict):
            return _dumps(doc)
    return value


#: The per-call ids in the repr of a LangChain ToolMessage (a run id, the model's call id).
_MESSAGE_IDS = re.compile(r" (?:tool_call_id|id)='[^']*'")


def _message_repr(value: Any, parse: Parse) -> Any:
    # OpenLIT on LangChain: a ToolMessage's repr, "content='...' name='search' tool_call_id='call_...'": its content
    # (a literal read safely), else the text without its per-call ids.
    if value.__class__ is str and value.startswith("content=") and "tool_call_id=" in value:
        content = _first_field(value)
        return content if content is not None else _MESSAGE_IDS.sub("", value)
    return value


def _first_field(text: str) -> Any:
    """The literal value of the first ``name=literal`` field of a repr, or None."""
    if len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        name, equals, literal = next(tokens), next(tokens), next(tokens)
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return None
    if name.type != tokenize.NAME or equals.string != "=" or literal.type != tokenize.STRING:
        return None
    return _literal(literal.string)


def _content_blocks(value: Any, parse: Parse) -> Any:
    # strands: a result is a list of content blocks, [{"text": "..."}]: one text block is that text.
    if value.__class__ is str and value.startswith('[{"text"'):
        doc = parse(value)
        if isinstance(doc, list) and len(doc) == 1 and isinstance(doc[0], dict) and set(doc[0]) == {"text"}:
            return doc[0]["text"]
    return value


#: Envelopes a convention may name in ``unwrap_arguments`` / ``unwrap_result``: each returns the inner value, or
#: the value itself when it is not in that envelope.
class Envelope(NamedTuple):
    """An envelope: a cheap test on the text (False: certainly not this envelope) and the unwrapping function."""

    name: str
    may_be: Callable[[str], bool]
    unwrap: Callable[[Any, Parse], Any]


ENVELOPES: dict[str, Envelope] = {
    e.name: e
    for e in (
        Envelope("langchain_inputs", lambda t: '"input_str"' in t or '"inputs"' in t, _langchain_inputs),
        Envelope("tool_message", lambda t: '"tool_call_id"' in t or '"kwargs"' in t, _tool_message),
        Envelope("json_string", lambda t: t[:1] == '"', _json_string),
        Envelope("python_call", lambda t: '"sanitize_inputs_outputs"' in t, _python_call),
        Envelope("args_kwargs", lambda t: t.startswith('{"args"'), _args_kwargs),
        Envelope("kwargs_only", lambda t: t.startswith('{"kwargs"'), _kwargs_only),
        Envelope("content_blocks", lambda t: t.startswith('[{"text"'), _content_blocks),
        Envelope("input_options", lambda t: t.startswith('{"input"'), _input_options),
        Envelope("python_dict", lambda t: t.startswith("{'"), _python_dict),
        Envelope("message_repr", lambda t: t.startswith("content="), _message_repr),
    )
}
