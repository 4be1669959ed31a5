"""Secrets in tool arguments, results and error statuses never leave ``serve``: tool spans carrying an API key, an
e-mail address and a file path reach ``serve`` over OTLP/HTTP (protobuf and JSON) and OTLP/gRPC; its verdict events
and metrics go through the providers the command builds (SDK OTLP exporters, configured by ``OTEL_EXPORTER_OTLP_*``)
to a recording OTLP backend, and no byte of any log or metric request holds the secrets. The same backend also gets
the spans ``--forward`` passes on unchanged: there the secrets are found (the search works). Emitted signature
digests are keyed by ``signature_key``."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.sdk.providers import build_providers, service_resource
from otel_loopguard.serve.server import DEFAULT_SERVICE_NAME, Forwarder, Server
from tests.benchmarks.serve_soak import GRPCClient, HTTPClient
from tests.reliability.otlp import received_verdict_keys
from tests.reliability.secret_values import API_KEY, ARGUMENTS, PATH, RESULT, SECRETS
from tests.serve._support import Harness
from tests.support.otlp_receiver import LOGS, METRICS, TRACES, RecordingOTLPReceiver
from tests.support.proto_spans import request_bytes, root_span, tool_span

KEY = b"serve-secrets-key-0123456789abcdef"
CALLS = 6
TRACE_HTTP_PROTO, TRACE_HTTP_JSON, TRACE_GRPC = 0x5EC1, 0x5EC2, 0x5EC3


def _trace(trace_no: int) -> bytes:
    """A looping agent trace whose every tool call carries the secrets; the last call fails with them in its status."""
    t0 = 1_767_225_600 * 10**9
    spans = [tool_span(trace_no, i, t0, arguments=ARGUMENTS, result=RESULT,
                       error=f"permission denied: {PATH} ({API_KEY})" if i == CALLS - 1 else None)
             for i in range(CALLS)]
    return request_bytes([*spans, root_span(trace_no, t0, CALLS)])


def _as_json(body: bytes) -> bytes:
    """The OTLP/JSON form of a protobuf request (hex ids, as the OTLP JSON encoding requires)."""
    doc = MessageToDict(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return json.dumps(doc).encode()


def _send_all(server: Server) -> None:
    http_client = HTTPClient(server.http_port)
    try:
        assert http_client.post(_trace(TRACE_HTTP_PROTO))[0] == 200
        assert http_client.post(_as_json(_trace(TRACE_HTTP_JSON)), "application/json")[0] == 200
    finally:
        http_client.close()
    grpc_client = GRPCClient(server.grpc_port)
    try:
        grpc_client.export(_trace(TRACE_GRPC))
    finally:
        grpc_client.close()


def _leaks(raw: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in raw]


def test_no_secret_reaches_the_backend_in_serve_events_or_metrics(
    otlp_receiver: RecordingOTLPReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every byte of every log and metric request serve's exporters sent is free of the API key, e-mail address and
    file path, while the verdict events and metrics did arrive and the forwarded tool spans do hold the secrets."""
    endpoint = f"http://{otlp_receiver.endpoint}"
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true",
               # Short export delays so the test waits tens of milliseconds, not the SDK defaults (1 s, 60 s).
               "OTEL_BLRP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)  # the SDK exporters read os.environ themselves, as in the command
    logger_provider, meter_provider = build_providers(environ, service_resource(DEFAULT_SERVICE_NAME))
    forwarder = Forwarder(environ)
    events: list[VerdictEvent] = []
    server = Server(LoopGuardConfig(signature_key=KEY), grpc_address="127.0.0.1:0", http_address="127.0.0.1:0",
                    idle=30, logger_provider=logger_provider, meter_provider=meter_provider, forward=forwarder)
    server.add_listener(events.append)
    try:
        with server:
            _send_all(server)
        # stop() drained: every trace is finished and its final metrics recorded.
        expected = {(f"{e.trace_id:032x}", e.steps, e.intervention.action if e.intervention else "none")
                    for e in events}
        assert {key[0] for key in expected} == {f"{t:032x}" for t in (TRACE_HTTP_PROTO, TRACE_HTTP_JSON, TRACE_GRPC)}
        assert len(expected) >= 6
        assert logger_provider.force_flush(30_000) and meter_provider.force_flush(30_000)
        assert otlp_receiver.wait_for(
            lambda r: expected <= received_verdict_keys(r.log_records())
            and {"loopguard.tool_calls", "loopguard.verdicts", "loopguard.trace.steps"}
            <= {p["name"] for p in r.metric_points()}
            # JSON requests cannot be forwarded over gRPC: the two protobuf traces arrive, 7 spans each.
            and len(r.spans()) == 2 * (CALLS + 1),
            60.0,
        ), "not everything arrived"
    finally:
        forwarder.close()
        logger_provider.shutdown()
        meter_provider.shutdown()

    assert forwarder.skipped == 1
    for kind in (LOGS, METRICS):
        requests = otlp_receiver.received(kind)
        assert requests, kind
        for received in requests:
            assert _leaks(received.request.SerializeToString()) == [], kind
    records = [r for r in otlp_receiver.log_records() if r["event_name"] == "loopguard.verdict"]
    assert all(isinstance(r["attributes"].get("loopguard.signature"), str) for r in records)
    # Positive control: the scanner finds the secrets where the agent put them (the forwarded tool spans).
    tool_spans_with_secrets = 0
    for received in otlp_receiver.received(TRACES):
        for resource_spans in received.request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if span.name.startswith("execute_tool"):
                        tool_spans_with_secrets += _leaks(span.SerializeToString()) == list(SECRETS)
    assert tool_spans_with_secrets == 2 * CALLS


def _digests(key: bytes) -> list[str]:
    with Harness(LoopGuardConfig(signature_key=key)) as h:
        _send_all(h.server)
    records = [d.log_record.attributes for d in h.logs.get_finished_logs()]
    return [a["loopguard.signature"] for a in records if "loopguard.signature" in a]


def test_serve_signature_digests_are_keyed() -> None:
    """The same spans give the same digests under the same signature_key and disjoint ones under another key, and no
    digest is an unkeyed hash of the arguments."""
    first = _digests(b"key-one-0123456789abcdef")
    again = _digests(b"key-one-0123456789abcdef")
    other = _digests(b"key-two-0123456789abcdef")
    assert first and first == again
    assert len(other) == len(first) and set(other).isdisjoint(first)
    for digest in first:
        assert not _leaks(digest.encode())
    for text in (ARGUMENTS, "search\x1f" + ARGUMENTS, RESULT):
        for algorithm in ("sha256", "md5", "sha1", "blake2b"):
            assert hashlib.new(algorithm, text.encode()).hexdigest()[:32] not in first


def test_secret_traces_are_judged_stuck_over_every_protocol() -> None:
    """Each secret-carrying trace is judged stuck, whichever protocol brought it (so events did carry its calls)."""
    with Harness(LoopGuardConfig(signature_key=KEY)) as h:
        _send_all(h.server)
        stuck = {e.trace_id for e in h.events if e.verdict.kind == "stuck"}
    assert stuck == {TRACE_HTTP_PROTO, TRACE_HTTP_JSON, TRACE_GRPC}
