"""Placeholders meaning "not recorded" (``redacted_values``): one configurable list, never a value.

The worst error loopguard can make is a false ``stuck`` (and a stop) on a healthy agent: identical placeholders
instead of each call's own arguments would read as identical calls. So a placeholder makes the call "not recorded",
and a repetition without evidence is ``uncertain``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import LoopGuardConfig, cli
from otel_loopguard.conventions.extract import Extractor
from otel_loopguard.core.config import DEFAULT_REDACTED_VALUES, RedactedValue
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.errors import ConfigError
from tests.support.recorded_fixtures import FIXTURES


def _redact(doc: dict[str, Any], keys: tuple[str, ...], placeholder: str) -> dict[str, Any]:
    """The recorded trace with each tool span's ``keys`` replaced by ``placeholder``, as the redaction does."""
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for attr in span.get("attributes", []):
                    if attr["key"] in keys:
                        attr["value"] = {"stringValue": placeholder}
    return doc


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["audit", "--json", *argv])
    [report] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return report


def test_redacted_pagination_is_uncertain_never_stuck(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """strands' redaction (gen_ai_unredacted_attributes=) on a paginating agent: four calls, identical placeholders.

    Read as values they would be one call repeated with one result (stuck at the third, stopped at the fourth);
    read as "not recorded", the repetition lacks evidence: uncertain at the third call (step 2), never stuck.
    """
    doc = json.loads((FIXTURES / "strands_latest__pagination.json").read_text())
    path = tmp_path / "redacted.json"
    path.write_text(json.dumps(_redact(doc, ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"),
                                       "[REDACTED]")))
    report = _audit(capsys, str(path))
    assert [(t["step"], t["to"]) for t in report["transitions"]] == [(2, "uncertain")]
    assert report["interventions"] == [] and report["verdict"] == "uncertain"


def test_the_list_is_configurable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An in-house placeholder joins the list; a list without a placeholder makes it a value again."""
    doc = json.loads((FIXTURES / "pydantic_ai__pagination.json").read_text())
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps(_redact(doc, ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"), "<hidden>")))
    # By default "<hidden>" is a value: four identical calls with one result, stuck at step 2.
    assert [(t["step"], t["to"]) for t in _audit(capsys, str(path))["transitions"]] == [(2, "stuck")]
    config = tmp_path / "c.toml"
    config.write_text('redacted_values = ["<hidden>"]\n')
    report = _audit(capsys, "--config", str(config), str(path))
    assert [(t["step"], t["to"]) for t in report["transitions"]] == [(2, "uncertain")]
    # The recorded OpenInference run with content hidden: with the default list uncertain; with an empty list its
    # "__REDACTED__" is a value, and the loop of identical placeholders reads as stuck (the user's explicit choice).
    hidden = FIXTURES / "openai_agents_openinference__no_content.json"
    assert _audit(capsys, str(hidden))["verdict"] == "uncertain"
    config.write_text("redacted_values = []\n")
    assert _audit(capsys, "--config", str(config), str(hidden))["verdict"] == "stuck"


@pytest.mark.parametrize(("key", "recorded"), [
    ("gcp.vertex.agent.tool_call_args", False),  # ADK's legacy schema with content capture off
    ("gen_ai.tool.call.arguments", True),  # a tool without arguments
])
def test_adk_empty_object_is_a_placeholder_only_in_adk_attributes(key: str, recorded: bool) -> None:
    """``{}`` is ADK's placeholder in its own content attributes; elsewhere it is a call without arguments."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "now", key: "{}"}
    call = Extractor().tool_call(attrs, "execute_tool now", 1, 2)
    assert call.arguments_captured is recorded
    assert call.arguments == ("{}" if recorded else None)


@pytest.mark.parametrize(("args", "recorded"), [
    ('{"query":"[REDACTED]"}', False),  # Mastra 0.x SensitiveDataFilter: every value hidden
    ('{"query": "__REDACTED__", "page": "[REDACTED]"}', False),
    ('{"query":"[REDACTED]","page":2}', True),  # one argument still tells calls apart
    ('{"note":"the text [REDACTED] appears inside"}', True),
    ("[REDACTED]", False),
    ("__REDACTED__", False),
    ("{}", True),
])
def test_an_argument_object_of_placeholders_is_not_recorded(args: str, recorded: bool) -> None:
    attrs = {"gen_ai.operation.name": "tool.execute", "gen_ai.tool.name": "search", "gen_ai.tool.input": args,
             "gen_ai.tool.output": "3 hits"}
    call = Extractor().tool_call(attrs, "tool.execute search", 1, 2)
    assert call.arguments_captured is recorded
    assert call.result_captured and call.result == "3 hits"


@pytest.mark.parametrize(("result", "recorded"), [
    ("[REDACTED]", False),
    ('{"a": "[REDACTED]"}', False),  # Mastra 0.x's filter hides a result's sensitive fields too: nothing left
    ('{"token": "__REDACTED__", "user": "[REDACTED]"}', False),
    ('{"a": "[REDACTED]", "n": 2}', True),  # one field still tells results apart
    ("the text [REDACTED] appears inside", True),
    ("{}", True),
])
def test_a_result_of_placeholders_is_not_recorded_but_a_result_mentioning_one_is(result: str, recorded: bool) -> None:
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"}
    call = Extractor().tool_call({**base, "gen_ai.tool.call.result": result}, "x", 1, 2)
    assert (call.result_captured, call.result) == ((True, result) if recorded else (False, None))


def test_a_strands_block_of_a_placeholder_is_a_placeholder() -> None:
    # strands writes its result as content blocks; a block of a placeholder is a placeholder.
    base = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"}
    strands = {**base, "gen_ai.provider.name": "strands-agents", "gen_ai.tool.call.result": '[{"text": "[REDACTED]"}]'}
    assert not Extractor().tool_call(strands, "x", 1, 2).result_captured


def test_repeated_calls_with_results_of_placeholders_are_uncertain_never_stuck() -> None:
    # Five identical calls whose results are objects of placeholders: the real results may all differ, so the
    # repetition lacks evidence (uncertain), never unchanged evidence (stuck, then a stop).
    engine = LoopEngine(LoopGuardConfig())
    state = engine.new_state()
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_token",
             "gen_ai.tool.call.arguments": '{"user": "u1"}', "gen_ai.tool.call.result": '{"token": "[REDACTED]"}'}
    kinds = [engine.observe(state, Extractor().tool_call(attrs, "x", i, i + 1)).verdict.kind for i in range(5)]
    assert "stuck" not in kinds and kinds[-1] == "uncertain"


def test_strands_event_placeholders_are_not_recorded() -> None:
    """strands' default conventions keep content in span events; their placeholders are "not recorded" too."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "strands-agents", "gen_ai.tool.name": "search"}
    redacted = [("gen_ai.tool.message", {"role": "tool", "content": "[REDACTED]", "id": "call_0"}),
                ("gen_ai.choice", {"message": "[REDACTED]", "id": "call_0"})]
    call = Extractor().tool_call(attrs, "execute_tool search", 1, 2, events=redacted)
    assert not call.arguments_captured and not call.result_captured
    shown = [("gen_ai.tool.message", {"content": '{"query": "x"}'}), ("gen_ai.choice", {"message": '[{"text": "ok"}]'})]
    call = Extractor().tool_call(attrs, "execute_tool search", 1, 2, events=shown)
    assert (call.arguments, call.result) == ('{"query": "x"}', "ok")


def test_configuration_forms(tmp_path: Path) -> None:
    """TOML: strings and {value, attributes} tables; environment: a comma list, ``+`` extends the defaults."""
    path = tmp_path / "c.toml"
    path.write_text('redacted_values = ["<hidden>", { value = "N/A", attributes = ["my.args"] }]\n')
    config = LoopGuardConfig.load(path)
    assert config.redacted_values == (RedactedValue("<hidden>"), RedactedValue("N/A", ("my.args",)))
    assert LoopGuardConfig().redacted_values == DEFAULT_REDACTED_VALUES
    env = LoopGuardConfig.load(environ={"LOOPGUARD_REDACTED_VALUES": "+***,<secret>"})
    assert env.redacted_values == (*DEFAULT_REDACTED_VALUES, RedactedValue("***"), RedactedValue("<secret>"))
    assert LoopGuardConfig.load(environ={"LOOPGUARD_REDACTED_VALUES": "***"}).redacted_values == (RedactedValue("***"),)


@pytest.mark.parametrize(("text", "message"), [
    ('redacted_values = "[REDACTED]"\n', "redacted_values must be a list"),
    ("redacted_values = [3]\n", "an entry must be a string or a {value, attributes} table"),
    ('redacted_values = [{ attributes = ["a"] }]\n', "an entry needs a value"),
    ('redacted_values = [{ value = "x", keys = ["a"] }]\n', "unknown key(s) keys"),
    ('redacted_values = [{ value = "x", attributes = "a" }]\n', "attributes must be a list of strings"),
])
def test_bad_configuration_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(path)
    assert message in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(("args", "recorded"), [
    # OpenLLMetry's LangChain envelope: the arguments are its "inputs". A placeholder there, or an object of
    # placeholders, is an argument "not recorded" (the README: "a placeholder instead of content"; the
    # redacted_values setting: "an object whose values are all placeholders (as arguments or as a result) is not
    # recorded either"),
    # although the envelope around it (with its tags list) is no object of placeholders.
    ('{"inputs": "[REDACTED]", "tags": []}', False),
    ('{"input_str": "[REDACTED]", "inputs": {"q": "[REDACTED]"}, "tags": []}', False),
    # One real value among the inputs still tells calls apart: recorded, as the inputs' JSON text.
    ('{"inputs": {"q": "[REDACTED]", "page": 2}, "tags": []}', True),
])
def test_placeholders_inside_an_argument_envelope_are_not_recorded(args: str, recorded: bool) -> None:
    attrs = {"traceloop.span.kind": "tool", "traceloop.entity.name": "search", "traceloop.entity.input": args,
             "traceloop.entity.output": "3 hits"}
    call = Extractor().tool_call(attrs, "search.tool", 1, 2)
    assert call.arguments_captured is recorded
    assert call.arguments == ('{"q": "[REDACTED]", "page": 2}' if recorded else None)
    assert call.result_captured and call.result == "3 hits"


def test_repeated_calls_with_redacted_enveloped_arguments_are_uncertain_not_stuck() -> None:
    # Three calls whose LangChain inputs were each replaced by placeholders, with one result: the repetition is there
    # (period 1, three times), the evidence is not (the arguments are unknown), so the third call is "uncertain".
    # Read as the text '{"q": "[REDACTED]"}' the three calls would be equal: a false "stuck".
    args = '{"input_str": "[REDACTED]", "inputs": {"q": "[REDACTED]"}, "tags": []}'
    attrs = {"traceloop.span.kind": "tool", "traceloop.entity.name": "search", "traceloop.entity.input": args,
             "traceloop.entity.output": "3 hits"}
    extractor = Extractor()
    engine = LoopEngine()
    state = engine.new_state()
    kinds = [engine.observe(state, extractor.tool_call(attrs, "search.tool", i * 10**9 + 1, i * 10**9 + 2)).verdict.kind
             for i in range(3)]
    assert kinds == ["working", "working", "uncertain"]


@pytest.mark.parametrize("encode", [
    lambda obj: json.dumps(obj),  # Python's default: non-ASCII written as \u escapes
    lambda obj: json.dumps(obj, ensure_ascii=False),
])
def test_a_non_ascii_placeholder_in_an_argument_object_is_not_recorded_however_encoded(encode: Any) -> None:
    # A configured placeholder "«hidden»" as every value of the argument object: the call's arguments are not
    # recorded, whether the encoder wrote the guillemets as they are or as \u00ab...\u00bb (before, the escaped
    # form passed the quick check unseen and the object counted as recorded: identical hidden calls, a false stuck).
    extractor = Extractor(redacted_values=(*DEFAULT_REDACTED_VALUES, RedactedValue("«hidden»")))
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
             "gen_ai.tool.call.arguments": encode({"query": "«hidden»"}), "gen_ai.tool.call.result": "3 hits"}
    assert extractor.tool_call(attrs, "execute_tool search", 1, 2).arguments_captured is False
    # One real value still tells calls apart: recorded.
    attrs["gen_ai.tool.call.arguments"] = encode({"query": "«hidden»", "page": 2})
    assert extractor.tool_call(attrs, "execute_tool search", 1, 2).arguments_captured is True
