"""``loopguard.traces.active`` per verdict: a trace is counted as started in ``working`` and moved by its
transitions, so every series is back to 0 once every trace has ended, however the spans were batched."""

from __future__ import annotations

import json

from ._support import FIXTURE_FILES, Harness, post

# A looping trace whose first request already holds every repeated call (as behind a batching Collector):
# the judge reaches ``stuck`` while that one request is being read.
LOOP = "langgraph_genai__same_call_loop.json"


def _active_series(h: Harness) -> dict[str, float]:
    """The gauge's value per ``loopguard.verdict``."""
    data = h.metrics.get_metrics_data()
    return {p.attributes["loopguard.verdict"]: p.value
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == "loopguard.traces.active" for p in m.data.data_points}


def test_one_request_looping_trace_leaves_every_active_series_at_zero() -> None:
    """A whole looping trace in one request: after it ends no series of the gauge is left above or below 0."""
    path = next(p for p in FIXTURE_FILES if p.name == LOOP)
    with Harness(idle=3600) as h:
        post(h.server.http_port, path.read_bytes(), "application/json")
        h.server.finish_all()
        assert [r.verdict.kind for r in h.reports] == ["stuck"]
        series = _active_series(h)
    # The trace started in working and moved to stuck: both series were touched, both are 0 after the end.
    assert series == {"working": 0, "stuck": 0}


def test_one_request_looping_trace_counts_stuck_while_open() -> None:
    """While the one-request looping trace is open the gauge shows it once, under stuck, and nothing negative."""
    path = next(p for p in FIXTURE_FILES if p.name == LOOP)
    with Harness(idle=3600) as h:
        post(h.server.http_port, path.read_bytes(), "application/json")
        series = _active_series(h)
        h.server.finish_all()
    assert series == {"working": 0, "stuck": 1}


def test_every_fixture_in_one_request_each_leaves_every_series_at_zero() -> None:
    """Every recorded trace, each in one request: every series of the gauge ends at exactly 0."""
    with Harness(idle=3600) as h:
        for path in FIXTURE_FILES:
            post(h.server.http_port, path.read_bytes(), "application/json")
        h.server.finish_all()
        assert len(h.reports) == len(FIXTURE_FILES)
        series = _active_series(h)
    assert series
    assert {kind: value for kind, value in series.items() if value != 0} == {}


def test_loop_split_in_two_requests_still_ends_at_zero() -> None:
    """The looping trace in two requests (its second half after the first was judged) also ends at 0 everywhere."""
    path = next(p for p in FIXTURE_FILES if p.name == LOOP)
    doc = json.loads(path.read_text())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    first = {"resourceSpans": [{**doc["resourceSpans"][0], "scopeSpans": [
        {**doc["resourceSpans"][0]["scopeSpans"][0], "spans": spans[: len(spans) // 2]}]}]}
    rest = {"resourceSpans": [{**doc["resourceSpans"][0], "scopeSpans": [
        {**doc["resourceSpans"][0]["scopeSpans"][0], "spans": spans[len(spans) // 2:]}]}]}
    with Harness(idle=3600) as h:
        post(h.server.http_port, json.dumps(first).encode(), "application/json")
        post(h.server.http_port, json.dumps(rest).encode(), "application/json")
        h.server.finish_all()
        series = _active_series(h)
    assert all(value == 0 for value in series.values()), series
