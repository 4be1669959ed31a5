"""Unread input, fixed examples of the classification and of the one-line messages.

Through the public names of :mod:`otel_loopguard.conventions.unread`. Each expected value is worked out by hand from
the module's rules (the comment says which), never taken from the code's output.
"""

from __future__ import annotations

import os

from otel_loopguard.conventions.table import Convention, attr
from otel_loopguard.conventions.unread import (
    KNOWN_KEYS,
    MAX_KEYS,
    NO_TOOL_CALLS,
    UNKNOWN_ATTRIBUTES,
    Unread,
    UnreadTrace,
    message,
    unknown_content_keys,
)


def _pid() -> int:
    # The model spans' key tuples are cached for the whole process, and mutmut runs every test once before it forks
    # one process per mutant: keys spelt with the id of the process running the test (read when it runs, not when
    # the module is imported) are new in each process, so the uncached path is taken.
    return os.getpid()


def test_limits() -> None:
    # A note names at most 12 keys (the rest are counted).
    assert MAX_KEYS == 12


def test_content_like_keys_by_their_last_word() -> None:
    # The last word after the last dot, lowercased, "-" read as "_", after the last "_": tool_input -> input,
    # Tool-Output -> output, RESULT -> result, payload -> payload are content; request_id -> id, input_text -> text,
    # count are not.
    attrs = {"acme.tool_input": 1, "myfw.Tool-Output": 1, "x.RESULT": 1, "payload": 1,
             "acme.request_id": 1, "acme.input_text": 1, "acme.count": 1}
    assert unknown_content_keys(attrs) == ("acme.tool_input", "myfw.Tool-Output", "payload", "x.RESULT")
    # Only the last word counts: raw_tool_output -> output (content), output_tool_id -> id (not content).
    assert unknown_content_keys({"acme.raw_tool_output": 1, "acme.output_tool_id": 1}) == ("acme.raw_tool_output",)


def test_known_keys_and_event_keys() -> None:
    # Keys a convention reads are never unknown: the GenAI arguments attribute, and strands' event attributes
    # (event gen_ai.tool.message, attribute content), written event/key; an unknown event's content attribute is
    # named event/key; the exception event is skipped even when an event after it has unknown content.
    attrs = {"gen_ai.tool.call.arguments": "x", "acme.body": "b"}
    events = [("exception", {"exception.payload": "p"}), ("gen_ai.tool.message", {"content": "c"}),
              ("acme.done", {"output": "o", "count": 1})]
    assert unknown_content_keys(attrs, events) == ("acme.body", "acme.done/output")
    # A caller's own set of known keys replaces the default one.
    assert unknown_content_keys({"acme.body": "b"}, (), frozenset({"acme.body"})) == ()
    assert unknown_content_keys({"gen_ai.tool.call.arguments": "x"}, (), frozenset()) == (
        "gen_ai.tool.call.arguments",)


def test_the_known_keys_builder() -> None:
    # KNOWN_KEYS is built while the module is imported (before mutmut switches a mutant on), so the builder is called
    # here again. It holds every attribute a tool row reads (the GenAI arguments; the Vercel AI SDK's tool name;
    # strands' event attributes as event/key), the agent spans' name attributes (Mastra's agent.id, OpenInference's
    # graph.node.id), and the content-like keys known not to be content (tool.parameters, gen_ai.tool.definitions,
    # mastra.metadata.body); never an empty key (the span-name sources have no attribute).
    from otel_loopguard.conventions.unread import _known_keys

    keys = _known_keys()
    for key in ("gen_ai.tool.call.arguments", "ai.toolCall.name", "gen_ai.tool.message/content",
                "gen_ai.choice/message", "agent.id", "graph.node.id", "tool.parameters", "gen_ai.tool.definitions",
                "mastra.metadata.body", "gen_ai.input.messages"):
        assert key in keys, key
    assert "" not in keys
    assert "content" not in keys  # an event's attribute is known only under its event's name
    assert keys == KNOWN_KEYS


def test_messages() -> None:
    # The documentation's words for each cause, with the spans counted, the keys joined by ", " ("none" without
    # keys) and the documentation page named.
    readme = "the documentation page 'Conventions read' (docs/conventions.md)"
    assert message(Unread(NO_TOOL_CALLS, ("gen_ai.operation.name", "gen_ai.usage.input_tokens"), 2)) == (
        "2 GenAI span(s) but no tool call could be read: no tool span of a known convention, and no tool call in the "
        "model spans' messages (content not captured, or sent to log records: set "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY); model span attributes seen: "
        f"gen_ai.operation.name, gen_ai.usage.input_tokens; see {readme}")
    assert message(Unread(UNKNOWN_ATTRIBUTES, ("acme.body",), 3)) == (
        "3 tool span(s) whose arguments or result are in attributes no convention reads: acme.body; describe them "
        f"in a [conventions.NAME] table, see {readme}")
    assert message(Unread(UNKNOWN_ATTRIBUTES, (), 1)).startswith(
        "1 tool span(s) whose arguments or result are in attributes no convention reads: none;")
    unread = Unread(UNKNOWN_ATTRIBUTES, ("a.body", "b.body"), 4)
    assert unread.as_dict() == {"reason": "unknown_attributes", "keys": ["a.body", "b.body"], "spans": 4,
                                "message": message(unread)}


def test_a_tool_span_missing_either_part_is_looked_at() -> None:
    # Arguments found but no result, or the other way round: the unknown content-like key is a cause; one span each.
    for arguments_captured, result_captured in ((True, False), (False, True)):
        trace = UnreadTrace()
        trace.tool({"acme.body": "b"}, arguments_captured, result_captured)
        assert trace.causes() == [Unread(UNKNOWN_ATTRIBUTES, ("acme.body",), 1)]
        assert trace.tool_calls == 1
    # Two such spans: counted twice, their keys together, sorted.
    trace = UnreadTrace()
    trace.tool({"z.body": "b"}, False, False)
    trace.tool({"a.body": "b"}, False, False, [("acme.evt", {"output": "o"})])
    trace.tool({"gen_ai.request.model": "m"}, False, False)  # nothing content-like: not counted
    assert trace.causes() == [Unread(UNKNOWN_ATTRIBUTES, ("a.body", "acme.evt/output", "z.body"), 2)]
    assert trace.tool_calls == 3


def test_a_user_conventions_own_attributes_are_known() -> None:
    # A [conventions.NAME] row reads acme.args and acme.result: on its span they are not unknown, acme.body is.
    user = Convention(name="acme", title="Acme", when=(), arguments=(attr("acme.args"),),
                      result=(attr("acme.result"),))
    trace = UnreadTrace()
    trace.tool({"acme.args": "a", "acme.result": "r", "acme.body": "b"}, False, False, convention=user)
    assert trace.causes() == [Unread(UNKNOWN_ATTRIBUTES, ("acme.body",), 1)]


def test_unknown_keys_are_kept_up_to_four_notes_worth() -> None:
    # Keys are gathered while fewer than 4 * 12 = 48 are held: a span bringing 48 keys is taken whole, a later
    # span's key is not (so "aaa.body", which would sort first, is not named); a note names the first 12, sorted.
    many = {f"acme.k{i:02d}_body": 1 for i in range(48)}
    trace = UnreadTrace()
    trace.tool(many, False, False)
    trace.tool({"aaa.body": 1}, False, False)
    [cause] = trace.causes()
    assert cause.keys == tuple(f"acme.k{i:02d}_body" for i in range(12))
    assert cause.spans == 2
    # With 47 held, the next span's key is still taken.
    trace = UnreadTrace()
    trace.tool({f"acme.k{i:02d}_body": 1 for i in range(47)}, False, False)
    trace.tool({"aaa.body": 1}, False, False)
    assert trace.causes()[0].keys[0] == "aaa.body"


def test_model_spans_without_tool_calls() -> None:
    pid = _pid()
    # Only gen_ai.*, llm.* and ai.* keys are named; two spans of one instrumentation (the same keys) add nothing
    # new; a span with other keys adds its own.
    trace = UnreadTrace()
    first = {f"gen_ai.p{pid}": 1, f"llm.p{pid}": 1, f"ai.p{pid}": 1, "http.method": "POST", f"xgen_ai.p{pid}": 1}
    trace.model(first)
    trace.model(dict(first))
    trace.model({f"gen_ai.q{pid}": 1})
    assert trace.causes() == [Unread(NO_TOOL_CALLS, (f"ai.p{pid}", f"gen_ai.p{pid}", f"gen_ai.q{pid}",
                                                     f"llm.p{pid}"), 3)]
    # A tool call read from a model span's messages: nothing is unread.
    trace.derived(1)
    assert trace.tool_calls == 1
    assert trace.causes() == []


def test_model_keys_are_kept_up_to_four_notes_worth() -> None:
    pid = _pid()
    trace = UnreadTrace()
    trace.model({f"gen_ai.k{i:02d}.p{pid}": 1 for i in range(48)})
    trace.model({f"gen_ai.aaa.p{pid}": 1})
    assert trace.causes()[0].keys[0] == f"gen_ai.k00.p{pid}"
    trace = UnreadTrace()
    trace.model({f"gen_ai.k{i:02d}.p{pid}x": 1 for i in range(47)})
    trace.model({f"gen_ai.aaa.p{pid}x": 1})
    assert trace.causes()[0].keys[0] == f"gen_ai.aaa.p{pid}x"


def test_derived_calls_counted_again() -> None:
    # Two tool spans read: 2.
    trace = UnreadTrace()
    trace.tool_read()
    trace.tool_read()
    assert trace.tool_calls == 2
    # Derived twice (2, then 3 more): 5 derived; derived again as 5 in all: unchanged; as 0: none left.
    trace = UnreadTrace()
    trace.derived(2)
    trace.derived(3)
    trace.set_derived(5)
    assert trace.tool_calls == 5
    trace.set_derived(0)
    assert trace.tool_calls == 0
    # One tool span read, 2 calls derived: 3. Derived again as 5: 1 + 5 = 6; as 0: 1.
    trace = UnreadTrace()
    trace.tool_read()
    trace.derived(2)
    assert trace.tool_calls == 3
    trace.set_derived(5)
    assert trace.tool_calls == 6
    trace.set_derived(0)
    assert trace.tool_calls == 1
    # Only derived calls, derived again as none: a model span's trace has no tool call, so it is a cause.
    trace = UnreadTrace()
    trace.model({"gen_ai.operation.name": "chat"})
    trace.derived(2)
    trace.set_derived(0)
    assert [c.reason for c in trace.causes()] == [NO_TOOL_CALLS]


def test_merging_the_batches_of_one_trace() -> None:
    pid = _pid()
    # Everything noted by the other batch is added: its tool calls, derived calls (so a later set_derived counts
    # them once), model spans and their keys, unknown spans and their keys.
    a, b = UnreadTrace(), UnreadTrace()
    a.tool({"a.body": 1}, False, False)
    a.derived(1)
    b.tool({"b.body": 1}, False, True)
    b.derived(2)
    b.model({f"gen_ai.m{pid}": 1})
    a.merge(b)
    # 1 tool span + 1 derived, and 1 tool span + 2 derived: 5 calls, 3 of them derived.
    assert a.tool_calls == 5
    a.set_derived(3)
    assert a.tool_calls == 5
    assert a.causes() == [Unread(UNKNOWN_ATTRIBUTES, ("a.body", "b.body"), 2)]
    # Model keys: with no tool call at all, the merged model span and its key are the cause.
    c, d = UnreadTrace(), UnreadTrace()
    c.model({f"gen_ai.c{pid}": 1})
    d.model({f"gen_ai.d{pid}": 1})
    c.merge(d)
    assert c.causes() == [Unread(NO_TOOL_CALLS, (f"gen_ai.c{pid}", f"gen_ai.d{pid}"), 2)]


def test_merging_keeps_to_four_notes_worth_of_keys() -> None:
    pid = _pid()
    a, b = UnreadTrace(), UnreadTrace()
    a.model({f"gen_ai.k{i:02d}.m{pid}": 1 for i in range(48)})
    a.tool({f"acme.k{i:02d}_body": 1 for i in range(48)}, False, False)
    b.model({f"gen_ai.aaa.m{pid}": 1})
    b.tool({"aaa.body": 1}, False, False)
    a.merge(b)
    a.set_derived(0)
    # a has tool calls (two tool spans), so only the unknown-attributes cause; its keys did not take b's.
    [cause] = a.causes()
    assert cause.keys[0] == "acme.k00_body" and cause.spans == 2
    # The model keys alone, on a trace without tool calls.
    c, d = UnreadTrace(), UnreadTrace()
    c.model({f"gen_ai.k{i:02d}.n{pid}": 1 for i in range(48)})
    d.model({f"gen_ai.aaa.n{pid}": 1})
    c.merge(d)
    assert c.causes()[0].keys[0] == f"gen_ai.k00.n{pid}"
    # With 47 held, merging still takes the other's keys.
    e, f = UnreadTrace(), UnreadTrace()
    e.model({f"gen_ai.k{i:02d}.o{pid}": 1 for i in range(47)})
    e.tool({f"acme.k{i:02d}_body": 1 for i in range(47)}, False, False)
    f.model({f"gen_ai.aaa.o{pid}": 1})
    f.tool({"aaa.body": 1}, False, False)
    e.merge(f)
    assert e.causes()[0].keys[0] == "aaa.body"
    g, h = UnreadTrace(), UnreadTrace()
    g.model({f"gen_ai.k{i:02d}.r{pid}": 1 for i in range(47)})
    h.model({f"gen_ai.aaa.r{pid}": 1})
    g.merge(h)
    assert g.causes()[0].keys[0] == f"gen_ai.aaa.r{pid}"
