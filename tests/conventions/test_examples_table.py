"""The conventions table's source builders and how the README writes a source, fixed examples with the expected
values written out by hand from the docstrings (the table itself is built when the module is imported, so these
call the builders directly)."""

from __future__ import annotations

from otel_loopguard.conventions.table import Source, attr, event, span_name


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
