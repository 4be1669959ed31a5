"""User-defined conventions: ``[conventions.NAME]`` tables of the configuration, validated into table rows.

A team with an in-house framework describes its tool spans in the TOML configuration, no code needed::

    [conventions.acme]
    when = { "acme.span.type" = "tool" }          # attribute = value (a string, a list of strings, or true = present)
    span_name_prefix = "tool "                     # optional: the span name starts with this
    tool_name = "acme.tool.name"                   # default: the span name
    arguments = ["acme.tool.input", { event = "acme.call", attribute = "args" }]
    result = { attribute = "acme.tool.output", path = ["data", "text"] }
    error = "acme.tool.error"
    call_id = "acme.call.id"
    agent_name = "acme.agent"
    unwrap_result = ["json_string"]

A source is an attribute name, or a table: ``{attribute, path}`` (a value inside the attribute's JSON text),
``{event, attribute}`` (an attribute of a span event), ``{span_name = true, strip_prefix, strip_suffix}``. A list
of sources is read first-present-wins (``agent_name`` takes attribute names and ``{span_name = true}`` only). User
rows are tried before the built-in ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .envelopes import ENVELOPES
from .table import Convention, Source, When

__all__ = ["USER_KEYS", "user_conventions"]

_SOURCE_KEYS = ("tool_name", "arguments", "result", "error", "call_id", "agent_name")
#: The keys a ``[conventions.NAME]`` table accepts.
USER_KEYS = ("when", "span_name_prefix", *_SOURCE_KEYS, "unwrap_arguments", "unwrap_result")


def user_conventions(tables: Mapping[str, Any]) -> tuple[Convention, ...]:
    """Validate ``[conventions.NAME]`` tables into convention rows (in the order given).

    Raises:
        ConfigError: naming the table and the key, e.g. ``[conventions.acme] arguments: ...``.
    """
    return tuple(_convention(str(name), table) for name, table in tables.items())


def _convention(name: str, table: Any) -> Convention:
    where = f"[conventions.{name}]"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    unknown = sorted(set(table) - set(USER_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (accepted: {', '.join(USER_KEYS)})")
    when = _when(where, table)
    sources = {key: _sources(f"{where} {key}", table[key]) for key in _SOURCE_KEYS if key in table}
    if any(src.event or src.path for src in sources.get("agent_name", ())):
        # Agent names are read from plain attributes and the span name only (also when a span starts, before events).
        raise ConfigError(f"{where} agent_name: an attribute name or {{span_name = true}} only "
                          "(an event or a path is not read for agent names)")
    unwrap = {}
    for key in ("unwrap_arguments", "unwrap_result"):
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} {key}: expected a list of envelope names, got {value!r}")
        for v in value:
            if v not in ENVELOPES:
                raise ConfigError(f"{where} {key}: unknown envelope {v!r} (known: {', '.join(sorted(ENVELOPES))})")
        unwrap[key] = tuple(value)
    return Convention(
        name=name,
        title=f"user-defined {where}",
        when=when,
        tool_name=sources.get("tool_name", ()),
        arguments=sources.get("arguments", ()),
        result=sources.get("result", ()),
        error=sources.get("error", ()),
        call_id=sources.get("call_id", ()),
        agent_name=sources.get("agent_name", ()),
        unwrap_arguments=unwrap["unwrap_arguments"],
        unwrap_result=unwrap["unwrap_result"],
    )


def _when(where: str, table: Mapping[str, Any]) -> tuple[When, ...]:
    out: list[When] = []
    when = table.get("when", {})
    if not isinstance(when, Mapping):
        raise ConfigError(f"{where} when: expected a table of attribute = value, got {when!r}")
    for key, value in when.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where} when: attribute names must be non-empty strings, got {key!r}")
        if value is True:
            out.append(When(key))
        elif isinstance(value, str):
            out.append(When(key, (value,)))
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            out.append(When(key, tuple(value)))
        else:
            raise ConfigError(f"{where} when.{key}: expected a string, a list of strings or true, got {value!r}")
    prefix = table.get("span_name_prefix")
    if prefix is not None:
        if not isinstance(prefix, str) or not prefix:
            raise ConfigError(f"{where} span_name_prefix: expected a non-empty string, got {prefix!r}")
        out.append(When(span_name_prefix=prefix))
    if not out:
        raise ConfigError(f"{where}: needs when (attribute = value) or span_name_prefix to recognise its tool spans")
    return tuple(out)


def _sources(where: str, value: Any) -> tuple[Source, ...]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(f"{where}: expected at least one source, got an empty list")
    return tuple(_source(where, item) for item in items)


def _source(where: str, item: Any) -> Source:
    if isinstance(item, str):
        if not item:
            raise ConfigError(f"{where}: an attribute name must not be empty")
        return Source(attribute=item)
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: a source is an attribute name or a table "
                          f"({{attribute, path}}, {{event, attribute}}, {{span_name = true}}), got {item!r}")
    allowed = {"attribute", "event", "path", "span_name", "strip_prefix", "strip_suffix"}
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown source key(s) {', '.join(map(str, unknown))} "
                          f"(accepted: {', '.join(sorted(allowed))})")
    if item.get("span_name") is True:
        if "attribute" in item or "event" in item or "path" in item:
            raise ConfigError(f"{where}: a span_name source takes only strip_prefix and strip_suffix")
        prefix, suffix = item.get("strip_prefix", ""), item.get("strip_suffix", "")
        if not isinstance(prefix, str) or not isinstance(suffix, str):
            raise ConfigError(f"{where}: strip_prefix and strip_suffix must be strings")
        return Source(from_span_name=True, strip_prefix=prefix, strip_suffix=suffix)
    if "span_name" in item:
        raise ConfigError(f"{where}: span_name must be true, got {item['span_name']!r}")
    attribute = item.get("attribute")
    if not isinstance(attribute, str) or not attribute:
        raise ConfigError(f"{where}: a source table needs attribute (a non-empty string), got {item!r}")
    event = item.get("event", "")
    if not isinstance(event, str):
        raise ConfigError(f"{where}: event must be a string, got {event!r}")
    path = item.get("path", [])
    if isinstance(path, str):
        path = [int(p) if p.isdigit() else p for p in path.split(".")]
    if not isinstance(path, list) or not all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in path):
        raise ConfigError(f"{where}: path must be a list of keys and indexes, got {path!r}")
    if "strip_prefix" in item or "strip_suffix" in item:
        raise ConfigError(f"{where}: strip_prefix and strip_suffix go with span_name = true")
    return Source(attribute=attribute, event=event, path=tuple(path))
