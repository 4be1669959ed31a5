"""Span attributes -> engine values: fixed examples for what ``conventions/extract.py`` decides that the recorded
fixtures and ``test_extract_values.py`` leave open.

Every expected value is worked out by hand from the README (its conventions table, "When content is not recorded,
or cannot be read", "Your own convention") or from the documented meaning of the function, never from running the
code. Rows built from user conventions are built when a test runs, so they exercise the row compiler itself (the
built-in rows are compiled while the module is imported).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.conventions.extract import (
    ROLE_AGENT,
    ROLE_LLM,
    ROLE_TOOL,
    Extractor,
    agent_name,
    may_matter,
)
from otel_loopguard.conventions.table import AGENT_SPANS, MODEL_SPANS, Convention, When
from otel_loopguard.conventions.user import user_conventions
from otel_loopguard.core.config import LoopGuardConfig, RedactedValue
from otel_loopguard.core.model import Lease, ToolCall

# 2026-01-01T00:00:00Z in nanoseconds since the epoch (OTLP's unit), and in seconds (the engine's).
T0_NS = 1_767_225_600 * 10**9
T0_S = 1_767_225_600.0


def _user(**tables: dict[str, Any]) -> Extractor:
    """An extractor with ``[conventions.NAME]`` tables (as the configuration file gives them)."""
    return Extractor(conventions=user_conventions(tables))


# --- a tool span read through its role: a tool call, or None -----------------------------------------------------

def _read_tool(extractor: Extractor, attrs: dict[str, Any], name: str, *args: Any, **kwargs: Any) -> ToolCall | None:
    """The processor's and the readers' path: the span's role and row, then the call when the role is tool."""
    role, row = extractor.read_role(attrs, name)
    return extractor.call_of(row, attrs, name, *args, **kwargs) if role == ROLE_TOOL else None


def test_read_tool_is_none_for_a_span_that_is_no_tool_call() -> None:
    extractor = Extractor()
    # No convention recognises a span without attributes named "lookup" (the bare GenAI tool span needs the
    # "execute_tool " prefix): not a tool call, unlike tool_call, which reads any span as a GenAI one.
    assert _read_tool(extractor, {}, "lookup", T0_NS, T0_NS + 1) is None
    # ADK's "(merged tools)" span is recognised and is not a call of its own (README: conventions table).
    assert _read_tool(extractor, {"gen_ai.tool.name": "(merged tools)"}, "execute_tool (merged tools)", T0_NS,
                               T0_NS + 1) is None


def test_read_tool_reads_a_tool_span_with_every_argument() -> None:
    # A GenAI execute_tool span that failed: status ERROR with the message "quota", no error.type, and an exception
    # event of type QuotaError. The error class is the exception event's type (error_class's order); the times are
    # the span's, in seconds: T0 + 0.5 s and T0 + 2 s.
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "quote",
             "gen_ai.tool.call.arguments": '{"s": "ACME"}', "gen_ai.tool.call.result": "n/a"}
    events = [("exception", {"exception.type": "QuotaError"})]
    call = _read_tool(Extractor(), attrs, "execute_tool quote", T0_NS + 500_000_000, T0_NS + 2 * 10**9, True, "quota",
                                 events)
    assert call is not None
    assert call.start == pytest.approx(T0_S + 0.5, abs=1e-6) and call.end == pytest.approx(T0_S + 2.0, abs=1e-6)
    assert call == ToolCall(tool="quote", arguments='{"s": "ACME"}', arguments_captured=True, result="n/a",
                            result_captured=True, error="QuotaError", start=call.start, end=call.end)
    # Without the event: the status message is the class.
    assert _read_tool(Extractor(), attrs, "x", 1, 2, True, "quota").error == "quota"  # type: ignore[union-attr]
    # Without a status: the call did not fail (the default is no error status, no message, no events).
    assert _read_tool(Extractor(), attrs, "x", 1, 2).error is None  # type: ignore[union-attr]


def test_read_tool_reads_events_of_the_convention() -> None:
    # strands (default conventions) writes arguments and result in span events: the call is read from its events.
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "strands-agents", "gen_ai.tool.name": "s"}
    events = [("gen_ai.tool.message", {"content": '{"q": 1}'}), ("gen_ai.choice", {"message": "ok"})]
    call = _read_tool(Extractor(), attrs, "execute_tool s", 1, 2, events=events)
    assert call is not None and (call.arguments, call.result) == ('{"q": 1}', "ok")


# --- call_id ---------------------------------------------------------------------------------------------------

def test_call_id_per_convention() -> None:
    extractor = Extractor()
    # GenAI: gen_ai.tool.call.id; an int is given as its text; a span without one has none.
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    assert extractor.call_id({**genai, "gen_ai.tool.call.id": "call_1"}, "execute_tool t") == "call_1"
    assert extractor.call_id({**genai, "gen_ai.tool.call.id": 7}) == "7"
    assert extractor.call_id(genai) is None
    # Vercel AI SDK: ai.toolCall.id (the README's table).
    assert extractor.call_id({"ai.operationId": "ai.toolCall", "ai.toolCall.id": "v-1"}) == "v-1"
    # A span no convention recognises has no call id, whatever attributes it carries.
    assert extractor.call_id({"gen_ai.tool.call.id": "c"}, "lookup") is None


def test_call_id_from_an_event_or_the_span_name() -> None:
    # A user convention whose call id is in a span event: call_id reads the events it is given.
    extractor = _user(acme={"when": {"acme.kind": "tool"}, "call_id": {"event": "acme.call", "attribute": "id"}})
    attrs = {"acme.kind": "tool"}
    assert extractor.call_id(attrs, "t", [("other", {"id": "no"}), ("acme.call", {"id": "e-1"})]) == "e-1"
    assert extractor.call_id(attrs, "t") is None
    # A convention whose call id is the span name: without a name given, the name is "" (no call id).
    by_name = _user(acme={"when": {"acme.kind": "tool"}, "call_id": {"span_name": True}})
    assert by_name.call_id(attrs, "call-9") == "call-9"
    assert by_name.call_id(attrs) is None


# --- the module's helpers for the built-in conventions ------------------------------------------------------------

def test_tool_agent_and_model_conventions_of_a_span() -> None:
    """The extractor's convention and role rows of GenAI tool, agent and model spans, ADK's and OpenInference's."""
    # The README's table: gen_ai.operation.name execute_tool is the GenAI tool row, invoke_agent the GenAI agent
    # spans, chat the GenAI model spans; a span of one kind is none of the others.
    extractor = Extractor()
    tool = {"gen_ai.operation.name": "execute_tool"}
    agent = {"gen_ai.operation.name": "invoke_agent"}
    chat = {"gen_ai.operation.name": "chat"}
    convention = extractor.convention(tool)
    assert convention is not None and convention.name == "genai"
    assert extractor.convention(agent) is None and extractor.convention({}, "lookup") is None
    # A bare "execute_tool <tool>" span is read by name: the name is passed on.
    named = extractor.convention({}, "execute_tool lookup")
    assert named is not None and named.name == "genai_span_name"
    assert extractor.read_role(agent, "") == (ROLE_AGENT, AGENT_SPANS[0])
    assert extractor.read_role(chat, "") == (ROLE_LLM, MODEL_SPANS[0])
    assert extractor.read_role(tool, "")[0] == ROLE_TOOL
    # ADK's call_llm span is a model span by its exact name (and gen_ai.system).
    role, adk = extractor.read_role({"gen_ai.system": "gcp.vertex.agent"}, "call_llm")
    assert role == ROLE_LLM and adk.name == "adk"
    role, openinference = extractor.read_role({"openinference.span.kind": "AGENT"}, "x")
    assert role == ROLE_AGENT and openinference.name == "openinference"


def test_may_matter_by_marker_key_or_tool_span_name() -> None:
    # A span matters when it carries one of the conventions' marker keys, or is named like a GenAI tool span.
    assert may_matter({"gen_ai.operation.name": "chat"}, "x") is True
    assert may_matter({"app.key": 1}, "execute_tool lookup") is True
    assert may_matter({"app.key": 1}, "lookup") is False
    # The markers and names can be given: without them nothing matters by key.
    assert may_matter({"gen_ai.operation.name": "chat"}, "x", frozenset(), ()) is False
    assert may_matter({"k": 1}, "x", frozenset({"k"}), ()) is True


# --- user conventions: the row compiler -------------------------------------------------------------------------

def test_a_user_row_without_tool_name_reads_the_span_name() -> None:
    # README ("Your own convention"): tool_name defaults to the span name.
    extractor = _user(acme={"when": {"acme.kind": "tool"}})
    assert extractor.tool_call({"acme.kind": "tool"}, "acme lookup", 1, 2).tool == "acme lookup"


def test_a_user_tool_name_inside_json_is_read_by_its_path() -> None:
    # The tool name is "kwargs.name" inside the JSON text of acme.out: "search", not the attribute's whole text.
    extractor = _user(acme={"when": {"acme.kind": "tool"},
                            "tool_name": {"attribute": "acme.out", "path": ["kwargs", "name"]}})
    attrs = {"acme.kind": "tool", "acme.out": '{"kwargs": {"name": "search"}}'}
    assert extractor.tool_call(attrs, "span", 1, 2).tool == "search"
    # A plain attribute as the first tool-name source is read as it stands; when absent, the next source.
    plain = _user(acme={"when": {"acme.kind": "tool"}, "tool_name": ["acme.tool", "acme.alias"]})
    assert plain.tool_call({"acme.kind": "tool", "acme.tool": "a", "acme.alias": "b"}, "span", 1, 2).tool == "a"
    assert plain.tool_call({"acme.kind": "tool", "acme.alias": "b"}, "span", 1, 2).tool == "b"


def test_user_row_placeholders_in_arguments_and_results() -> None:
    # The redacted_values rules on a user row: an object of placeholders is not recorded, as arguments or as a
    # result; a result object holding a placeholder beside a real value is a recorded result.
    extractor = _user(acme={"when": {"acme.kind": "tool"}, "arguments": "acme.in", "result": "acme.out"})
    call = extractor.tool_call({"acme.kind": "tool", "acme.in": '{"q": "[REDACTED]"}',
                                "acme.out": '{"a": "[REDACTED]"}'}, "t", 1, 2)
    assert (call.arguments_captured, call.arguments) == (False, None)
    assert (call.result_captured, call.result) == (False, None)
    call = extractor.tool_call({"acme.kind": "tool", "acme.out": '{"a": "[REDACTED]", "b": 0}'}, "t", 1, 2)
    assert (call.result_captured, call.result) == (True, '{"a": "[REDACTED]", "b": 0}')
    # Read through a path (not inline), the same rules: the value at args.0 is an object of placeholders.
    nested = _user(acme={"when": {"acme.kind": "tool"}, "arguments": {"attribute": "acme.in", "path": ["args", 0]},
                         "result": {"attribute": "acme.out", "path": ["r"]}})
    call = nested.tool_call({"acme.kind": "tool", "acme.in": '{"args": [{"q": "[REDACTED]"}]}',
                             "acme.out": '{"r": {"a": 1}}'}, "t", 1, 2)
    assert (call.arguments_captured, call.arguments) == (False, None)
    assert (call.result_captured, call.result) == (True, {"a": 1})
    # The object found at the path as a mapping, every value a placeholder: not recorded, as the same text is.
    call = nested.tool_call({"acme.kind": "tool", "acme.out": '{"r": {"a": "[REDACTED]"}}'}, "t", 1, 2)
    assert (call.result_captured, call.result) == (False, None)
    # One real value among them: recorded, as the object found at the path.
    call = nested.tool_call({"acme.kind": "tool", "acme.in": '{"args": [{"q": "[REDACTED]", "p": 2}]}'}, "t", 1, 2)
    assert (call.arguments_captured, call.arguments) == (True, {"q": "[REDACTED]", "p": 2})


def test_user_row_unwraps_and_rechecks_its_envelopes() -> None:
    # unwrap_result = json_string: the JSON string "\"ok\"" is the result "ok"; "\"[REDACTED]\"" is a placeholder
    # inside the envelope: not recorded.
    extractor = _user(acme={"when": {"acme.kind": "tool"}, "result": "acme.out", "unwrap_result": ["json_string"],
                            "arguments": "acme.in", "unwrap_arguments": ["kwargs_only"]})
    attrs = {"acme.kind": "tool", "acme.in": '{"kwargs": {"q": 1}}'}
    call = extractor.tool_call({**attrs, "acme.out": '"ok"'}, "t", 1, 2)
    assert (call.result_captured, call.result) == (True, "ok")
    assert (call.arguments_captured, json.loads(call.arguments)) == (True, {"q": 1})
    hidden = extractor.tool_call({**attrs, "acme.out": '"[REDACTED]"'}, "t", 1, 2)
    assert (hidden.result_captured, hidden.result) == (False, None)


@pytest.mark.parametrize("part", ["tool_name", "arguments", "result", "error", "call_id"])
def test_a_user_row_with_an_event_source_reads_the_events(part: str) -> None:
    # Each part may come from a span event (README: { event = "acme.call", attribute = "x" }); the events are read
    # for a row that has such a source, whichever part it is. The event carries "v" (an error class for error).
    extractor = _user(acme={"when": {"acme.kind": "tool"}, part: {"event": "acme.call", "attribute": "x"}})
    attrs = {"acme.kind": "tool"}
    events = [("acme.call", {"x": "v"})]
    if part == "call_id":
        assert extractor.call_id(attrs, "span", events) == "v"
        return
    call = extractor.tool_call(attrs, "span", 1, 2, events=events)
    got = {"tool_name": call.tool, "arguments": call.arguments, "result": call.result, "error": call.error}[part]
    assert got == "v"


def test_user_row_agent_name_and_call_id() -> None:
    extractor = _user(acme={"when": {"acme.kind": "tool"}, "agent_name": "acme.agent", "call_id": "acme.id"})
    attrs = {"acme.kind": "tool", "acme.agent": "planner", "acme.id": "c-1", "gen_ai.agent.name": "other"}
    # The row's own agent attribute, not gen_ai.agent.name (the README: a tool span names its agent only in its
    # convention's agent attribute).
    assert extractor.agent_name(attrs, None, "span") == "planner"
    assert extractor.call_id(attrs, "span") == "c-1"


def test_user_row_errors_inline_and_through_a_path() -> None:
    # error = a plain attribute: a string is the class (cut at 200 characters); true means failed with the class
    # from the exception event, else the status message, else the result's text, else "error".
    inline = _user(acme={"when": {"acme.kind": "tool"}, "error": ["acme.err", "acme.err2"], "result": "acme.out"})
    attrs = {"acme.kind": "tool"}
    assert inline.tool_call({**attrs, "acme.err": "E" * 250}, "t", 1, 2).error == "E" * 200
    assert inline.tool_call({**attrs, "acme.err2": "Second"}, "t", 1, 2).error == "Second"
    assert inline.tool_call({**attrs, "acme.err": True, "acme.out": "disk full"}, "t", 1, 2).error == "disk full"
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2, True, "bad").error == "bad"
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2, True, None,
                            [("exception", {"exception.type": "IOError"})]).error == "IOError"
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2).error == "error"
    # true without an error status (an instrumentation that records the exception but leaves the status unset):
    # the exception event's type all the same, whether the events come as a list or as a one-pass iterator.
    timeout = [("exception", {"exception.type": "TimeoutError"})]
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2, events=timeout).error == "TimeoutError"
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2, events=iter(timeout)).error == "TimeoutError"
    # With an error status too the iterator is listed once (the status path reads it) and the flag reads that list.
    assert inline.tool_call({**attrs, "acme.err": True}, "t", 1, 2, True, "bad", iter(timeout)).error == "TimeoutError"
    # No error attribute: the span's status decides (an error status without a message: "error").
    assert inline.tool_call(attrs, "t", 1, 2, True).error == "error"
    assert inline.tool_call(attrs, "t", 1, 2).error is None
    # A result that is not text is no error class.
    structured = _user(acme={"when": {"acme.kind": "tool"}, "error": "acme.err",
                             "result": {"attribute": "acme.out", "path": ["r"]}})
    assert structured.tool_call({**attrs, "acme.err": True, "acme.out": '{"r": [1]}'}, "t", 1, 2).error == "error"


# --- recognising spans: conditions, markers, the cached classification -------------------------------------------

def test_user_row_conditions_of_every_kind() -> None:
    # when: attribute = value (one of a list), attribute = true (present), span_name_prefix; and, for a Convention
    # given in code, span_name_equals. A row applies when all its conditions hold.
    extractor = _user(acme={"when": {"acme.kind": ["tool", "action"], "acme.id": True}, "span_name_prefix": "do "})
    assert extractor.span_role({"acme.kind": "action", "acme.id": 1}, "do it") == ROLE_TOOL
    assert extractor.span_role({"acme.kind": "tool", "acme.id": 1}, "do it") == ROLE_TOOL
    assert extractor.span_role({"acme.kind": "other", "acme.id": 1}, "do it") is None
    assert extractor.span_role({"acme.kind": "tool"}, "do it") is None
    assert extractor.span_role({"acme.kind": "tool", "acme.id": 1}, "did it") is None
    exact = Extractor(conventions=[Convention(name="x", title="x", when=(When(span_name_equals="acme_call"),))])
    assert exact.span_role({}, "acme_call") == ROLE_TOOL
    assert exact.span_role({}, "acme_call 2") is None
    assert exact.span_role({}, "acme") is None


def test_markers_of_user_rows() -> None:
    # Every row's first attribute condition is a marker key; a row recognised by its span name alone adds that name
    # to the name markers (its spans may matter without any marker key).
    by_key = _user(acme={"when": {"acme.kind": "tool"}, "span_name_prefix": "do "})
    assert "acme.kind" in by_key.marker_keys and "do " not in by_key.marker_names
    assert by_key.may_matter({"acme.kind": "tool"}, "x") is True
    by_name = _user(acme={"span_name_prefix": "do "})
    assert "do " in by_name.marker_names
    assert by_name.may_matter({}, "do it") is True and by_name.span_role({}, "do it") == ROLE_TOOL
    assert by_name.may_matter({}, "did it") is False
    # The built-in markers: the GenAI tool span name, and no attribute of a row tested by name alone.
    assert Extractor().marker_names == ("execute_tool ",)
    exact = Extractor(conventions=[Convention(name="x", title="x", when=(When(span_name_equals="acme_call"),))])
    assert exact.marker_names == ("acme_call", "execute_tool ")
    assert exact.read_role({}, "acme_call")[0] == ROLE_TOOL


def test_read_role_gives_the_row_for_call_of() -> None:
    # read_role answers the role and the row in one classification; call_of reads the call in that row.
    extractor = Extractor()
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"}
    role, row = extractor.read_role(attrs, "execute_tool t")
    assert role == ROLE_TOOL
    call = extractor.call_of(row, attrs, "execute_tool t", T0_NS, None)
    assert (call.tool, call.arguments, call.start, call.end) == ("t", "{}", T0_S, None)
    assert extractor.read_role({"app.x": 1}, "execute_tool t")[0] == ROLE_TOOL
    # read_role answers for spans that pass may_matter only: a row without conditions (given in code) recognises
    # every span, but one without a marker key or a tool span name is not read.
    anything = Extractor(conventions=[Convention(name="any", title="any", when=())])
    assert anything.span_role({"app.x": 1}, "x") == ROLE_TOOL
    assert anything.read_role({"app.x": 1}, "x") == (None, None)
    assert anything.may_matter({"app.x": 1}, "x") is False
    assert anything.read_role({"gen_ai.tool.name": "t"}, "x")[0] == ROLE_TOOL


def test_the_same_keys_with_other_values_or_names_are_classified_again() -> None:
    # One extractor, one key set ({gen_ai.operation.name}), values and names varying: each span gets the table's
    # answer, not the answer remembered for the previous span with those keys.
    extractor = Extractor()
    op = "gen_ai.operation.name"
    answers = [({op: "chat"}, "x", ROLE_LLM), ({op: "execute_tool"}, "x", ROLE_TOOL), ({op: "chat"}, "y", ROLE_LLM),
               ({op: "embeddings"}, "x", None), ({op: "embeddings"}, "execute_tool a", ROLE_TOOL),
               ({op: "embeddings"}, "execute_tool b", ROLE_TOOL), ({op: "embeddings"}, "y", None),
               ({op: "embeddings"}, "execute_tool a", ROLE_TOOL), ({op: "invoke_agent"}, "x", ROLE_AGENT)]
    for attrs, name, role in answers * 2:
        assert extractor.span_role(attrs, name) == role, (attrs, name)
    # The same attribute mapping asked about twice with other names: the name counts.
    attrs = {op: "embeddings"}
    assert extractor.span_role(attrs, "execute_tool a") == ROLE_TOOL
    assert extractor.span_role(attrs, "a") is None
    # ADK's call_llm: a model span by its exact name; another name with the same attributes is none.
    adk = {"gen_ai.system": "gcp.vertex.agent"}
    assert [extractor.span_role(adk, name) for name in ("call_llm", "call_llm_x", "call_llm", "x")] == [
        ROLE_LLM, None, ROLE_LLM, None]


def test_unhashable_compared_values_are_decided_by_a_scan() -> None:
    # An OTLP kvlist (a dict) where a string is expected cannot be a cache key; such a span is still classified
    # (no role: only strings match), and a later span with the same keys and a string value gets its own answer.
    extractor = Extractor()
    op = "gen_ai.operation.name"
    assert extractor.span_role({op: {"a": 1}}, "x") is None
    assert extractor.span_role({op: {"a": 1}}, "execute_tool t") == ROLE_TOOL
    assert extractor.span_role({op: "chat"}, "x") == ROLE_LLM
    assert extractor.tool_call({op: ["execute_tool"], "gen_ai.tool.name": "t"}, "x", 1, 2).tool == "t"


# --- reading values: sources, paths, events, sizes --------------------------------------------------------------

def _acme(**parts: Any) -> Extractor:
    return _user(acme={"when": {"acme.kind": "tool"}, **parts})


ACME = {"acme.kind": "tool"}


@pytest.mark.parametrize(("path", "text", "expected"), [
    (["a", 0], '{"a": [5, 6]}', 5),
    (["a", 1], '{"a": [5, 6]}', 6),
    (["a", -1], '{"a": [5, 6]}', 6),     # a negative index counts from the end, as in Python
    (["a", -2], '{"a": [5, 6]}', 5),
    (["a", 2], '{"a": [5, 6]}', None),   # out of range: absent
    (["a", -3], '{"a": [5, 6]}', None),
    (["a", 0], '{"a": {"0": 5}}', None),  # an index into an object: absent
    (["a", "b"], '{"a": [5]}', None),    # a key into a list: absent
    (["a", "b"], '{"a": {"c": 1}}', None),
    (["a", "b", "c"], '{"a": {"b": null}}', None),
    (["a"], "not json", None),
    (["a"], "[1]", None),
])
def test_paths_into_json_text(path: list[Any], text: str, expected: Any) -> None:
    # README ("Your own convention"): path reads inside the attribute's JSON text; a step that does not exist means
    # the source is absent (the result is not recorded), never an error.
    call = _acme(result={"attribute": "acme.out", "path": path}).tool_call({**ACME, "acme.out": text}, "t", 1, 2)
    assert (call.result, call.result_captured) == (expected, expected is not None)


def test_paths_into_a_mapping_and_sources_in_order() -> None:
    # An attribute that is already a mapping (an OTLP kvlist) is walked without parsing; the first present source
    # wins, and an absent path moves on to the next source.
    extractor = _acme(result=[{"attribute": "acme.a", "path": ["x"]}, {"attribute": "acme.b", "path": ["y"]}])
    assert extractor.tool_call({**ACME, "acme.a": {"x": "1"}, "acme.b": {"y": "2"}}, "t", 1, 2).result == "1"
    assert extractor.tool_call({**ACME, "acme.a": {"z": "1"}, "acme.b": {"y": "2"}}, "t", 1, 2).result == "2"
    assert extractor.tool_call({**ACME, "acme.b": {"y": "2"}}, "t", 1, 2).result == "2"


def test_paths_are_not_read_in_text_over_the_size_limit() -> None:
    # max_bytes: text longer than this is not parsed: a path into it finds nothing. 20 characters with a limit of
    # 20 are parsed; with a limit of 19 they are not.
    text = '{"a": "0123456789a"}'
    assert len(text) == 20
    conventions = user_conventions({"acme": {"when": {"acme.kind": "tool"},
                                             "result": {"attribute": "acme.out", "path": ["a"]}}})
    assert Extractor(20, conventions=conventions).tool_call({**ACME, "acme.out": text}, "t", 1, 2).result == (
        "0123456789a")
    assert Extractor(19, conventions=conventions).tool_call({**ACME, "acme.out": text}, "t", 1, 2).result is None


def test_the_same_text_read_again_gives_the_same_values() -> None:
    # Parsed JSON is remembered per text; the second read of each text (and of a text that is no JSON) answers as
    # the first did.
    extractor = _acme(result={"attribute": "acme.out", "path": ["a"]}, arguments={"attribute": "acme.in",
                                                                                  "path": ["q"]})
    for _ in range(2):
        call = extractor.tool_call({**ACME, "acme.out": '{"a": "x"}', "acme.in": "{oops"}, "t", 1, 2)
        assert (call.result, call.arguments, call.arguments_captured) == ("x", None, False)
        other = extractor.tool_call({**ACME, "acme.out": '{"a": "y"}', "acme.in": '{"q": 3}'}, "t", 1, 2)
        assert (other.result, other.arguments) == ("y", 3)


def test_event_sources_take_the_first_event_that_has_the_attribute() -> None:
    # Several events of the name: the first that carries the attribute counts (an event without it is skipped);
    # events of other names are not read.
    extractor = _acme(arguments={"event": "acme.call", "attribute": "args"})
    events = [("other", {"args": "no"}), ("acme.call", {"id": 1}), ("acme.call", {"args": "first"}),
              ("acme.call", {"args": "second"})]
    assert extractor.tool_call(ACME, "t", 1, 2, events=events).arguments == "first"
    assert extractor.tool_call(ACME, "t", 1, 2, events=[("other", {"args": "no"})]).arguments_captured is False
    # An event source with a path reads inside the event attribute's JSON text.
    pathed = _acme(arguments={"event": "acme.call", "attribute": "args", "path": ["q"]})
    assert pathed.tool_call(ACME, "t", 1, 2, events=[("acme.call", {"args": '{"q": "in"}'})]).arguments == "in"


def test_span_name_sources_strip_prefix_and_suffix() -> None:
    # { span_name = true, strip_prefix, strip_suffix }: removed only when present; an empty remainder is no name.
    extractor = _acme(tool_name={"span_name": True, "strip_prefix": "run ", "strip_suffix": ".tool"})
    assert extractor.tool_call(ACME, "run search.tool", 1, 2).tool == "search"
    assert extractor.tool_call(ACME, "search.tool", 1, 2).tool == "search"
    assert extractor.tool_call(ACME, "run search", 1, 2).tool == "search"
    assert extractor.tool_call(ACME, "runsearch", 1, 2).tool == "runsearch"
    # "run .tool" leaves nothing: no tool name from it, and the span name itself is the fallback.
    assert extractor.tool_call(ACME, "run .tool", 1, 2).tool == "run .tool"


def test_agent_name_from_the_span_name() -> None:
    # Agent names are read from plain attributes and the span name only (user.py refuses event and path sources for
    # them); a span-name source strips as written, and an empty remainder falls back to the default.
    extractor = _acme(agent_name=[{"span_name": True, "strip_prefix": "agent "}])
    assert extractor.agent_name(ACME, "fallback", "agent planner") == "planner"
    assert extractor.agent_name(ACME, "fallback", "agent ") == "fallback"
    # The OpenInference AGENT span's last source is the span name before ".run".
    assert agent_name({"openinference.span.kind": "AGENT"}, None, "planner.run") == "planner"
    assert agent_name({"openinference.span.kind": "AGENT"}, None, "planner") == "planner"


# --- hints, times, errors -----------------------------------------------------------------------------------------

def test_leases_progress_and_times() -> None:
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll"}
    extractor = Extractor()
    # A deadline given as text is read as a number; an owner that is not text is its text.
    call = extractor.tool_call({**genai, "loopguard.wait.deadline": "1767229200.5", "loopguard.wait.owner": 9}, "x",
                               1, 2)
    assert call.lease == Lease("9", 1_767_229_200.5)
    # An int deadline beyond the float range (10**400) is no lease, not a crash; nor is a list.
    assert extractor.tool_call({**genai, "loopguard.wait.deadline": 10**400}, "x", 1, 2).lease is None
    assert extractor.tool_call({**genai, "loopguard.wait.deadline": [1]}, "x", 1, 2).lease is None
    # A deadline of 0 is a deadline (the epoch), unlike an absent one.
    assert extractor.tool_call({**genai, "loopguard.wait.deadline": 0}, "x", 1, 2).lease == Lease("", 0.0)
    assert extractor.tool_call(genai, "x", 1, 2).lease is None
    # Progress: any value as text, "" included; absent is None.
    assert extractor.tool_call({**genai, "loopguard.progress": ""}, "x", 1, 2).progress == ""
    assert extractor.tool_call({**genai, "loopguard.progress": 0}, "x", 1, 2).progress == "0"
    assert extractor.tool_call(genai, "x", 1, 2).progress is None
    # One nanosecond after the epoch is 1e-9 s; a time of 0 is unknown.
    timed = extractor.tool_call(genai, "x", 1, 3 * 10**9)
    assert timed.start == pytest.approx(1e-9, rel=1e-9) and timed.end == pytest.approx(3.0, rel=1e-12)


def test_error_sources_that_say_no_error() -> None:
    # error.type empty or false (the attribute present) is no error: a span without error status has none; with an
    # error status, the status text. true means failed: on a GenAI span with an error status but no exception
    # event and no message, the text of the result names it.
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    extractor = Extractor()
    assert extractor.tool_call({**genai, "error.type": ""}, "x", 1, 2).error is None
    assert extractor.tool_call({**genai, "error.type": False}, "x", 1, 2).error is None
    assert extractor.tool_call({**genai, "error.type": ""}, "x", 1, 2, True, "down").error == "down"
    assert extractor.tool_call({**genai, "error.type": True, "gen_ai.tool.call.result": "No such file"}, "x", 1, 2,
                               True).error == "No such file"
    assert extractor.tool_call({**genai, "error.type": True, "gen_ai.tool.call.result": "No such file"}, "x", 1, 2,
                               True, "status text").error == "status text"
    # A non-text result does not name it: "error".
    assert extractor.tool_call({**genai, "error.type": True, "gen_ai.tool.call.result": {"a": 1}}, "x", 1,
                               2).error == "error"
    # A status message longer than 200 characters is cut there; an exception event without a type is skipped.
    events = [("exception", {"exception.message": "m"}), ("exception", {"exception.type": "KeyError"})]
    assert extractor.tool_call(genai, "x", 1, 2, True, "s" * 201).error == "s" * 200
    assert extractor.tool_call(genai, "x", 1, 2, True, None, events).error == "KeyError"


def test_errors_read_through_a_path() -> None:
    # LlamaIndex under OpenLLMetry: the error is traceloop.entity.output -> tool_output.is_error (true: failed, the
    # class from the result text raw_output); false is no error. README: conventions table.
    base = {"traceloop.span.kind": "task", "tool.name": "t"}
    extractor = Extractor()
    failed = json.dumps({"tool_output": {"is_error": True, "raw_output": "Boom"}})
    ok = json.dumps({"tool_output": {"is_error": False, "raw_output": "fine"}})
    assert extractor.tool_call({**base, "traceloop.entity.output": failed}, "x", 1, 2).error == "Boom"
    assert extractor.tool_call({**base, "traceloop.entity.output": ok}, "x", 1, 2).error is None
    # 0 (falsy, a success code) is no error through a path as on the inline path (error.type = 0 on a GenAI span).
    zero = json.dumps({"tool_output": {"is_error": 0, "raw_output": "fine"}})
    assert extractor.tool_call({**base, "traceloop.entity.output": zero}, "x", 1, 2).error is None
    assert extractor.tool_call({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "error.type": 0},
                               "x", 1, 2).error is None
    assert extractor.tool_call({**base, "traceloop.entity.output": ok}, "x", 1, 2, True, "st").error == "st"
    # Failed with a status message: the message, before the result's text.
    assert extractor.tool_call({**base, "traceloop.entity.output": failed}, "x", 1, 2, True, "st").error == "st"
    # A user row with an error path: "" is no error (the next source counts), a class is cut at 200 characters.
    user = _acme(error=[{"attribute": "acme.e", "path": ["c"]}, "acme.e2"])
    assert user.tool_call({**ACME, "acme.e": '{"c": ""}', "acme.e2": "Next"}, "t", 1, 2).error == "Next"
    assert user.tool_call({**ACME, "acme.e": '{"c": false}', "acme.e2": "Next"}, "t", 1, 2).error == "Next"
    assert user.tool_call({**ACME, "acme.e": json.dumps({"c": "C" * 300})}, "t", 1, 2).error == "C" * 200
    assert user.tool_call(ACME, "t", 1, 2).error is None
    assert user.tool_call(ACME, "t", 1, 2, True).error == "error"


# --- placeholders --------------------------------------------------------------------------------------------------

def test_placeholders_limited_to_attributes() -> None:
    # redacted_values: "N/A" only in acme.in; "***" anywhere. In acme.in both hide the arguments; in acme.out only
    # "***" hides the result, and "N/A" is a result.
    config = LoopGuardConfig(redacted_values=(RedactedValue("N/A", ("acme.in",)), RedactedValue("***")),
                             conventions={"acme": {"when": {"acme.kind": "tool"}, "arguments": "acme.in",
                                                   "result": "acme.out"}})
    extractor = Extractor.from_config(config)
    assert extractor.tool_call({**ACME, "acme.in": "N/A", "acme.out": "N/A"}, "t", 1, 2).arguments_captured is False
    call = extractor.tool_call({**ACME, "acme.in": "***", "acme.out": "N/A"}, "t", 1, 2)
    assert (call.arguments_captured, call.result_captured, call.result) == (False, True, "N/A")
    assert extractor.tool_call({**ACME, "acme.out": "***"}, "t", 1, 2).result_captured is False
    # An argument object whose every value is one of the placeholders anywhere: not recorded; "N/A" (limited to
    # one attribute) does not count inside objects.
    assert extractor.tool_call({**ACME, "acme.in": '{"a": "***"}'}, "t", 1, 2).arguments_captured is False
    assert extractor.tool_call({**ACME, "acme.in": '{"a": "N/A"}'}, "t", 1, 2).arguments_captured is True
    # The configuration's max_argument_bytes is the extractor's size limit: a 14-character argument object of
    # placeholders over a limit of 10 is not parsed, so it stays a recorded value.
    small = Extractor.from_config(LoopGuardConfig(max_argument_bytes=10, redacted_values=(RedactedValue("***"),),
                                                  conventions=config.conventions))
    assert small.tool_call({**ACME, "acme.in": '{"a": "***"}'}, "t", 1, 2).arguments_captured is True


def test_placeholders_in_mappings_and_objects() -> None:
    # Arguments given as a mapping (SDK attributes): every value a placeholder -> not recorded; an empty mapping or
    # one with a real value is recorded. A list is a value.
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    extractor = Extractor()
    args = "gen_ai.tool.call.arguments"
    assert extractor.tool_call({**genai, args: {"q": "[REDACTED]"}}, "x", 1, 2).arguments_captured is False
    assert extractor.tool_call({**genai, args: {"q": "[REDACTED]", "p": 1}}, "x", 1, 2).arguments_captured is True
    assert extractor.tool_call({**genai, args: {}}, "x", 1, 2).arguments == {}
    assert extractor.tool_call({**genai, args: ["[REDACTED]"]}, "x", 1, 2).arguments == ["[REDACTED]"]
    # Text that is an object of placeholders, and text that only holds one: "{}" (empty) and an object with a
    # number are recorded; an object that is no JSON is recorded as its text; a JSON list of placeholders too.
    for text, recorded in [('{"q": "[REDACTED]"}', False), ("{}", True), ('{"q": 1, "r": "[REDACTED]"}', True),
                           ('{"q": "[REDACTED]"', True), ('["[REDACTED]"]', True), ('{"q": ["[REDACTED]"]}', True)]:
        assert extractor.tool_call({**genai, args: text}, "x", 1, 2).arguments_captured is recorded, text
    # With no placeholders configured nothing is one.
    none = Extractor(redacted_values=())
    assert none.tool_call({**genai, args: '{"q": "[REDACTED]"}'}, "x", 1, 2).arguments_captured is True
    assert none.tool_call({**genai, args: "[REDACTED]"}, "x", 1, 2).arguments_captured is True


# --- model spans ----------------------------------------------------------------------------------------------------

def test_model_turn_fields() -> None:
    # A GenAI chat span: its ids and times as given, the response id as text, the usage (5 in, 1 out), the tool
    # call its output asks for, the result its input holds, the earlier call its input repeats, its agent and its
    # conversation.
    output = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c2", "name": "read", "arguments": {}}]}]
    inputs = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "find", "arguments": "x"}]},
              {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "hits"}]}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 1,
             "gen_ai.response.id": 42, "gen_ai.agent.name": "planner", "gen_ai.conversation.id": "conv",
             "gen_ai.output.messages": json.dumps(output), "gen_ai.input.messages": json.dumps(inputs)}
    turn = Extractor().model_turn(attrs, "chat m", 7, 3, 10, 20)
    assert turn is not None
    assert (turn.span_id, turn.parent_span_id, turn.start_ns, turn.end_ns, turn.response_id) == (7, 3, 10, 20, "42")
    assert turn.usage is not None and (turn.usage[0], turn.usage[1].input_tokens) == (None, 5)
    assert (turn.calls, turn.results, turn.history) == ((("c2", "read", {}),), (("c1", "hits"),),
                                                        (("c1", "find", "x"),))
    assert (turn.agent, turn.conversation) == ("planner", "conv")
    # Without context: no agent, no conversation; without messages: no calls, no results, no history.
    bare = Extractor().model_turn(attrs, "chat m", 7, None, 10, 20, messages=False, context=False)
    assert bare is not None
    assert (bare.calls, bare.results, bare.history, bare.agent, bare.conversation) == ((), None, (), None, None)
    assert bare.usage == turn.usage and bare.parent_span_id is None
    # No response id (or an empty one): None.
    assert Extractor().model_turn({"gen_ai.operation.name": "chat", "gen_ai.response.id": ""}, "m", 1, None, 0,
                                  1).response_id is None  # type: ignore[union-attr]


def test_model_turn_of_a_convention_without_message_readers() -> None:
    # The AI SDK's model span (ai.generateText.doGenerate) has usage but no message readers: no calls, and its
    # results are None (no input recorded), even with GenAI messages present.
    output = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "t", "arguments": {}}]}]
    attrs = {"ai.operationId": "ai.generateText.doGenerate", "gen_ai.usage.input_tokens": 3,
             "gen_ai.output.messages": json.dumps(output)}
    turn = Extractor().model_turn(attrs, "ai.generateText.doGenerate", 1, None, 0, 1)
    assert turn is not None and (turn.calls, turn.results) == ((), None)
    assert turn.usage is not None and turn.usage[1].input_tokens == 3
    # Not a model span: no turn (a tool span, an agent span).
    assert Extractor().model_turn({"gen_ai.operation.name": "invoke_agent"}, "x", 1, None, 0, 1) is None


# --- defaults and the span name as a source -----------------------------------------------------------------------

def test_the_span_name_defaults_to_empty() -> None:
    # Called without a span name, a span has the name "": an OpenInference AGENT span's last agent-name source (the
    # span name before ".run") gives no name, and a user row recognised by a name prefix does not hold.
    oi_agent = {"openinference.span.kind": "AGENT"}
    assert agent_name(oi_agent) is None
    assert Extractor().agent_name(oi_agent) is None
    by_name = _user(acme={"when": {"acme.kind": "tool"}, "span_name_prefix": "X"})
    assert by_name.span_role({"acme.kind": "tool"}) is None
    assert by_name.convention({"acme.kind": "tool"}) is None
    assert by_name.span_role({"acme.kind": "tool"}, "X1") == ROLE_TOOL
    convention = by_name.convention({"acme.kind": "tool"}, "X1")
    assert convention is not None and convention.name == "acme"
    # A span that is no tool span has no convention.
    assert Extractor().convention({}, "lookup") is None


def test_a_tool_row_names_its_agent_as_text() -> None:
    # An OpenInference TOOL span's agent is agent.name; a number there is read as its text.
    assert agent_name({"openinference.span.kind": "TOOL", "agent.name": 5}) == "5"
    assert Extractor().agent_name({"openinference.span.kind": "TOOL", "agent.name": 5}) == "5"


def test_every_part_can_come_from_the_span_name() -> None:
    # A user row may read any part from the span name ({ span_name = true }): here the arguments ("GET /users/1"
    # after "call "), the result and the error class (after "failed " when the span name says so: a span name
    # that does not start so is read whole, as the README's strip_prefix says "removed when present").
    extractor = _acme(arguments={"span_name": True, "strip_prefix": "call "}, result={"span_name": True},
                      error={"span_name": True, "strip_prefix": "call "})
    call = extractor.tool_call(ACME, "call GET /users/1", 1, 2)
    assert (call.arguments, call.result, call.error) == ("GET /users/1", "call GET /users/1", "GET /users/1")
    # The span name is passed on too: a bare GenAI tool span is named by it.
    read = _read_tool(Extractor(), {}, "execute_tool lookup", 1, 2)
    assert read is not None and read.tool == "lookup"


def test_call_of_defaults_to_no_error() -> None:
    # call_of with the row, attributes, name and times only: the call did not fail.
    extractor = Extractor()
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    _, row = extractor.read_role(attrs, "x")
    assert extractor.call_of(row, attrs, "x", 1, 2).error is None


def test_a_placeholder_object_inside_a_result_envelope_is_not_recorded() -> None:
    # Inside an envelope, the same rule as outside: OpenLLMetry's ToolMessage content '{"a": "[REDACTED]"}' (an
    # object of placeholders) and content "[REDACTED]" are not recorded; '{"a": "[REDACTED]", "b": 1}' is a result.
    base = {"traceloop.span.kind": "tool", "traceloop.entity.name": "t"}
    for inner, recorded in (('{"a": "[REDACTED]"}', False), ("[REDACTED]", False),
                            ('{"a": "[REDACTED]", "b": 1}', True)):
        call = Extractor().tool_call({**base, "traceloop.entity.output": json.dumps(
            {"content": inner, "tool_call_id": "c"})}, "x", 1, 2)
        assert (call.result_captured, call.result) == ((True, inner) if recorded else (False, None))


def test_texts_that_are_no_envelope_read_again() -> None:
    # One extractor reads the same texts twice (a loop repeats them); each read gives what the first gave. The
    # texts are built anew for each read, as each span brings its own.
    extractor = Extractor()
    for _ in range(2):
        # OpenLLMetry: {"inputs": [1, 2]} alone is no LangChain envelope: the arguments stay the same text.
        text = json.dumps({"inputs": [1, 2]})
        call = extractor.tool_call({"traceloop.span.kind": "tool", "gen_ai.tool.name": "t",
                                    "gen_ai.tool.call.arguments": text}, "x", 1, 2)
        assert (call.arguments_captured, call.arguments) == (True, text)
        # OpenInference: the JSON string "kwargs" mentions kwargs (so the ToolMessage envelope is tried first) and
        # is no ToolMessage; the next envelope, a JSON string, gives the text kwargs.
        quoted = json.dumps("kwargs")
        result = extractor.tool_call({"openinference.span.kind": "TOOL", "tool.name": "t",
                                      "output.value": quoted}, "x", 1, 2).result
        assert result == "kwargs"


def test_an_object_of_placeholders_exactly_at_the_size_limit_is_parsed() -> None:
    # '{"a": "***"}' is 12 characters: with max_argument_bytes = 12 it is parsed (an object of placeholders: not
    # recorded); with 11 it is not (a recorded text).
    text = '{"a": "***"}'
    assert len(text) == 12
    conventions = {"acme": {"when": {"acme.kind": "tool"}, "arguments": "acme.in"}}
    for limit, recorded in ((12, False), (11, True)):
        extractor = Extractor.from_config(LoopGuardConfig(max_argument_bytes=limit, conventions=conventions,
                                                          redacted_values=(RedactedValue("***"),)))
        assert extractor.tool_call({**ACME, "acme.in": text}, "t", 1, 2).arguments_captured is recorded, limit


def test_errors_read_through_a_path_with_events_and_structured_results() -> None:
    # LlamaIndex under OpenLLMetry (error read through a path): a span with an error status and is_error false has
    # the exception event's type as its class (error_class's order), and is_error true with a result that is not
    # text (raw_output [1, 2]) has the class "error".
    base = {"traceloop.span.kind": "task", "tool.name": "t"}
    ok = json.dumps({"tool_output": {"is_error": False, "raw_output": "fine"}})
    events = [("exception", {"exception.type": "KeyError"})]
    assert Extractor().tool_call({**base, "traceloop.entity.output": ok}, "x", 1, 2, True, "st",
                                 events).error == "KeyError"
    listed = json.dumps({"tool_output": {"is_error": True, "raw_output": [1, 2]}})
    assert Extractor().tool_call({**base, "traceloop.entity.output": listed}, "x", 1, 2).error == "error"
    # is_error true, no error status, an exception event: its type (read through the path as inline).
    assert Extractor().tool_call({**base, "traceloop.entity.output": listed}, "x", 1, 2,
                                 events=events).error == "KeyError"
