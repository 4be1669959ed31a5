"""User-defined conventions (``[conventions.NAME]`` in the TOML configuration): an in-house framework, no code.

The in-house traces are real recorded runs (pydantic-ai fixtures) whose tool spans are rewritten into a made-up
framework's attributes, with the result moved into a span event: what a team's own tracing could look like.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import LoopGuardConfig, cli
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.conventions.user import user_conventions
from otel_loopguard.errors import ConfigError
from tests.processor.conftest import HarnessFactory
from tests.support.recorded_fixtures import FIXTURES
from tests.support.scenario_expectations import expected
from tests.support.span_replay import replay_spans

ACME = """
[conventions.acme]
when = { "acme.kind" = "tool-call" }
tool_name = "acme.tool"
arguments = { attribute = "acme.request", path = ["params"] }
result = [{ event = "acme.done", attribute = "output" }]
error = "acme.failure"
agent_name = "acme.agent"
"""


def _s(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def _in_house(doc: dict[str, Any]) -> dict[str, Any]:
    """The recorded trace with its GenAI tool spans rewritten into the 'acme' framework's shape."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
                if attrs.get("gen_ai.operation.name") != _s("execute_tool"):
                    # The in-house model client records no messages (else the calls would be read from them).
                    span["attributes"] = [a for a in span.get("attributes", []) if not a["key"].endswith(".messages")]
                    continue
                args = json.loads(attrs["gen_ai.tool.call.arguments"]["stringValue"])
                new = [{"key": "acme.kind", "value": _s("tool-call")},
                       {"key": "acme.tool", "value": attrs["gen_ai.tool.name"]},
                       {"key": "acme.request", "value": _s(json.dumps({"id": span["spanId"], "params": args}))},
                       {"key": "acme.agent", "value": _s("billing-bot")}]
                span["attributes"] = new
                span["name"] = f"acme.call {attrs['gen_ai.tool.name']['stringValue']}"
                result = attrs.get("gen_ai.tool.call.result")
                if result is not None:
                    span["events"] = [{"name": "acme.done", "timeUnixNano": span["endTimeUnixNano"],
                                       "attributes": [{"key": "output", "value": result}]}]
    return doc


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    capsys.readouterr()
    status = cli.main(["audit", "--json", *argv])
    out = capsys.readouterr()
    return status, [json.loads(line) for line in out.out.splitlines() if line.strip()], out.err


@pytest.mark.parametrize("scenario", ["same_call_loop", "ping_pong", "pagination", "healthy"])
def test_an_in_house_framework_is_read_through_its_convention(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With [conventions.acme] the rewritten runs get the scenario's verdicts; without it, no call is read."""
    doc = _in_house(json.loads((FIXTURES / f"pydantic_ai__{scenario}.json").read_text()))
    trace = _write(tmp_path, "acme.json", json.dumps(doc))
    config = _write(tmp_path, "loopguard.toml", ACME)

    _, [report], err = _audit(capsys, "--config", str(config), str(trace))
    assert err == ""
    expected("pydantic_ai", scenario).check(report)

    _, [bare], _ = _audit(capsys, str(trace))
    assert bare["steps_used"] == 0
    assert [u["reason"] for u in bare["unread"]] == ["no_tool_calls"]


def test_the_convention_reads_each_part_where_it_says(tmp_path: Path) -> None:
    """Tool name, arguments inside JSON text (a per-call id beside them is left out), result from a span event."""
    config = LoopGuardConfig.load(_write(tmp_path, "c.toml", ACME))
    extractor = Extractor.from_config(config)
    attrs = {"acme.kind": "tool-call", "acme.tool": "search", "acme.agent": "billing-bot",
             "acme.request": '{"id": "f00d", "params": {"q": "x"}}'}
    events = [("acme.done", {"output": "3 hits"})]
    assert extractor.span_role(attrs, "anything") == "tool"
    call = extractor.tool_call(attrs, "anything", 1_000_000_000, 2_000_000_000, events=events)
    assert (call.tool, call.arguments, call.result, call.error) == ("search", {"q": "x"}, "3 hits", None)
    assert extractor.agent_name(attrs, name="anything") == "billing-bot"
    failed = extractor.tool_call({**attrs, "acme.failure": "Timeout"}, "anything", 1, 2)
    assert (failed.error, failed.result_captured) == ("Timeout", False)
    # A span of another kind is not a tool call, and the built-in conventions still apply.
    assert extractor.span_role({"acme.kind": "llm"}, "x") is None
    assert extractor.span_role({"gen_ai.operation.name": "execute_tool"}, "execute_tool t") == "tool"
    assert "acme.kind" in extractor.marker_keys


def test_a_user_convention_comes_before_the_built_in_ones() -> None:
    """A team may re-read a span the built-in table knows (here: arguments kept under another attribute)."""
    [convention] = user_conventions({"mine": {"when": {"gen_ai.operation.name": "execute_tool",
                                                       "my.framework": True},
                                              "arguments": "my.args"}})
    extractor = Extractor(conventions=[convention])
    attrs = {"gen_ai.operation.name": "execute_tool", "my.framework": "1", "my.args": '{"a": 1}',
             "gen_ai.tool.call.arguments": "ignored"}
    call = extractor.tool_call(attrs, "execute_tool t", 1, 2)
    # The tool name defaults to the span name: the row names no tool attribute.
    assert (call.tool, call.arguments) == ("execute_tool t", '{"a": 1}')
    assert extractor.convention(attrs, "execute_tool t") is convention


@pytest.mark.parametrize(("table", "message"), [
    ({"arguments": "x"}, "[conventions.bad]: needs when"),
    ({"when": {"k": "v"}, "argument": "x"}, "[conventions.bad]: unknown key(s) argument"),
    ({"when": {"k": 3}}, "[conventions.bad] when.k: expected a string, a list of strings or true, got 3"),
    ({"when": "k=v"}, "[conventions.bad] when: expected a table"),
    ({"when": {"k": "v"}, "arguments": 5}, "[conventions.bad] arguments: a source is an attribute name or a table"),
    ({"when": {"k": "v"}, "result": {"event": "e"}}, "[conventions.bad] result: a source table needs attribute"),
    ({"when": {"k": "v"}, "result": {"attribute": "a", "colour": "red"}},
     "[conventions.bad] result: unknown source key(s) colour"),
    ({"when": {"k": "v"}, "unwrap_result": ["zip"]}, "[conventions.bad] unwrap_result: unknown envelope 'zip'"),
    ({"when": {"k": "v"}, "tool_name": []}, "[conventions.bad] tool_name: expected at least one source"),
    ({"span_name_prefix": ""}, "[conventions.bad] span_name_prefix: expected a non-empty string"),
    # The reader never looks into events or JSON text for an agent name: such a source would be ignored silently.
    ({"when": {"k": "v"}, "agent_name": {"event": "e", "attribute": "a"}},
     "[conventions.bad] agent_name: an attribute name or {span_name = true} only "
     "(an event or a path is not read for agent names)"),
    ({"when": {"k": "v"}, "agent_name": ["a", {"attribute": "a", "path": ["x"]}]},
     "[conventions.bad] agent_name: an attribute name or {span_name = true} only "
     "(an event or a path is not read for agent names)"),
])
def test_invalid_tables_name_the_table_and_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        user_conventions({"bad": table})
    assert message in str(info.value)


def test_an_invalid_convention_is_a_one_line_error_of_every_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_harness: HarnessFactory
) -> None:
    """audit exits 2 with one line naming the file, table and key; the processor refuses the configuration."""
    config = _write(tmp_path, "bad.toml", '[conventions.acme]\nwhen = { "acme.kind" = "tool" }\nresult = 7\n')
    status, reports, err = _audit(capsys, "--config", str(config), str(FIXTURES / "pydantic_ai__healthy.json"))
    assert status == 2 and reports == []
    assert err.count("\n") == 1 and "[conventions.acme] result" in err, err
    with pytest.raises(ConfigError, match=r"\[conventions\.acme\] result"):
        make_harness(LoopGuardConfig.load(config))


def test_config_keeps_conventions_as_plain_tables(tmp_path: Path) -> None:
    """The configuration holds the tables as read (validated by the conventions layer); a non-table is refused."""
    config = LoopGuardConfig.load(_write(tmp_path, "c.toml", ACME))
    assert config.conventions["acme"]["tool_name"] == "acme.tool"
    with pytest.raises(ConfigError, match="conventions must be"):
        LoopGuardConfig.load(_write(tmp_path, "d.toml", 'conventions = "acme"\n'))
    with pytest.raises(ConfigError, match="conventions must be"):
        LoopGuardConfig(conventions={"acme": "tool"})  # type: ignore[dict-item]


def test_the_processor_reads_an_in_house_framework_live(tmp_path: Path, make_harness: HarnessFactory) -> None:
    """Replayed through a real TracerProvider, the rewritten loop is stuck with a nudge and a stop."""
    from otel_loopguard.otlp.read import read_spans

    doc = _in_house(json.loads((FIXTURES / "pydantic_ai__same_call_loop.json").read_text()))
    trace = _write(tmp_path, "acme.json", json.dumps(doc))
    harness = make_harness(LoopGuardConfig.load(_write(tmp_path, "c.toml", ACME)))
    replay_spans(harness.provider, list(read_spans(str(trace))), ids=harness.ids)
    actions = [(e.intervention.step, e.intervention.action) for e in harness.events if e.intervention]
    assert actions == [(2, "nudge"), (3, "stop")]
    # The enclosing agent span names the agent (the in-house attribute is the fallback without one).
    assert {e.agent for e in harness.events} == {"research_agent"}


# Recognised by its span name alone: no attribute of the convention marks its spans, so the cheap pre-filter
# (attribute markers) must let spans named "acme.call ..." through as well.
ACME_BY_NAME = """
[conventions.acme]
span_name_prefix = "acme.call "
tool_name = { span_name = true, strip_prefix = "acme.call " }
arguments = { attribute = "acme.request", path = ["params"] }
result = [{ event = "acme.done", attribute = "output" }]
"""


def test_a_convention_known_by_span_name_only_is_read_by_audit_and_the_processor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_harness: HarnessFactory
) -> None:
    """Until the pre-filter knew span-name prefixes, such spans were classified as tools but never read: 0 calls."""
    from otel_loopguard.otlp.read import read_spans

    doc = _in_house(json.loads((FIXTURES / "pydantic_ai__same_call_loop.json").read_text()))
    trace = _write(tmp_path, "acme.json", json.dumps(doc))
    config = _write(tmp_path, "loopguard.toml", ACME_BY_NAME)

    _, [report], err = _audit(capsys, "--config", str(config), str(trace))
    assert err == ""
    expected("pydantic_ai", "same_call_loop").check(report)

    harness = make_harness(LoopGuardConfig.load(config))
    replay_spans(harness.provider, list(read_spans(str(trace))), ids=harness.ids)
    # The same loop as through the attribute-marked convention above: nudged at the third call, stopped at the fourth.
    actions = [(e.intervention.step, e.intervention.action) for e in harness.events if e.intervention]
    assert actions == [(2, "nudge"), (3, "stop")]


ACME_NO_TOOL_NAME = """
[conventions.acme]
when = { "acme.span.type" = "tool" }
arguments = "acme.in"
"""


def test_without_tool_name_the_span_name_names_the_tool_even_beside_an_empty_attribute_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A convention with no tool_name reads the tool from the span name, never from an attribute whose key is ""
    (which OTLP/JSON, unlike the SDK, keeps): four spans "search" with the same arguments and "" set to tool0..tool3
    are one tool called four times, uncertain (no result) from the third call."""
    spans = [{
        "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": f"{i + 1:016x}", "name": "search", "kind": 1,
        "startTimeUnixNano": str(1_767_225_600_000_000_000 + i * 10**9),
        "endTimeUnixNano": str(1_767_225_600_000_000_000 + i * 10**9 + 5 * 10**8),
        "attributes": [{"key": "acme.span.type", "value": _s("tool")}, {"key": "acme.in", "value": _s('{"q": 1}')},
                       {"key": "", "value": _s(f"tool{i}")}],
    } for i in range(4)]
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "acme"}, "spans": spans}]}]}
    trace = _write(tmp_path, "acme.json", json.dumps(doc))
    config = _write(tmp_path, "loopguard.toml", ACME_NO_TOOL_NAME)

    _, [report], err = _audit(capsys, "--config", str(config), str(trace))
    assert err == ""
    assert (report["steps_used"], report["verdict"], report["rule"]) == (4, "uncertain", "evidence")
    # Working for calls 1 and 2, uncertain (period 1, three cycles of "search") from the third call (step 2).
    assert [(t["step"], t["to"]) for t in report["transitions"]] == [(2, "uncertain")]
