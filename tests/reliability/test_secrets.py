"""Secrets in tool arguments and results never leave loopguard: after the whole path (processor → SDK OTLP
exporters → rotel → recording receiver) no log or metric request and no ``loopguard.verdict`` span event contains
them, while the tool spans themselves (the application's own data) do. Emitted digests are keyed."""

from __future__ import annotations

import pytest
from opentelemetry.trace import Status, StatusCode

from otel_loopguard import LoopGuardConfig
from tests.reliability.conftest import build_pipeline, settle
from tests.reliability.otlp import TOOL, build_otlp_pipeline, received_verdict_keys, verdict_keys
from tests.reliability.secret_values import API_KEY, ARGUMENTS, PATH, RESULT, SECRETS
from tests.support.otlp_receiver import LOGS, METRICS, TRACES, RecordingOTLPReceiver
from tests.support.rotel import RotelCollector


def _loop_with_secrets(tracer: object, guard: object, runs: int = 3) -> None:
    for _ in range(runs):
        with tracer.start_as_current_span("invoke_agent", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}):
            for i in range(6):
                span = tracer.start_span("execute_tool read_file", attributes={
                    **TOOL, "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.arguments": ARGUMENTS, "gen_ai.tool.call.result": RESULT})
                if i == 5:
                    # A failed call whose status text carries the secrets too (error classes feed the retry policy).
                    span.set_status(Status(StatusCode.ERROR, f"permission denied: {PATH} ({API_KEY})"))
                span.end()
                # As a harness does after every tool call; it also makes the processor judge the call while the
                # agent span is open (these synthetic calls never yield the GIL to its background thread).
                guard.check(span.get_span_context().trace_id)


def _leaks(raw: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in raw]


@pytest.mark.e2e
def test_no_secret_reaches_the_backend_in_events_span_events_or_metrics(
    rotel: RotelCollector, otlp_receiver: RecordingOTLPReceiver
) -> None:
    """Every byte of every log and metric request the backend got, and every ``loopguard.verdict`` span event,
    is free of the API key, e-mail address and file path the tool calls carried."""
    pipeline = build_otlp_pipeline(rotel.grpc_endpoint)
    try:
        _loop_with_secrets(pipeline.tracer_provider.get_tracer("agent"), pipeline.processor)
        expected = verdict_keys(pipeline)
        assert len(expected) >= 6
        assert pipeline.tracer_provider.force_flush(30_000) and pipeline.meter_provider.force_flush(30_000)
        assert otlp_receiver.wait_for(
            lambda r: expected <= received_verdict_keys(r.log_records())
            and any(p["name"] == "loopguard.tool_calls" for p in r.metric_points())
            and sum(1 for s in r.spans() if s["name"] == "execute_tool read_file") == 18,
            60.0,
        ), "not everything arrived"
    finally:
        pipeline.shutdown()

    for kind in (LOGS, METRICS):
        for received in otlp_receiver.received(kind):
            assert _leaks(received.request.SerializeToString()) == [], kind
    verdict_span_events = 0
    tool_spans_with_secrets = 0
    for received in otlp_receiver.received(TRACES):
        for resource_spans in received.request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if span.name == "execute_tool read_file":
                        tool_spans_with_secrets += _leaks(span.SerializeToString()) == list(SECRETS)
                    for event in span.events:
                        if event.name == "loopguard.verdict":
                            verdict_span_events += 1
                            assert _leaks(event.SerializeToString()) == []
    # The search does find the secrets where the application put them, and there were span events to search.
    assert tool_spans_with_secrets == 18
    assert verdict_span_events == len(expected), (
        "loopguard.verdict span events are missing: were the verdicts judged after their agent span had ended "
        "(a span that is no longer recording drops add_event)?")


def _digests(key: bytes) -> list[str]:
    pipeline = build_pipeline(LoopGuardConfig(signature_key=key))
    _loop_with_secrets(pipeline.provider.get_tracer("agent"), pipeline.processor, runs=1)
    settle(pipeline.processor)
    records = [r.log_record.attributes for r in pipeline.logs.get_finished_logs()]
    pipeline.shutdown()
    return [a["loopguard.signature"] for a in records if "loopguard.signature" in a]


def test_signature_digests_are_keyed() -> None:
    """The same calls give the same digests under the same key, other digests under another key, and no digest
    is the unkeyed hash of the arguments."""
    import hashlib

    first = _digests(b"key-one-0123456789abcdef")
    again = _digests(b"key-one-0123456789abcdef")
    other = _digests(b"key-two-0123456789abcdef")
    assert first and first == again
    assert len(other) == len(first) and set(other).isdisjoint(first)
    for text in (ARGUMENTS, "read_file\x1f" + ARGUMENTS):
        for algorithm in ("sha256", "md5", "sha1"):
            assert hashlib.new(algorithm, text.encode()).hexdigest()[:32] not in first
