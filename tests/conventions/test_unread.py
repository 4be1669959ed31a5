"""Unread input is never silent: the classification, and audit's note.

The processor and serve: tests/processor/test_unread.py, tests/serve/test_unread.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard import cli
from otel_loopguard.conventions.unread import (
    CALLS_WITHOUT_CONTENT,
    NO_TOOL_CALLS,
    UNKNOWN_ATTRIBUTES,
    UnreadTrace,
    unknown_content_keys,
)
from tests.support.recorded_fixtures import FIXTURES


def _rename_content(doc: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """The recorded trace with the tool spans' content attributes renamed (an instrumentation we do not know)."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for attr in span.get("attributes", []):
                    attr["key"] = names.get(attr["key"], attr["key"])
    return doc


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], str]:
    capsys.readouterr()
    cli.main(["audit", "--json", *argv])
    out = capsys.readouterr()
    [report] = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    cli.main(["audit", *argv])
    return report, capsys.readouterr().out


def test_unknown_content_attributes_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GenAI tool spans whose content sits in attributes no convention reads: the loop is uncertain (content not
    found) and audit names the keys and the documentation page; a [conventions] table then reads them (stuck)."""
    doc = _rename_content(json.loads((FIXTURES / "pydantic_ai__same_call_loop.json").read_text()),
                          {"gen_ai.tool.call.arguments": "myfw.tool_input", "gen_ai.tool.call.result": "myfw.output"})
    path = tmp_path / "myfw.json"
    path.write_text(json.dumps(doc))
    report, text = _audit(capsys, str(path))
    assert report["verdict"] == "uncertain"
    [unread] = report["unread"]
    assert (unread["reason"], unread["keys"], unread["spans"]) == (UNKNOWN_ATTRIBUTES,
                                                                   ["myfw.output", "myfw.tool_input"], 5)
    assert "docs/conventions.md" in unread["message"] and "myfw.tool_input" in unread["message"]
    assert "  unread: 5 tool span(s) whose arguments or result are in attributes no convention reads" in text

    config = tmp_path / "c.toml"
    config.write_text('[conventions.myfw]\nwhen = { "gen_ai.operation.name" = "execute_tool" }\n'
                      'tool_name = "gen_ai.tool.name"\narguments = "myfw.tool_input"\nresult = "myfw.output"\n')
    report, _ = _audit(capsys, "--config", str(config), str(path))
    assert report["verdict"] == "stuck" and "unread" not in report


def test_no_readable_call_in_model_spans_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """The anthropic SDK's own spans with content off: six model spans, no content and no finish reason: no call,
    and a note naming SPAN_ONLY, the model spans' keys and the documentation page."""
    report, text = _audit(capsys, str(FIXTURES / "model_spans" / "anthropic_sdk__no_content.json"))
    assert report["steps_used"] == 0
    [unread] = report["unread"]
    assert unread["reason"] == NO_TOOL_CALLS and unread["spans"] == 6
    assert "gen_ai.usage.input_tokens" in unread["keys"] and "SPAN_ONLY" in unread["message"]
    assert text.count("  unread: ") == 1


def test_calls_known_only_from_finish_reasons_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    """openai-v2 with EVENT_ONLY: five of six model spans end with finish reason tool_calls, the content is in log
    records: five calls that cannot be compared, uncertain at the third, and a note naming the evidence."""
    report, text = _audit(capsys, str(FIXTURES / "model_spans" / "openai_v2_event__same_call_loop.json"))
    assert report["steps_used"] == 5
    assert report["verdict"] == "uncertain"
    assert [(t["step"], t["to"], t["rule"]) for t in report["transitions"]] == [(2, "uncertain", "evidence")]
    [unread] = report["unread"]
    assert unread["reason"] == CALLS_WITHOUT_CONTENT and unread["spans"] == 5
    assert unread["keys"] == ["gen_ai.response.finish_reasons"]
    assert "cannot be compared" in unread["message"]
    assert text.count("  unread: ") == 1


def test_content_off_is_not_an_unread_cause(capsys: pytest.CaptureFixture[str]) -> None:
    """Tool spans whose content was simply not captured are read (uncertain), not reported as unread."""
    for name in ("pydantic_ai__no_content.json", "autogen_native__same_call_loop.json",
                 "autogen_openinference__no_content.json", "strands_default__no_content.json"):
        report, _ = _audit(capsys, str(FIXTURES / name))
        assert "unread" not in report, name


def test_classification() -> None:
    assert unknown_content_keys({"gen_ai.tool.call.arguments": "x", "tool.parameters": "{}", "acme.payload": "p",
                                 "acme.tool_request_id": "r", "acme.count": 3},
                                [("acme.done", {"output": "o"}), ("exception", {"exception.message": "m"})]) == (
        "acme.done/output", "acme.payload")
    trace = UnreadTrace()
    trace.model({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3, "http.method": "POST"})
    [cause] = trace.causes()
    assert cause.reason == NO_TOOL_CALLS and cause.keys == ("gen_ai.operation.name", "gen_ai.usage.input_tokens")
    trace.derived(2)
    assert trace.causes() == []
    # A tool span whose content was found is never a cause, whatever else it carries.
    trace.tool({"acme.payload": "p"}, True, True)
    assert trace.causes() == []
