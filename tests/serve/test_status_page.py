"""The status page of serve: /traces.json and / from a real Server, escaped, bounded, linked, authenticated."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.errors import ConfigError
from otel_loopguard.serve.figures import HeldTrace, ServeStats
from otel_loopguard.serve.server import Server
from otel_loopguard.serve.status import MAX_EVENTS, StatusBoard
from tests.support.agent_step_fixtures import AGENT_FIXTURES

from ._loop_request import loop_request
from ._support import Harness, post

_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Content-Type", "")


def _document(h: Harness) -> dict[str, Any]:
    port = h.server.status_port
    assert port is not None
    status, body, content_type = _get(port, "/traces.json")
    assert (status, content_type) == (200, "application/json")
    doc: dict[str, Any] = json.loads(body)
    return doc


def test_traces_json_holds_the_stuck_trace() -> None:
    """After six identical calls, the open trace is listed as stuck with its service, agent and six calls, and the
    ring holds its working -> stuck transition with the nudge."""
    with Harness(status="127.0.0.1:0") as h:
        assert post(h.server.http_port or 0, loop_request(_TRACE), "application/json")[0] == 200
        doc = _document(h)
    (trace,) = doc["traces"]
    assert {k: trace[k] for k in ("trace_id", "service", "agent", "verdict", "tool_calls", "state")} == {
        "trace_id": _TRACE, "service": "weather-svc", "agent": "weather_agent", "verdict": "stuck",
        "tool_calls": 6, "state": "open"}
    stuck = [e for e in doc["events"] if e["verdict"] == "stuck" and e["previous"] == "working"]
    assert [(e["trace_id"], e["rule"], e["intervention"], e["step"]) for e in stuck] == [(_TRACE, "period", "nudge", 3)]
    assert (trace["step_kind"], stuck[0]["step_kind"]) == ("tool", "tool")
    assert doc["counters"]["spans"] == 7
    assert doc["counters"]["traces_open"] == 1


def test_the_page_escapes_names_and_links_trace_ids() -> None:
    """A service and an agent name holding markup appear as text, never as tags; the trace id links to the UI."""
    evil_agent = "<script>alert(1)</script>"
    evil_service = '"><img src=x onerror=alert(2)>'
    with Harness(status="127.0.0.1:0", trace_url="http://localhost:16686/trace/{trace_id}") as h:
        post(h.server.http_port or 0, loop_request(_TRACE, service=evil_service, agent=evil_agent), "application/json")
        status, page, content_type = _get(h.server.status_port or 0, "/")
    assert (status, content_type) == (200, "text/html; charset=utf-8")
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert f'<a href="http://localhost:16686/trace/{_TRACE}">{_TRACE}</a>' in page
    assert '<meta http-equiv=refresh content=2>' in page


def test_the_ring_keeps_the_last_transitions_only() -> None:
    """Transitions of more traces than the ring holds leave the oldest out: at most 200, the newest first."""
    traces = [f"{i + 1:032x}" for i in range(MAX_EVENTS // 2 + 10)]
    with Harness(status="127.0.0.1:0") as h:
        for trace_id in traces:
            # Each trace makes two events: working -> stuck with a nudge, then the stop.
            post(h.server.http_port or 0, loop_request(trace_id), "application/json")
        doc = _document(h)
    assert len(doc["events"]) == MAX_EVENTS
    assert doc["events"][0]["trace_id"] == traces[-1]
    assert traces[0] not in {e["trace_id"] for e in doc["events"]}


def test_the_bearer_token_guards_the_page() -> None:
    """With a bearer token, the page answers 401 without it and 200 with it."""
    from otel_loopguard.serve.settings import BearerToken, ServeSettings

    token = "s3cret-token-for-the-status-page"
    with Harness(status="127.0.0.1:0", settings=ServeSettings(bearer_token=BearerToken(token))) as h:
        port = h.server.status_port or 0
        assert _get(port, "/traces.json")[0] == 401
        assert _get(port, "/traces.json", {"Authorization": f"Bearer {token}"})[0] == 200
        assert _get(port, "/nothing", {"Authorization": f"Bearer {token}"})[0] == 404


def test_a_bad_trace_url_is_refused() -> None:
    """A template without {trace_id}, or not http(s), is a configuration error naming --trace-url."""
    with pytest.raises(ConfigError, match="--trace-url"):
        Server(grpc_address=None, http_address="127.0.0.1:0", status="127.0.0.1:0", trace_url="javascript:x")
    with pytest.raises(ConfigError, match="--trace-url"):
        Server(grpc_address=None, http_address="127.0.0.1:0", status="127.0.0.1:0", trace_url="http://ui/trace")


def test_a_model_turn_loop_shows_its_step_kind() -> None:
    """The recorded chat agent answering the same text four times is listed open, then finished, as stuck with
    step kind "model", and its one event (working -> stuck with the nudge, after 0 tool calls) says "model"; the page
    shows the step_kind column."""
    path = AGENT_FIXTURES / "openai_agents_openinference__chat_repeat.json"
    with Harness(status="127.0.0.1:0") as h:
        assert post(h.server.http_port or 0, path.read_bytes(), "application/json")[0] == 200
        held = _document(h)
        page = _get(h.server.status_port or 0, "/")[1]
        h.server.finish_all()
        done = _document(h)
    assert [(t["verdict"], t["step_kind"], t["tool_calls"]) for t in held["traces"]] == [("stuck", "model", 0)]
    assert [(e["previous"], e["verdict"], e["step_kind"], e["intervention"], e["step"]) for e in held["events"]] == [
        ("working", "stuck", "model", "nudge", 0)]
    assert [(t["verdict"], t["step_kind"]) for t in done["finished"]] == [("stuck", "model")]
    assert "<th>step_kind</th>" in page and "<td>model</td>" in page


def test_the_board_remembers_services_of_max_traces_traces_only() -> None:
    """With room for 2 traces, traces 1, 2, 3 seen in turn: 1 is forgotten (no service, aged from now), 3 keeps its
    service and its first-seen time (seen at 10, shown at 12: age 2)."""
    now = [10.0]
    board = StatusBoard(2, clock=lambda: now[0])
    board.spans([SpanRecord(t, 1, None, "root", 0, 1, {}, {"service.name": f"svc{t}"}) for t in (1, 2, 3)])
    now[0] = 12.0
    held = [HeldTrace(1, "working", 0, None, None), HeldTrace(3, "working", 0, None, None)]
    doc = board.snapshot(held, ServeStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    assert [(row["trace_id"], row["service"], row["age_s"]) for row in doc["traces"]] == [
        (f"{3:032x}", "svc3", 2.0), (f"{1:032x}", "", 0.0)]
