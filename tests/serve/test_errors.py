"""Malformed, truncated, oversized and wrongly typed requests get OTLP errors, and the server keeps serving."""

from __future__ import annotations

import gzip
import json
import socket

import grpc
import pytest
from google.rpc import status_pb2

from otel_loopguard import cli
from otel_loopguard.serve.server import DEFAULT_GRPC, DEFAULT_HTTP, Server, command_settings

from ._support import FIXTURE_FILES, Harness, grpc_export, post, to_proto

GOOD = FIXTURE_FILES[0]


def _still_serves(h: Harness) -> None:
    status, _, _ = post(h.server.http_port, GOOD.read_bytes(), "application/json")
    assert status == 200
    grpc_export(h.server.grpc_port, to_proto(json.loads(GOOD.read_text())))


@pytest.mark.parametrize(
    ("body", "content_type", "gzip_body"),
    [
        (b"\x0a\x05\x0a\x03\x0a\x01", "application/x-protobuf", False),  # truncated nested message
        (b"\xff\xff\xff", "application/x-protobuf", False),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json", False),
        (b'{"resourceSpans": ', "application/json", True),
    ],
    ids=["truncated-proto", "garbage-proto", "bad-json-id", "truncated-json-gzip"],
)
def test_malformed_http_body_gets_400_with_status(body: bytes, content_type: str, gzip_body: bool) -> None:
    """A malformed body is answered 400 with a google.rpc.Status in the request's encoding."""
    with Harness() as h:
        status, reply, reply_type = post(h.server.http_port, body, content_type, gzip_body=gzip_body)
        assert status == 400
        assert reply_type == content_type
        if content_type == "application/json":
            doc = json.loads(reply)
            assert doc["code"] == 3 and doc["message"]
        else:
            parsed = status_pb2.Status.FromString(reply)
            assert parsed.code == 3 and parsed.message
        assert h.server.stats().rejected_requests == 1
        _still_serves(h)


def test_truncated_gzip_gets_400() -> None:
    """A gzip stream cut short is a 400, not a hang or a crash."""
    with Harness() as h:
        data = gzip.compress(GOOD.read_bytes())[:-20]
        status, _, _ = post(h.server.http_port, data, "application/json",
                            headers={"Content-Encoding": "gzip"})
        assert status == 400
        _still_serves(h)


def test_wrong_content_type_gets_415() -> None:
    """A text/plain body is refused with 415."""
    with Harness() as h:
        status, reply, _ = post(h.server.http_port, b"hello", "text/plain")
        assert status == 415
        assert status_pb2.Status.FromString(reply).code == 3
        _still_serves(h)


def test_oversized_body_and_gzip_bomb_get_413() -> None:
    """A body over max_body, and a small gzip body that inflates past it, are refused with 413."""
    with Harness(max_body=64 * 1024) as h:
        status, _, _ = post(h.server.http_port, b"{" + b" " * (70 * 1024) + b"}", "application/json")
        assert status == 413
        status, _, _ = post(h.server.http_port, b" " * (1024 * 1024), "application/json", gzip_body=True)
        assert status == 413
        assert h.server.stats().rejected_requests == 2
        status, _, _ = post(h.server.http_port, GOOD.read_bytes(), "application/json")
        assert status == 200


def test_wrong_path_gets_404_and_broken_connection_is_survived() -> None:
    """Another path is a 404; a client that hangs up mid-body does not stop the server."""
    with Harness() as h:
        port = h.server.http_port
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"resourceSpans\"")
        import urllib.request
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/logs", data=b"{}",
                                         headers={"Content-Type": "application/json"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=60)
        assert info.value.code == 404
        _still_serves(h)


def test_grpc_malformed_is_invalid_argument_and_oversized_is_resource_exhausted() -> None:
    """Over gRPC a malformed request is INVALID_ARGUMENT and one over max_body is RESOURCE_EXHAUSTED."""
    with Harness(max_body=64 * 1024) as h:
        with pytest.raises(grpc.RpcError) as info:
            grpc_export(h.server.grpc_port, b"\x0a\x05\x0a\x03\x0a\x01")
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as info:
            grpc_export(h.server.grpc_port, b"\x0a" + b"\xff" * 70_000)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        _still_serves(h)


def test_binds_loopback_by_default() -> None:
    """The command's and the Server's default addresses are 127.0.0.1, and a bound receiver reports it."""
    args = cli.build_parser().parse_args(["serve"])
    command = command_settings(args, {})
    assert command.grpc == DEFAULT_GRPC == "127.0.0.1:4317"
    assert command.http == DEFAULT_HTTP == "127.0.0.1:4318"
    with Server(grpc_address="", http_address="127.0.0.1:0") as server:
        assert server.http_host == "127.0.0.1"
        assert server.grpc_port is None


def test_disabled_receiver_and_bad_arguments() -> None:
    """An empty address disables a receiver; a bad address or idle raises ValueError."""
    with Harness(grpc_on=False) as h:
        assert h.server.grpc_port is None and h.server.http_port
    with pytest.raises(ValueError, match="HOST:PORT"):
        Server(http_address="localhost")
    with pytest.raises(ValueError, match="idle"):
        Server(idle=0)
