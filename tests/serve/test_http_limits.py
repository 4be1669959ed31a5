"""The OTLP/HTTP receiver as a production server: chunked bodies, request framing, timeouts, the connection cap,
the listen backlog and keep-alive; and the gRPC receiver's equivalent limits."""

from __future__ import annotations

import gzip
import http.client
import json
import select
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import status_pb2

from otel_loopguard.errors import InputError
from otel_loopguard.serve.request import RequestTooLarge, gunzip
from otel_loopguard.serve.settings import ServeSettings, default_max_connections
from tests.support.external import unavailable

from ._net import closed_by_peer, dribble_until_closed, parse_reply, raw_request, read_until_closed
from ._support import EXPORT_METHOD, FIXTURE_FILES, Harness, post, to_proto

GOOD = FIXTURE_FILES[0]
GOOD_SPANS = sum(len(ss["spans"]) for rs in json.loads(GOOD.read_text())["resourceSpans"] for ss in rs["scopeSpans"])
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def _post_chunked(port: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        # An iterable body with encode_chunked: http.client sends Transfer-Encoding: chunked, no Content-Length.
        conn.request("POST", "/v1/traces", _pieces(body, 1000), {"Content-Type": content_type, **(headers or {})},
                     encode_chunked=True)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_chunked_body_is_accepted() -> None:
    """A chunked body (what Node.js OTLP/HTTP exporters send) is read whole: 200 and every span counted."""
    with Harness() as h:
        assert _post_chunked(h.server.http_port, GOOD.read_bytes(), "application/json") == 200
        body = to_proto(json.loads(GOOD.read_text()))
        assert _post_chunked(h.server.http_port, gzip.compress(body), "application/x-protobuf",
                             {"Content-Encoding": "gzip"}) == 200
        assert h.server.stats().spans == 2 * GOOD_SPANS


def test_chunked_body_over_the_limit_gets_413() -> None:
    """Without a Content-Length the limit is applied while reading: 413, and the server keeps serving."""
    with Harness(max_body=64 * 1024) as h:
        assert _post_chunked(h.server.http_port, b" " * (200 * 1024), "application/json") == 413
        assert h.server.stats().rejected_requests == 1
        assert post(h.server.http_port, GOOD.read_bytes(), "application/json")[0] == 200


def test_multi_member_gzip_is_read_whole() -> None:
    """A gzip body of several members (RFC 1952: concatenated members) decodes as their concatenation."""
    data = GOOD.read_bytes()
    third = len(data) // 3
    # Cut inside the JSON document: any member alone is invalid JSON, so only reading all three can succeed.
    body = b"".join(gzip.compress(part) for part in (data[:third], data[third:2 * third], data[2 * third:]))
    with Harness() as h:
        status, _, _ = post(h.server.http_port, body, "application/json", headers={"Content-Encoding": "gzip"})
        assert status == 200
        assert h.server.stats().spans == GOOD_SPANS


def test_multi_member_gzip_counts_every_member_against_the_limit() -> None:
    """Two members each under max_body whose sum is over it: 413 (the limit is on the whole inflated body)."""
    member = gzip.compress(b" " * (40 * 1024))
    with Harness(max_body=64 * 1024) as h:
        status, reply, _ = post(h.server.http_port, member + member, "application/json",
                                headers={"Content-Encoding": "gzip"})
        assert status == 413
        assert json.loads(reply)["code"] == 8  # RESOURCE_EXHAUSTED
        # Trailing bytes that are not a gzip member are an error, not silently ignored.
        status, _, _ = post(h.server.http_port, gzip.compress(GOOD.read_bytes()) + b"garbage", "application/json",
                            headers={"Content-Encoding": "gzip"})
        assert status == 400


def test_transfer_encoding_with_content_length_is_refused() -> None:
    """Both framings in one request (request smuggling) get 400 and the connection closed; nothing is judged.

    The request says Content-Length: 0 and Transfer-Encoding: chunked, and what follows is a whole second request. A
    server trusting Content-Length (http.server did) answers an empty export with 200 and then runs the smuggled
    request, which a proxy trusting Transfer-Encoding took for the first request's body."""
    smuggled = HEAD + b"\r\nContent-Length: %d\r\n\r\n" % len(GOOD.read_bytes()) + GOOD.read_bytes()
    with Harness() as h:
        status, _, _ = raw_request(h.server.http_port, HEAD.replace(b"json", b"x-protobuf")
                                   + b"\r\nContent-Length: 0\r\nTransfer-Encoding: chunked", smuggled)
        assert status == 400
        assert h.server.stats().spans == 0


def test_keep_alive_serves_many_requests_on_one_connection() -> None:
    """Three requests over one HTTP/1.1 connection: all answered, one connection accepted."""
    with Harness() as h:
        conn = http.client.HTTPConnection("127.0.0.1", h.server.http_port, timeout=10)
        for _ in range(3):
            conn.request("POST", "/v1/traces", GOOD.read_bytes(), {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            assert response.getheader("Connection", "").lower() != "close"
        conn.close()
        stats = h.server.connection_stats()
        assert stats is not None and stats.accepted == 1


def test_header_timeout_closes_a_client_dribbling_its_headers() -> None:
    """A client sending one header byte every 50 ms is disconnected once header_timeout (0.5 s) has passed since its
    first byte, although it never stops sending."""
    settings = ServeSettings(header_timeout=0.5)
    with Harness(settings=settings) as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            start = time.monotonic()
            assert dribble_until_closed(sock, HEAD + b"\r\nX-Slow: " + b"a" * 10_000, every=0.05, within=20)
            # Not before the timeout (a lower bound only: a loaded machine may close it later).
            assert time.monotonic() - start >= 0.5
        stats = h.server.connection_stats()
        assert stats is not None and stats.header_timeouts == 1
        assert post(h.server.http_port, GOOD.read_bytes(), "application/json")[0] == 200


def test_silent_new_connection_is_closed_after_header_timeout() -> None:
    """A connection that sends nothing at all is closed after header_timeout (the header clock starts at accept)."""
    with Harness(settings=ServeSettings(header_timeout=0.5)) as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            assert closed_by_peer(sock, within=20)


def test_idle_keep_alive_connection_is_closed_after_idle_timeout() -> None:
    """After a request is answered, a connection without a next request is closed after idle_timeout."""
    with Harness(settings=ServeSettings(idle_timeout=0.5)) as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            body = GOOD.read_bytes()
            sock.sendall(HEAD + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            start = time.monotonic()
            reply = read_until_closed(sock)
            assert time.monotonic() - start >= 0.5
        assert parse_reply(reply)[0] == 200
        stats = h.server.connection_stats()
        assert stats is not None and stats.idle_closed == 1


def test_slow_body_gets_408() -> None:
    """A body that does not arrive within body_timeout is answered 408 with a google.rpc.Status, and closed."""
    with Harness(settings=ServeSettings(body_timeout=0.5)) as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            sock.sendall(HEAD.replace(b"json", b"x-protobuf") + b"\r\nContent-Length: 100\r\n\r\n\x0a\x05")
            status, _, body = parse_reply(read_until_closed(sock))
        assert status == 408
        assert status_pb2.Status.FromString(body).code == 4  # DEADLINE_EXCEEDED
        stats = h.server.connection_stats()
        assert stats is not None and stats.body_timeouts == 1


def test_connection_cap_replaces_idle_connections_and_refuses_when_all_are_busy() -> None:
    """At max_connections a new connection replaces the longest-idle one (here: clients that never finish their
    headers), so a real request still gets through; when every connection has a request in progress, the new one is
    closed at once."""
    with Harness(settings=ServeSettings(max_connections=4)) as h:
        port = h.server.http_port
        holders = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
        try:
            for sock in holders:
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHo")
            assert post(port, GOOD.read_bytes(), "application/json")[0] == 200
            # The first holder was the longest idle: it was closed to make room.
            assert closed_by_peer(holders[0], within=10)
            stats = h.server.connection_stats()
            assert stats is not None and stats.replaced >= 1 and stats.open <= 4
        finally:
            for sock in holders:
                sock.close()
    with Harness(settings=ServeSettings(max_connections=2, body_timeout=30)) as h:
        port = h.server.http_port
        busy = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
        try:
            for sock in busy:
                # Headers complete, body not sent: a request in progress. The server answers "100 Continue" when it
                # starts reading the body, which proves the request is in progress before the third client connects.
                sock.sendall(HEAD + b"\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
                assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
            with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
                assert closed_by_peer(third, within=10)
            stats = h.server.connection_stats()
            assert stats is not None and stats.refused == 1
        finally:
            for sock in busy:
                sock.close()


def test_default_connection_cap_leaves_room_at_a_1024_file_limit() -> None:
    """At a 1 024-file limit each receiver takes (1024 - 128) // 2 = 448 connections, so both together (896) leave
    128 descriptors for listeners, exporters and the interpreter; a large limit is capped at 1 024 per receiver."""
    assert default_max_connections(1024) == 448
    assert default_max_connections(1_048_576) == 1024
    assert default_max_connections(100) == 16


def test_listen_backlog_is_the_configured_length() -> None:
    """The listening socket's accept queue is the configured backlog (``ss`` shows it as Send-Q of a listener);
    http.server's default was 5."""
    if shutil.which("ss") is None:
        unavailable("ss is not installed (apt-get install -y iproute2)")
    with Harness(settings=ServeSettings(backlog=777), grpc_on=False) as h:
        out = subprocess.run(["ss", "-Hltn", f"sport = :{h.server.http_port}"], capture_output=True, text=True,
                             check=True).stdout.split()
        # State Recv-Q Send-Q Local Peer
        assert out[0] == "LISTEN" and out[2] == "777", out


def test_other_methods_get_405() -> None:
    """GET on the traces path is 405 with Allow: POST."""
    with Harness() as h:
        status, headers, body = raw_request(h.server.http_port, b"GET /v1/traces HTTP/1.1\r\nHost: x")
        assert status == 405 and headers["allow"] == "POST"
        assert status_pb2.Status.FromString(body).code == 12  # UNIMPLEMENTED


def test_half_close_inside_body_gets_400() -> None:
    """A client that ends its side inside the body gets an answer (400: body shorter than Content-Length)."""
    with Harness() as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            sock.sendall(HEAD + b"\r\nContent-Length: 4096\r\n\r\n{\"resourceSpans\"")
            sock.shutdown(socket.SHUT_WR)
            status, _, body = parse_reply(read_until_closed(sock))
        assert status == 400 and json.loads(body)["message"] == "body shorter than Content-Length"


def _raw_export(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    """The OTLP/gRPC Export method of ``channel``, taking and returning serialised messages."""
    return channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)


def _export_then_reconnect_after_goaway(settings: ServeSettings) -> None:
    """Export once, wait until the server ends the connection, export again: both requests are served."""
    with Harness(settings=settings, http_on=False) as h:
        with grpc.insecure_channel(f"127.0.0.1:{h.server.grpc_port}") as channel:
            export = _raw_export(channel)
            export(to_proto(json.loads(GOOD.read_text())), timeout=10)
            went_idle = threading.Event()
            # The channel goes IDLE when the server's GOAWAY ends its only connection.
            channel.subscribe(lambda state: went_idle.set() if state == grpc.ChannelConnectivity.IDLE else None)
            assert went_idle.wait(20)
            export(to_proto(json.loads(GOOD.read_text())), timeout=10)
        assert h.server.stats().spans == 2 * GOOD_SPANS


def test_grpc_idle_connection_is_closed_after_idle_timeout() -> None:
    """gRPC: a connection idle past idle_timeout gets a GOAWAY (max_connection_idle), then a new call reconnects."""
    _export_then_reconnect_after_goaway(ServeSettings(idle_timeout=0.5))


def test_grpc_connection_cap_refuses_connections_beyond_it() -> None:
    """gRPC: beyond max_connections new connections are closed by gRPC's core; the held ones keep working."""
    with Harness(settings=ServeSettings(max_connections=1), http_on=False) as h:
        body = to_proto(json.loads(GOOD.read_text()))
        with grpc.insecure_channel(f"127.0.0.1:{h.server.grpc_port}") as first:
            export = _raw_export(first)
            export(body, timeout=10)
            with pytest.raises(grpc.RpcError) as info:
                # A second channel is a second connection (distinct channel arguments keep it from being shared).
                with grpc.insecure_channel(f"127.0.0.1:{h.server.grpc_port}",
                                           options=[("grpc.channel_id", 2)]) as second:
                    _raw_export(second)(body, timeout=3)
            assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            export(body, timeout=10)
        assert h.server.stats().spans == 2 * GOOD_SPANS


def test_gzip_helper_refuses_a_bomb_member_after_a_small_one() -> None:
    """The limit covers every member: a small member followed by a bomb is refused without inflating the bomb."""
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))
    with pytest.raises(RequestTooLarge):
        gunzip(gzip.compress(b"{}") + bomb, 64 * 1024)
    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"") + gzip.compress(b"cd"), 4) == b"abcd"
    with pytest.raises(InputError, match="truncated"):
        gunzip(gzip.compress(b"ab") + gzip.compress(b"cd")[:-3], 100)


def test_grpc_max_connection_age_sends_a_goaway() -> None:
    """gRPC: with grpc_max_connection_age set, a connection is ended (GOAWAY) after that age even though idle_timeout
    is far away; the next call reconnects."""
    _export_then_reconnect_after_goaway(ServeSettings(grpc_max_connection_age=0.5, idle_timeout=600))


def test_grpc_calls_beyond_max_concurrent_rpcs_get_resource_exhausted() -> None:
    """gRPC: with one call in progress (held inside serve) and grpc_max_concurrent_rpcs = 1, a second call is refused
    with RESOURCE_EXHAUSTED; once the first finishes, calls succeed again."""
    entered, release = threading.Event(), threading.Event()

    def hold(body: bytes, content_type: str) -> None:  # --forward runs after judging, on the serving thread
        entered.set()
        release.wait(30)

    body = to_proto(json.loads(GOOD.read_text()))
    with Harness(settings=ServeSettings(grpc_max_concurrent_rpcs=1), http_on=False, forward=hold) as h:
        with grpc.insecure_channel(f"127.0.0.1:{h.server.grpc_port}") as channel:
            export = _raw_export(channel)
            first = export.future(body, timeout=30)
            assert entered.wait(10)
            with pytest.raises(grpc.RpcError) as info:
                export(body, timeout=10)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            release.set()
            first.result()
            export(body, timeout=10)


def test_http_bodies_beyond_max_concurrent_requests_wait_unread() -> None:
    """HTTP: with one request held inside serve and max_concurrent_requests = 1, a second request's body is not read
    (its "100 Continue" does not come) until the first finishes; then it is served."""
    entered, release = threading.Event(), threading.Event()

    def hold(body: bytes, content_type: str) -> None:
        entered.set()
        release.wait(30)

    data = GOOD.read_bytes()
    with Harness(settings=ServeSettings(max_concurrent_requests=1), grpc_on=False, forward=hold) as h:
        first = threading.Thread(target=post, args=(h.server.http_port, data, "application/json"))
        first.start()
        assert entered.wait(10)
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            sock.sendall(HEAD + b"\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(data))
            # Held back while the first request holds the only place (a longer wait would only make this surer).
            assert not select.select([sock], [], [], 0.3)[0]
            release.set()
            assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
            sock.sendall(data)
            status, _, _ = parse_reply(sock.recv(65536))
            assert status == 200
        first.join(10)
        assert h.server.stats().spans == 2 * GOOD_SPANS
