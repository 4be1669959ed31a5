"""serve judges traces exactly as ``audit`` does, whatever the batching, order, transport or partition."""

from __future__ import annotations

import json

import pytest

from otel_loopguard.core.config import LoopGuardConfig

from ._support import (
    FIXTURE_FILES,
    Harness,
    as_reference,
    audit_reports,
    batches,
    event_key,
    grpc_export,
    load_items,
    post,
    request_dict,
    to_proto,
)


@pytest.fixture(scope="module")
def reference() -> dict[str, dict]:
    """``audit --json`` over every fixture file."""
    return audit_reports()


@pytest.fixture(scope="module")
def items() -> list:
    """Every fixture span with its resource and scope."""
    return load_items()


def test_fixture_files_over_http_json_equal_audit(reference: dict[str, dict]) -> None:
    """Each fixture file posted as OTLP/JSON yields exactly audit's report for each of its traces."""
    with Harness() as h:
        for path in FIXTURE_FILES:
            status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
            assert status == 200
        h.server.finish_all()
        assert len(reference) == len(FIXTURE_FILES)  # one trace per file
        assert as_reference(h.reports) == reference
        assert h.server.stats().spans == len(load_items())


def test_fixture_traces_over_grpc_gzip_equal_audit(items: list, reference: dict[str, dict]) -> None:
    """Each trace as a gzip-compressed OTLP/gRPC protobuf request yields audit's report."""
    import grpc

    by_trace: dict[str, list] = {}
    for item in items:
        by_trace.setdefault(item[2]["traceId"], []).append(item)
    with Harness() as h:
        for trace_items in by_trace.values():
            grpc_export(h.server.grpc_port, to_proto(request_dict(trace_items)), compression=grpc.Compression.Gzip)
        h.server.finish_all()
        assert as_reference(h.reports) == reference


@pytest.mark.parametrize("seed", range(6))
def test_shuffled_split_batches_equal_audit(seed: int, items: list, reference: dict[str, dict]) -> None:
    """All fixture spans shuffled and cut into several protobuf/JSON/gzip requests give audit's reports."""
    with Harness() as h:
        for i, batch in enumerate(batches(items, seed)):
            doc = request_dict(batch)
            if i % 3 == 0:
                status, _, _ = post(h.server.http_port, to_proto(doc), "application/x-protobuf")
            elif i % 3 == 1:
                status, _, _ = post(h.server.http_port, json.dumps(doc).encode(), "application/json", gzip_body=True)
            else:
                grpc_export(h.server.grpc_port, to_proto(doc))
                status = 200
            assert status == 200
        h.server.finish_all()
        assert as_reference(h.reports) == reference


def test_out_of_order_tool_span_rejudges_trace(items: list) -> None:
    """A stuck trace whose first tool span arrives last is re-judged and still ends stuck with audit's history."""
    path = next(p for p in FIXTURE_FILES if p.name == "pydantic_ai__same_call_loop.json")
    reference = audit_reports([path])
    mine = load_items([path])
    tools = [it for it in mine if it[2]["name"].startswith("execute_tool") or "tool" in it[2]["name"]]
    first = min(tools, key=lambda it: int(it[2]["startTimeUnixNano"]))
    rest = [it for it in mine if it is not first]
    with Harness() as h:
        post(h.server.http_port, to_proto(request_dict(rest)), "application/x-protobuf")
        post(h.server.http_port, to_proto(request_dict([first])), "application/x-protobuf")
        # The late span is judged at once (provisional); the exact re-judge happens when the trace finishes.
        assert (h.server.stats().reordered_traces, h.server.stats().rejudged_traces) == (1, 0)
        h.server.finish_all()
        assert h.server.stats().rejudged_traces == 1
        assert as_reference(h.reports) == reference


@pytest.mark.parametrize("seed", range(4))
def test_partition_by_trace_across_two_servers(seed: int, items: list, reference: dict[str, dict]) -> None:
    """Spans split by trace id across two serve instances give exactly the verdicts and events of one instance."""
    requests = [request_dict(batch) for batch in batches(items, 100 + seed)]
    with Harness() as one, Harness() as left, Harness() as right:
        for doc in requests:
            post(one.server.http_port, to_proto(doc), "application/x-protobuf")
            for target, parity in ((left, 0), (right, 1)):
                part = [(r, s, sp) for r, s, sp in _flatten(doc) if int(sp["traceId"], 16) % 2 == parity]
                if part:
                    post(target.server.http_port, to_proto(request_dict(part)), "application/x-protobuf")
        for h in (one, left, right):
            h.server.finish_all()
        split = as_reference(left.reports) | as_reference(right.reports)
        assert len(left.reports) + len(right.reports) == len(one.reports) == len(FIXTURE_FILES)
        assert split == as_reference(one.reports) == reference
        assert sorted(map(event_key, left.events + right.events), key=repr) == sorted(map(event_key, one.events), key=repr)


def _flatten(doc: dict) -> list:
    return [(rs["resource"], ss["scope"], span) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
            for span in ss["spans"]]


def test_late_spans_continue_a_finished_trace(reference: dict[str, dict]) -> None:
    """Spans arriving after their trace was finished by the idle timer are counted and judged with the rest."""
    path = next(p for p in FIXTURE_FILES if p.name == "langgraph_genai__same_call_loop.json")
    mine = sorted(load_items([path]), key=lambda it: int(it[2]["startTimeUnixNano"]))
    half = len(mine) // 2
    with Harness(idle=0.2) as h:
        post(h.server.http_port, json.dumps(request_dict(mine[:half])).encode(), "application/json")
        assert h.wait_reports(1)
        post(h.server.http_port, json.dumps(request_dict(mine[half:])).encode(), "application/json")
        assert h.wait_reports(2)
        stats = h.server.stats()
        assert stats.late_spans == len(mine) - half
        assert stats.finished_traces == 2
        final = as_reference(h.reports[-1:])
        trace_id = next(iter(final))
        assert final[trace_id] == reference[trace_id]
        assert final[trace_id]["verdict"] == "stuck"


def test_events_carry_the_causing_tool_span_context() -> None:
    """Each verdict log record has the trace id and span id of the tool span that caused it, and the metrics flow."""
    path = next(p for p in FIXTURE_FILES if p.name == "openai_agents_genai__ping_pong.json")
    spans = {it[2]["spanId"]: it[2] for it in load_items([path])}
    with Harness() as h:
        post(h.server.http_port, path.read_bytes(), "application/json")
        records = [d.log_record for d in h.logs.get_finished_logs()]
        stuck = [r for r in records if r.attributes["loopguard.verdict"] == "stuck"
                 and r.attributes["loopguard.verdict.previous"] != "stuck"]
        assert len(stuck) == 1
        record = stuck[0]
        assert record.event_name == "loopguard.verdict"
        span = spans[f"{record.span_id:016x}"]
        assert f"{record.trace_id:032x}" == span["traceId"]
        assert any(a["key"] in ("gen_ai.tool.name", "gen_ai.operation.name") for a in span["attributes"])
        assert record.attributes["loopguard.rule"] == "frequency"
        assert record.attributes["loopguard.intervention"] == "nudge"
        assert isinstance(record.attributes["loopguard.steps"], int)
        h.server.finish_all()
        assert {"loopguard.verdicts", "loopguard.tool_calls", "loopguard.trace.steps"} <= h.metric_names()


def test_max_traces_bounds_open_traces_and_counts_evictions(items: list) -> None:
    """With max_traces=5, N traces (one per file) never keep more than 5 open and N - 5 early finishes are counted."""
    with Harness(LoopGuardConfig(max_traces=5)) as h:
        for path in FIXTURE_FILES:
            post(h.server.http_port, path.read_bytes(), "application/json")
            assert h.server.stats().open_traces <= 5
        stats = h.server.stats()
        assert stats.evicted_traces == len(FIXTURE_FILES) - 5
        assert len(h.reports) == len(FIXTURE_FILES) - 5
        assert stats.open_traces == 5


def test_stop_drains_open_traces() -> None:
    """stop() finishes the traces still open, so their reports and final metrics are published."""
    h = Harness(idle=60)
    with h:
        post(h.server.http_port, FIXTURE_FILES[0].read_bytes(), "application/json")
        assert h.reports == []
    assert len(h.reports) == 1


def test_active_traces_gauge_returns_to_zero(items: list) -> None:
    """After every trace is finished (some reopened by late spans) ``loopguard.traces.active`` sums to zero."""
    # No idle finishing: finish_all() finishes every trace before it returns, so the gauge is read after every
    # finished trace was published (an idle sweep could still be publishing some).
    with Harness(idle=3600) as h:
        # The first half of every trace's spans (by start), then the rest: every trace of two or more spans is
        # reopened by late spans, whatever the recorded fixtures' clock times.
        by_trace: dict[str, list] = {}
        for it in sorted(items, key=lambda it: int(it[2]["startTimeUnixNano"])):
            by_trace.setdefault(it[2]["traceId"], []).append(it)
        first = [it for spans in by_trace.values() for it in spans[:len(spans) // 2]]
        rest = [it for spans in by_trace.values() for it in spans[len(spans) // 2:]]
        post(h.server.http_port, to_proto(request_dict(first)), "application/x-protobuf")
        h.server.finish_all()
        assert h.reports
        post(h.server.http_port, to_proto(request_dict(rest)), "application/x-protobuf")
        h.server.finish_all()
        assert h.server.stats().late_spans > 0
        data = h.metrics.get_metrics_data()
        points = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                  if m.name == "loopguard.traces.active" for p in m.data.data_points]
        assert points
        assert sum(p.value for p in points) == 0


def test_active_traces_gauge_every_series_back_to_zero_for_a_loop_in_one_request() -> None:
    """A whole looping trace in one request starts as working and moves by its transitions: every
    ``loopguard.traces.active`` series is 0 once it finished (no series below zero, none left above)."""
    loop = next(p for p in FIXTURE_FILES if p.name == "pydantic_ai__same_call_loop.json")
    with Harness(idle=3600) as h:
        status, _, _ = post(h.server.http_port, loop.read_bytes(), "application/json")
        assert status == 200
        h.server.finish_all()
        [report] = h.reports
        assert report.verdict.kind == "stuck"  # the recorded scenario repeats one call with one result
        data = h.metrics.get_metrics_data()
        points = {dict(p.attributes).get("loopguard.verdict"): p.value for rm in data.resource_metrics
                  for sm in rm.scope_metrics for m in sm.metrics if m.name == "loopguard.traces.active"
                  for p in m.data.data_points}
        assert "working" in points and "stuck" in points
        assert all(value == 0 for value in points.values()), points
