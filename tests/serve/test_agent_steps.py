"""serve judges hand-offs, repeated answers and degenerate outputs as ``audit`` does, with their step kind."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.support.agent_step_fixtures import ADK, AGENT_FIXTURES, Expected, cases

from ._support import Harness, as_reference, audit_reports, post

CASES = cases()


@pytest.mark.parametrize(("path", "want"), CASES, ids=lambda c: c.stem if isinstance(c, Path) else "")
def test_posted_fixture_equals_audit_and_the_script(path: Path, want: Expected) -> None:
    """Each recorded multi-agent or model-turn file posted as OTLP/JSON yields audit's report: stuck with the
    kind, period and agents the script implies, or working."""
    with Harness() as h:
        status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        [report] = as_reference(h.reports).values()
    audited = next(iter(audit_reports([path]).values()))
    # Each kind of step counts its own steps, so transitions of two kinds have no common order: compare them by
    # kind, then step.
    for doc in (report, audited):
        doc["transitions"] = sorted(doc["transitions"], key=lambda t: (t.get("step_kind", "tool"), t["step"]))
    assert report == audited
    assert (report["verdict"], report["rule"], report["period"]) == (want.verdict, want.rule, want.period)
    assert report.get("step_kind") == want.step_kind
    assert tuple(report.get("agents", ())) == want.agents


def test_verdict_counter_carries_the_step_kind() -> None:
    """Posted to serve, the repeated chat answer counts one stuck transition (index 3) and one nudge under
    loopguard.step.kind="model"; no point is counted under another kind."""
    path = AGENT_FIXTURES / "openai_agents_openinference__chat_repeat.json"
    with Harness() as h:
        status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        data = h.metrics.get_metrics_data()
    assert data is not None
    points = {m.name: [(dict(p.attributes), p.value) for p in m.data.data_points]
              for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name in ("loopguard.verdicts", "loopguard.interventions")}
    assert [(a["loopguard.verdict"], a["loopguard.step.kind"], v) for a, v in points["loopguard.verdicts"]] == [
        ("stuck", "model", 1)]
    assert [(a["loopguard.intervention"], a["loopguard.step.kind"], v)
            for a, v in points["loopguard.interventions"]] == [("nudge", "model", 1)]


def test_autogen_native_turns_are_noted_not_judged() -> None:
    """AutoGen's native tracing of a repeating group chat, posted to serve: the eight one-turn traces (nine messages:
    the task and eight turns) each finish working with one agent_turns_without_content note for their one
    invoke_agent span; no verdict event is told."""
    path = AGENT_FIXTURES / "autogen_group_native__group_repeat.json"
    with Harness() as h:
        status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        reports = [r.as_dict() for r in h.reports]
    notes = [(u["reason"], u["spans"]) for r in reports for u in (r.get("unread") or ())]
    assert notes == [("agent_turns_without_content", 1)] * 8
    assert {r["verdict"] for r in reports} == {"working"}
    assert h.events == []


def _split(document: dict, first: set[str]) -> tuple[bytes, bytes]:
    """An OTLP/JSON request as two: the spans named in ``first`` (by span id), then the others."""
    parts = []
    for keep in (lambda s: s["spanId"] in first, lambda s: s["spanId"] not in first):
        part = copy.deepcopy(document)
        for resource in part["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if keep(s)]
        parts.append(json.dumps(part).encode())
    return parts[0], parts[1]


def test_subagents_posted_before_their_parent_wait_for_it() -> None:
    """ADK's loop: the writer's and critic's spans sent in one request, the loop agent's span (their parent) in a
    later one; the sub-agent steps are judged once the parent arrives, and the report equals audit's."""
    path = AGENT_FIXTURES / "adk_openinference__loop_repeat.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    spans = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    children = {s["spanId"] for s in spans if s["name"] in ("agent_run [writer_agent]", "agent_run [critic_agent]")}
    assert len(children) == 8
    first, second = _split(document, children)
    with Harness() as h:
        for body in (first, second):
            status, _, _ = post(h.server.http_port, body, "application/json")
            assert status == 200
        h.server.finish_all()
        [report] = as_reference(h.reports).values()
    audited = next(iter(audit_reports([path]).values()))
    assert report == audited
    want = ADK["loop_repeat"]
    assert (report["verdict"], report["period"], report["step_kind"]) == (want.verdict, want.period, "agent")
    assert tuple(report["agents"]) == want.agents
