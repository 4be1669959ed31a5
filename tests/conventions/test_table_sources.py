"""The conventions table's source builders and how the README writes a source, fixed examples with the expected
values written out by hand from the docstrings (the table itself is built when the module is imported, so these
call the builders directly)."""

from __future__ import annotations

from otel_loopguard.conventions.table import TOOL_CONVENTIONS, Source, When, attr, event, span_name


def test_the_builders_make_the_sources_they_name() -> None:
    assert attr("gen_ai.tool.name") == Source(attribute="gen_ai.tool.name")
    assert attr("output.value", "kwargs", "tool_call_id") == Source(attribute="output.value",
                                                                    path=("kwargs", "tool_call_id"))
    assert attr("x", "messages", 0) == Source(attribute="x", path=("messages", 0))
    assert event("gen_ai.tool.message", "content") == Source(attribute="content", event="gen_ai.tool.message")
    assert span_name() == Source(from_span_name=True)
    assert span_name("execute_tool ") == Source(from_span_name=True, strip_prefix="execute_tool ")
    assert span_name("", ".tool") == Source(from_span_name=True, strip_suffix=".tool")


def test_sources_as_the_readme_writes_them() -> None:
    # An attribute in backticks; an event's attribute after the event's name; a path after an arrow, joined by
    # dots; the span name with what is stripped before and after it.
    assert attr("gen_ai.tool.name").describe() == "`gen_ai.tool.name`"
    assert event("gen_ai.tool.message", "content").describe() == "event `gen_ai.tool.message` `content`"
    assert attr("output.value", "kwargs", "name").describe() == "`output.value` → kwargs.name"
    assert attr("x", "messages", 0).describe() == "`x` → messages.0"
    assert span_name().describe() == "span name"
    assert span_name("execute_tool ").describe() == "span name after `execute_tool `"
    assert span_name("", ".tool").describe() == "span name before `.tool`"
    assert span_name("run ", ".tool").describe() == "span name after `run ` before `.tool`"


def test_the_condition_builders_make_the_conditions_they_name() -> None:
    # The rows' conditions are built by the private _is/_has while the module is imported (before mutmut switches a
    # mutant on), so they are called here directly: _is(attribute, values...) = that attribute holding one of those
    # values, in the order given; _has(attribute) = that attribute present with any value (no values listed).
    from otel_loopguard.conventions.table import _has, _is

    assert _is("ai.operationId", "ai.toolCall") == When(attribute="ai.operationId", equals=("ai.toolCall",))
    assert _is("llm.request.type", "chat", "completion") == When(attribute="llm.request.type",
                                                                 equals=("chat", "completion"))
    assert _is("x") == When(attribute="x", equals=())
    assert _has("adk.tool_call_args") == When(attribute="adk.tool_call_args")
    assert _has("adk.tool_call_args").equals == ()


def test_rows_hold_the_conditions_the_readme_gives() -> None:
    # The same conditions read in the built table: the Vercel AI SDK row is recognised by ai.operationId =
    # ai.toolCall; the OpenLLMetry LangChain.js row needs gen_ai.operation.name = execute_tool and
    # traceloop.span.kind = task (two conditions, both must hold).
    rows = {c.name: c for c in TOOL_CONVENTIONS}
    assert rows["vercel_ai"].when == (When("ai.operationId", ("ai.toolCall",)),)
    assert rows["langchain_js_openllmetry"].when == (When("gen_ai.operation.name", ("execute_tool",)),
                                                     When("traceloop.span.kind", ("task",)))
