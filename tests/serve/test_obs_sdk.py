"""Traces of the LLM-observability SDKs (Langfuse, MLflow, Pydantic Logfire v1) received by ``serve``: each trace's
report says what the hand-derived scenario table says, equal to ``audit``'s; a trace whose calls are known only from
finish reasons is uncertain and its sender is told why in an OTLP ``partial_success``.
"""

from __future__ import annotations

import json
from pathlib import Path

from otel_loopguard.conventions.unread import CALLS_WITHOUT_CONTENT
from tests.serve._support import Harness, as_reference, audit_reports, post, served
from tests.support.chat_traces import repeated_id_chat
from tests.support.recorded_fixtures import FIXTURES, obs_sdk_fixture_files
from tests.support.scenario_expectations import expected

FILES = obs_sdk_fixture_files()


def test_sdk_traces_are_judged_as_the_scenarios_say() -> None:
    """Every recorded SDK trace posted as OTLP/JSON: loops stuck with their period, pagination and healthy working,
    content off uncertain, unread notes only where the scenario table says, each report equal to audit's."""
    with Harness() as h:
        for path in FILES:
            status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
            assert status == 200
        h.server.finish_all()
        assert h.wait_reports(len(FILES))
        reports = as_reference(h.reports)
    assert reports == audit_reports(FILES)
    by_file = {}
    for path in FILES:
        [trace_id] = {span["traceId"] for rs in json.loads(path.read_text())["resourceSpans"]
                      for ss in rs["scopeSpans"] for span in ss["spans"]}
        by_file[path] = reports[trace_id]
    for path, report in by_file.items():
        source, scenario = path.stem.split("__", 1)
        expected(source, scenario).check(report)


def test_calls_known_only_from_finish_reasons_are_told_to_the_sender() -> None:
    """openai-v2 with content off: five calls that cannot be compared, uncertain (rule evidence) at the third; the
    next answer to the sender is a partial success (no span rejected) naming the evidence key."""
    partial, report = served(FIXTURES / "model_spans" / "openai_v2_span__no_content.json")
    assert int(partial.get("rejectedSpans", 0)) == 0
    assert "say tool calls happened" in partial["errorMessage"]
    assert "gen_ai.response.finish_reasons" in partial["errorMessage"]
    doc = report.as_dict()
    assert doc["steps_used"] == 5 and doc["verdict"] == "uncertain"
    assert [(t["step"], t["to"], t["rule"]) for t in doc["transitions"]] == [(2, "uncertain", "evidence")]
    assert [u["reason"] for u in doc["unread"]] == [CALLS_WITHOUT_CONTENT]


def test_a_call_id_repeated_on_every_turn_does_not_merge_the_calls(tmp_path: Path) -> None:
    """Gemini's chats: six turns ask for the same search as ``search_0`` (then one answers): serve judges six calls,
    stuck with period 1 at the third (step 2), exactly as audit does."""
    path = tmp_path / "chat.json"
    repeated_id_chat(path, 6)
    with Harness() as h:
        status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        assert h.wait_reports(1)
        [report] = h.reports
    doc = report.as_dict()
    assert doc["steps_used"] == 6 and doc["verdict"] == "stuck" and doc["period"] == 1
    assert [(t["step"], t["to"], t["rule"]) for t in doc["transitions"]] == [(2, "stuck", "period")]
    assert as_reference([report]) == audit_reports([path])
