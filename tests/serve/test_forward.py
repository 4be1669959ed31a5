"""``--forward``: received spans go on unchanged to the OTLP traces endpoint."""

from __future__ import annotations

import json

import pytest

from otel_loopguard.serve.server import Forwarder
from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._support import FIXTURE_FILES, Harness, grpc_export, post, to_proto


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_forward_passes_spans_on_unchanged(protocol: str) -> None:
    """Spans received over HTTP and gRPC reach the traces endpoint byte-for-byte, and are still judged."""
    path = FIXTURE_FILES[0]
    body = to_proto(json.loads(path.read_text()))
    with RecordingOTLPReceiver() as receiver:
        if protocol == "grpc":
            environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}"}
            forwarder = Forwarder(environ)
            with Harness(forward=forwarder) as h:
                post(h.server.http_port, body, "application/x-protobuf")
                grpc_export(h.server.grpc_port, body)
                status, _, _ = post(h.server.http_port, path.read_bytes(), "application/json")
                assert status == 200
                assert h.server.stats().spans == 3 * len(json.loads(path.read_text())["resourceSpans"][0]
                                                          ["scopeSpans"][0]["spans"])
            forwarder.close()
            assert [r.request.SerializeToString() for r in receiver.received("traces")] == [body, body]
            assert forwarder.skipped == 1  # JSON cannot go over gRPC unchanged
        else:
            # The recording backend speaks gRPC only: forward to a second serve's HTTP receiver instead.
            with Harness() as sink:
                forwarder = Forwarder({"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                                       "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server.http_port}"})
                with Harness(forward=forwarder) as h:
                    post(h.server.http_port, body, "application/x-protobuf")
                    post(h.server.http_port, path.read_bytes(), "application/json")
                assert h.server.stats().spans > 0
                assert sink.server.stats().spans == h.server.stats().spans
