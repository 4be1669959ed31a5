"""User-defined conventions, fixed examples of the validation and of the rows it builds.

Through :func:`otel_loopguard.conventions.user.user_conventions`. Every expected row and every error message is
written out by hand from the module's rules (the comment says which), never taken from the code's output; messages
are compared whole, as a user reads them.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.conventions.table import Convention, Source, When
from otel_loopguard.conventions.user import USER_KEYS, user_conventions
from otel_loopguard.errors import ConfigError

# The keys of a [conventions.NAME] table, in the order the "accepted:" part of the message lists them.
ACCEPTED = ("when, span_name_prefix, tool_name, arguments, result, error, call_id, agent_name, unwrap_arguments, "
            "unwrap_result")
# The envelopes known to unwrap_*, sorted by name (envelopes.ENVELOPES).
KNOWN_ENVELOPES = ("args_kwargs, content_blocks, input_options, json_string, kwargs_only, langchain_inputs, "
                   "message_repr, python_call, python_dict, tool_message")
# The keys a source table accepts, sorted.
SOURCE_KEYS = "attribute, event, path, span_name, strip_prefix, strip_suffix"
WHEN = {"k": "v"}


def _error(table: Any, name: str = "bad") -> str:
    with pytest.raises(ConfigError) as info:
        user_conventions({name: table})
    return str(info.value)


def _source(value: Any, key: str = "result") -> tuple[Source, ...]:
    [row] = user_conventions({"t": {"when": WHEN, key: value}})
    return getattr(row, key)  # type: ignore[no-any-return]


def test_the_accepted_keys() -> None:
    # when and span_name_prefix recognise the spans; six source keys; two envelope lists.
    assert ", ".join(USER_KEYS) == ACCEPTED


def test_a_full_table_becomes_one_row() -> None:
    # Every key read into its field: a plain name is an attribute source; a list is kept in order; the title names
    # the table; when conditions come before the span-name prefix; a single envelope name is a one-name list.
    table = {
        "when": {"acme.kind": "tool", "acme.tool": True},
        "span_name_prefix": "acme ",
        "tool_name": "acme.tool",
        "arguments": ["acme.in", {"event": "acme.call", "attribute": "args"}],
        "result": {"attribute": "acme.out", "path": ["data", 0]},
        "error": "acme.error",
        "call_id": "acme.id",
        "agent_name": ["acme.agent", {"span_name": True, "strip_prefix": "acme "}],
        "unwrap_arguments": "json_string",
        "unwrap_result": ["content_blocks", "tool_message"],
    }
    assert user_conventions({"acme": table}) == (Convention(
        name="acme",
        title="user-defined [conventions.acme]",
        when=(When("acme.kind", ("tool",)), When("acme.tool"), When(span_name_prefix="acme ")),
        tool_name=(Source(attribute="acme.tool"),),
        arguments=(Source(attribute="acme.in"), Source(attribute="args", event="acme.call")),
        result=(Source(attribute="acme.out", path=("data", 0)),),
        error=(Source(attribute="acme.error"),),
        call_id=(Source(attribute="acme.id"),),
        agent_name=(Source(attribute="acme.agent"), Source(from_span_name=True, strip_prefix="acme ")),
        unwrap_arguments=("json_string",),
        unwrap_result=("content_blocks", "tool_message"),
    ),)


def test_a_minimal_table_leaves_every_source_empty() -> None:
    # Only a condition: no source and no envelope (the defaults of a row), not None.
    assert user_conventions({"m": {"when": {"m.kind": ["a", "b"]}}}) == (Convention(
        name="m", title="user-defined [conventions.m]", when=(When("m.kind", ("a", "b")),)),)
    # A span-name prefix alone recognises the spans too.
    [row] = user_conventions({"p": {"span_name_prefix": "tool "}})
    assert row.when == (When(span_name_prefix="tool "),)


def test_tables_become_rows_in_the_order_given() -> None:
    # The rows keep the order of the tables (user rows are tried in it), each named by its table.
    rows = user_conventions({"zeta": {"when": WHEN}, "alpha": {"when": WHEN}})
    assert [r.name for r in rows] == ["zeta", "alpha"]
    assert user_conventions({}) == ()


def test_table_errors() -> None:
    # Not a table: the value is shown.
    assert _error("x") == "[conventions.bad] must be a table, got 'x'"
    # Unknown keys, sorted, then the accepted ones.
    assert _error({"when": WHEN, "zeta": 1, "alpha": 2}) == (
        f"[conventions.bad]: unknown key(s) alpha, zeta (accepted: {ACCEPTED})")
    # Neither a condition nor a prefix: nothing recognises the spans.
    assert _error({"tool_name": "t"}) == (
        "[conventions.bad]: needs when (attribute = value) or span_name_prefix to recognise its tool spans")


def test_when_errors() -> None:
    assert _error({"when": "k=v"}) == "[conventions.bad] when: expected a table of attribute = value, got 'k=v'"
    # Attribute names are non-empty strings: an int key, and the empty key.
    assert _error({"when": {3: "v"}}) == "[conventions.bad] when: attribute names must be non-empty strings, got 3"
    assert _error({"when": {"": "v"}}) == "[conventions.bad] when: attribute names must be non-empty strings, got ''"
    # A value is a string, a non-empty list of strings, or true: not false, a number, [] or a list with a number.
    for value, shown in ((False, "False"), (3, "3"), ([], "[]"), (["a", 1], "['a', 1]")):
        assert _error({"when": {"k": value}}) == (
            f"[conventions.bad] when.k: expected a string, a list of strings or true, got {shown}")
    # The prefix is a non-empty string.
    for prefix, shown in (("", "''"), (5, "5")):
        assert _error({"span_name_prefix": prefix}) == (
            f"[conventions.bad] span_name_prefix: expected a non-empty string, got {shown}")


def test_envelope_errors() -> None:
    # A list of known envelope names: not a number, not a list holding a number, not an unknown name.
    assert _error({"when": WHEN, "unwrap_result": 5}) == (
        "[conventions.bad] unwrap_result: expected a list of envelope names, got 5")
    assert _error({"when": WHEN, "unwrap_arguments": [1]}) == (
        "[conventions.bad] unwrap_arguments: expected a list of envelope names, got [1]")
    assert _error({"when": WHEN, "unwrap_result": ["json_string", "zip"]}) == (
        f"[conventions.bad] unwrap_result: unknown envelope 'zip' (known: {KNOWN_ENVELOPES})")


def test_sources() -> None:
    # A span-name source alone: the whole name (no prefix or suffix stripped).
    assert _source({"span_name": True}) == (Source(from_span_name=True),)
    assert _source({"span_name": True, "strip_prefix": "p ", "strip_suffix": " s"}) == (
        Source(from_span_name=True, strip_prefix="p ", strip_suffix=" s"),)
    assert _source({"span_name": True, "strip_suffix": " s"}) == (Source(from_span_name=True, strip_suffix=" s"),)
    # An event's attribute; a path given as dotted text: digits are list indexes, the rest keys.
    assert _source({"event": "e", "attribute": "a"}) == (Source(attribute="a", event="e"),)
    assert _source({"attribute": "a", "path": "data.0.text"}) == (Source(attribute="a", path=("data", 0, "text")),)
    assert _source({"attribute": "a", "path": "x"}) == (Source(attribute="a", path=("x",)),)
    assert _source({"attribute": "a"}, key="call_id") == (Source(attribute="a"),)


@pytest.mark.parametrize(("source", "message"), [
    # An empty name; neither a name nor a table.
    ("", "an attribute name must not be empty"),
    (5, "a source is an attribute name or a table ({attribute, path}, {event, attribute}, {span_name = true}), "
        "got 5"),
    # Unknown source keys, sorted, then the accepted ones.
    ({"attribute": "a", "zz": 1, "colour": 2}, f"unknown source key(s) colour, zz (accepted: {SOURCE_KEYS})"),
    # A span-name source takes no attribute, no event and no path (each alone is refused).
    ({"span_name": True, "attribute": "a"}, "a span_name source takes only strip_prefix and strip_suffix"),
    ({"span_name": True, "event": "e"}, "a span_name source takes only strip_prefix and strip_suffix"),
    ({"span_name": True, "path": ["p"]}, "a span_name source takes only strip_prefix and strip_suffix"),
    # Its strip texts are strings (each alone is checked).
    ({"span_name": True, "strip_prefix": 1}, "strip_prefix and strip_suffix must be strings"),
    ({"span_name": True, "strip_suffix": 1}, "strip_prefix and strip_suffix must be strings"),
    # span_name is true or absent.
    ({"span_name": False, "attribute": "a"}, "span_name must be true, got False"),
    ({"span_name": "yes"}, "span_name must be true, got 'yes'"),
    # A source table names a non-empty attribute.
    ({"attribute": 5}, "a source table needs attribute (a non-empty string), got {'attribute': 5}"),
    ({"attribute": ""}, "a source table needs attribute (a non-empty string), got {'attribute': ''}"),
    ({"event": "e"}, "a source table needs attribute (a non-empty string), got {'event': 'e'}"),
    ({"attribute": "a", "event": 3}, "event must be a string, got 3"),
    # A path is a list of keys and indexes: not a number, not a list holding true (a bool is not an index).
    ({"attribute": "a", "path": 5}, "path must be a list of keys and indexes, got 5"),
    ({"attribute": "a", "path": [True]}, "path must be a list of keys and indexes, got [True]"),
    ({"attribute": "a", "path": [1.5]}, "path must be a list of keys and indexes, got [1.5]"),
    # strip_prefix and strip_suffix belong to span-name sources only (each alone is refused).
    ({"attribute": "a", "strip_prefix": "x"}, "strip_prefix and strip_suffix go with span_name = true"),
    ({"attribute": "a", "strip_suffix": "x"}, "strip_prefix and strip_suffix go with span_name = true"),
])
def test_source_errors(source: Any, message: str) -> None:
    # The message starts with the table and the key the source is under.
    assert _error({"when": WHEN, "result": ["ok", source]}) == f"[conventions.bad] result: {message}"


def test_an_empty_source_list() -> None:
    assert _error({"when": WHEN, "tool_name": []}) == (
        "[conventions.bad] tool_name: expected at least one source, got an empty list")
