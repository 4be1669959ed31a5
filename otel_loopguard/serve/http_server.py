"""OTLP/HTTP trace receiver for ``serve``: ``POST /v1/traces`` with protobuf or JSON bodies, optionally gzip.

Errors follow the OTLP/HTTP specification: 400 with a ``google.rpc.Status`` body (encoded like the request)
for a malformed request, 413 for a body over the limit, 415 for another content type, 404 for another path.
A handler never lets an exception escape: a bad request must not stop the server.
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ..conventions.span import SpanRecord
from ..errors import InputError
from ..otlp.proto import decode_proto_request
from ..otlp.read import decode_json_request

_logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_INVALID_ARGUMENT = 3
_RESOURCE_EXHAUSTED = 8
_EMPTY_PROTO_RESPONSE = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

# Called with the decoded spans and the raw (decompressed) body and its content type (for forwarding).
Sink = Callable[[list[SpanRecord], bytes, str], None]


class RequestTooLarge(Exception):
    """The body (or its decompressed form) is over the server's limit."""


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress a gzip body, refusing to inflate past ``limit`` bytes (a small bomb must not exhaust memory).

    Raises:
        RequestTooLarge: the decompressed body is over ``limit``.
        InputError: the body is not valid gzip.
    """
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
        if len(out) > limit:
            raise RequestTooLarge()
        if not inflater.eof:
            raise InputError("truncated gzip body", source="request")
    except zlib.error as exc:
        raise InputError(f"bad gzip body: {exc}", source="request") from None
    return out


def _status_body(content_type: str, code: int, message: str) -> bytes:
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    body: bytes = status_pb2.Status(code=code, message=message).SerializeToString()
    return body


class OTLPHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that hands decoded span batches to ``sink``.

    Args:
        address: (host, port) to bind; port 0 picks a free one.
        sink: receives each accepted request's spans.
        max_body: the largest accepted body, before and after decompression, in bytes.
        on_reject: called once per refused request.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sink: Sink, max_body: int, on_reject: Callable[[], None]) -> None:
        self.sink = sink
        self.max_body = max_body
        self.on_reject = on_reject
        super().__init__(address, _Handler)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve on a daemon thread."""
        # A short poll interval keeps stop() quick; the cost is a select() call ten times a second when idle.
        self._thread = threading.Thread(target=self.serve_forever, args=(0.1,), name="loopguard-serve-http",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting requests and close the socket (requests in progress finish on their threads)."""
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    server: OTLPHTTPServer
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes; with Nagle on, each reply would wait for a delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request on stderr would drown the service's own output

    def do_POST(self) -> None:
        try:
            self._post()
        except Exception as exc:
            _logger.warning("otel-loopguard serve: request failed: %s", exc, exc_info=exc)
            try:
                self._reply(500, PROTOBUF, _status_body(PROTOBUF, 13, "internal error"), close=True)
            except Exception:  # noqa: BLE001 - the client may be gone
                pass

    def _post(self) -> None:
        server = self.server
        if self.path.split("?", 1)[0] != TRACES_PATH:
            self._refuse(404, PROTOBUF, 5, f"unknown path {self.path!r}; traces go to {TRACES_PATH}")
            return
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type not in (PROTOBUF, JSON):
            self._refuse(415, PROTOBUF, _INVALID_ARGUMENT,
                         f"unsupported content type {content_type!r}; use {PROTOBUF} or {JSON}")
            return
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            self._refuse(411, content_type, _INVALID_ARGUMENT, "Content-Length is required")
            return
        try:
            length = int(length_header)
            if length < 0:
                raise ValueError(length_header)
        except ValueError:
            self._refuse(400, content_type, _INVALID_ARGUMENT, f"bad Content-Length {length_header!r}")
            return
        if length > server.max_body:
            self._refuse(413, content_type, _RESOURCE_EXHAUSTED,
                         f"body of {length} bytes is over the limit of {server.max_body}")
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self._refuse(400, content_type, _INVALID_ARGUMENT, "body shorter than Content-Length")
            return
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = gunzip(body, server.max_body)
            elif encoding != "identity":
                self._refuse(415, content_type, _INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding!r}")
                return
            spans = decode_json_request(body) if content_type == JSON else decode_proto_request(body)
        except RequestTooLarge:
            self._refuse(413, content_type, _RESOURCE_EXHAUSTED,
                         f"decompressed body is over the limit of {server.max_body} bytes")
            return
        except InputError as exc:
            self._refuse(400, content_type, _INVALID_ARGUMENT, str(exc))
            return
        server.sink(spans, body, content_type)
        self._reply(200, content_type, b"{}" if content_type == JSON else _EMPTY_PROTO_RESPONSE)

    def _refuse(self, status: int, content_type: str, code: int, message: str) -> None:
        self.server.on_reject()
        # An unread body would be parsed as the next request on a kept-alive connection: close instead.
        self._reply(status, content_type, _status_body(content_type, code, message), close=True)

    def _reply(self, status: int, content_type: str, body: bytes, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)
