"""OTLP/HTTP trace receiver for ``serve``: ``POST /v1/traces``, protobuf or JSON, identity or gzip, on aiohttp.

It runs on aiohttp's server (keep-alive, chunked bodies, a C parser that refuses request smuggling, TLS; the
choice is explained in the documentation's architecture page) and adds what aiohttp lacks: a connection cap, a
header-read timeout and a body-read timeout.

Connections. This module accepts connections itself (``loop.sock_accept``) and hands each to aiohttp:

* at most ``max_connections`` are open (TLS handshakes included); at the cap a new connection replaces the
  connection that has been without a request in progress for the longest (a client dribbling headers or an idle
  keep-alive connection), and is closed at once only when every connection has a request in progress. So clients
  that hold connections without sending requests cannot lock out one that sends a request;
* ``header_timeout``: a new connection, or an idle one that starts a request, must finish its headers (and its TLS
  handshake) within it; ``idle_timeout``: a connection without a request in progress is closed after it;
  ``body_timeout``: one request body must arrive within it (answered ``408``);
* at most ``max_concurrent_requests`` bodies are read and decoded at once (the others wait, unread, in the
  socket buffers), so memory for bodies is bounded by that times ``max_body`` (twice that with gzip);
* decoding and judging run on a small thread pool, so the event loop keeps accepting, timing out and reading.

Answers follow the OTLP/HTTP specification: 200 with an empty ``ExportTraceServiceResponse``; 400 with a
``google.rpc.Status`` body (encoded like the request) for a malformed request, 413 for a body over ``max_body``
(before or after decompression), 415 for another content type or encoding, 401 without the bearer token, 404 for
another path, 405 for another method, 408 for a body slower than ``body_timeout``. A refused request's connection
is closed (its body may be unread). A handler never lets an exception escape: a bad request never stops the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web
from aiohttp.streams import StreamReader

from ..errors import InputError
from .request import (
    DEADLINE_EXCEEDED,
    INTERNAL,
    INVALID_ARGUMENT,
    JSON,
    NOT_FOUND,
    PROTOBUF,
    RESOURCE_EXHAUSTED,
    TRACES_PATH,
    UNAUTHENTICATED,
    UNIMPLEMENTED,
    RequestTooLarge,
    Sink,
    decode,
    status_body,
    success_body,
)
from .settings import BearerToken, ServeSettings

_logger = logging.getLogger(__name__)

__all__ = ["ConnectionStats", "OTLPHTTPServer"]

_READ_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_SERVER_HEADER = "otel-loopguard"
# A request parsed from the bytes before a half-close starts on a later loop iteration; this is long enough.
_EOF_GRACE = 0.1


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """What the HTTP receiver did with connections (a snapshot).

    Attributes:
        accepted: connections accepted.
        open: connections open now.
        replaced: connections closed to make room for a new one at ``max_connections``.
        refused: new connections closed at once at ``max_connections`` (every open one had a request in progress).
        header_timeouts: connections closed because headers (or a TLS handshake) took over ``header_timeout``.
        idle_closed: connections closed after ``idle_timeout`` without a request.
        body_timeouts: requests whose body took over ``body_timeout``.
        unauthenticated: requests refused for a missing or wrong bearer token.
        accept_errors: failed ``accept`` calls (for example at the open-file limit).
    """

    accepted: int
    open: int
    replaced: int
    refused: int
    header_timeouts: int
    idle_closed: int
    body_timeouts: int
    unauthenticated: int
    accept_errors: int


@dataclass(frozen=True, slots=True)
class _Processed:
    """What a worker thread hands back to the event loop for one request: the HTTP status and the reply body (an
    error message unless the status is 200)."""

    status: int
    body: bytes


class _Slot:
    """One accepted connection, from ``accept`` to close (through its TLS handshake)."""

    __slots__ = ("busy", "header_since", "idle_since", "peer_eof", "protocol", "reading", "sock", "truncated")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.protocol: _Connection | None = None
        self.busy = False
        # When the headers (or the handshake) of the next request started arriving; a new connection starts now.
        self.header_since: float | None = now
        self.idle_since = now
        self.reading: StreamReader | None = None
        self.peer_eof: float | None = None
        self.truncated = False


class _Connection(web.RequestHandler):
    """aiohttp's protocol for one connection, telling its slot when request bytes arrive and when the peer
    half-closes."""

    def __init__(self, slot: _Slot, manager: web.Server, owner: OTLPHTTPServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.slot = slot
        self.owner = owner
        slot.protocol = self

    def data_received(self, data: bytes) -> None:
        slot = self.slot
        if not slot.busy and slot.header_since is None:
            slot.header_since = self.owner.loop_time()
        super().data_received(data)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        # aiohttp closes on a half-close; a client that half-closes after its request still gets its answer, and one
        # that half-closes inside its body gets a 400 (the body ended before its length) instead of silence. The
        # connection is closed after that answer, or by the sweeper when no request follows.
        slot = self.slot
        slot.peer_eof = self.owner.loop_time()
        reading = slot.reading
        if reading is not None and not reading.is_eof():
            slot.truncated = True
            reading.feed_eof()
        # TLS has no half-close (asyncio's SSL transport ignores the answer and warns about True).
        return None if self.owner.tls else True

    def log_exception(self, *args: Any, **kwargs: Any) -> None:
        # aiohttp reports a malformed request (bad framing, Transfer-Encoding with Content-Length, over-long
        # headers) as an error with a traceback; the client gets its 400, the log gets a debug line.
        kwargs.pop("exc_info", None)
        _logger.debug(*args, **kwargs)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.owner.forget(self.slot)
        super().connection_lost(exc)


class OTLPHTTPServer:
    """An OTLP/HTTP receiver on its own event-loop thread, handing decoded span batches to ``sink``.

    Args:
        address: (host, port) to bind; port 0 picks a free one.
        sink: receives each accepted request's spans (on a worker thread).
        on_reject: called once per refused request.
        settings: limits, TLS and the bearer token.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, address: tuple[str, int], sink: Sink, on_reject: Callable[[], None],
                 settings: ServeSettings) -> None:
        self.sink = sink
        self.on_reject = on_reject
        self.settings = settings
        self.max_connections = settings.connections()
        self._token: BearerToken | None = settings.bearer_token
        self._ssl: ssl.SSLContext | None = settings.tls.ssl_context() if settings.tls is not None else None
        self.tls = self._ssl is not None
        host, port = address
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family = infos[0][0] if infos else socket.AF_INET
        sockaddr = infos[0][4] if infos else address
        self._listener = socket.create_server(sockaddr[:2], family=family, backlog=settings.backlog)
        self._listener.setblocking(False)
        self.server_address: tuple[str, int] = cast(tuple[str, int], self._listener.getsockname()[:2])
        self._slots: set[_Slot] = set()
        self._opening: set[asyncio.Task[None]] = set()
        self._counts = dict.fromkeys(
            ("accepted", "replaced", "refused", "header_timeouts", "idle_closed", "body_timeouts",
             "unauthenticated", "accept_errors"), 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        workers = min(8, settings.max_concurrent_requests)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="loopguard-serve-http")

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Serve on a daemon thread running the event loop; returns once it accepts connections."""
        self._thread = threading.Thread(target=self._run, name="loopguard-serve-http-loop", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise self._startup_error

    def stop(self, grace: float = 2.0) -> None:
        """Stop accepting, let requests in progress finish (up to ``grace`` seconds), close every connection."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread is not None and self._thread.is_alive():
            self._grace = grace
            loop.call_soon_threadsafe(stopping.set)
            self._thread.join()
        self.server_close()

    def server_close(self) -> None:
        """Close the listening socket and the worker threads (after :meth:`stop`, or when never started)."""
        self._listener.close()
        self._pool.shutdown(wait=True)

    def stats(self) -> ConnectionStats:
        """A snapshot of the connection counters."""
        return ConnectionStats(open=len(self._slots), **self._counts)

    def loop_time(self) -> float:
        """The event loop's clock (what the timeouts are measured on)."""
        assert self._loop is not None
        return self._loop.time()

    def forget(self, slot: _Slot) -> None:
        """A connection closed: free its place."""
        self._slots.discard(slot)

    # -- the event loop ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(), or logged if it happens later
            if not self._ready.is_set():
                self._startup_error = exc
                self._ready.set()
            else:
                _logger.error("otel-loopguard serve: the OTLP/HTTP receiver stopped: %s", exc, exc_info=exc)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._grace = 2.0
        settings = self.settings
        self._requests = asyncio.Semaphore(settings.max_concurrent_requests)
        self._protocol_options: dict[str, Any] = {
            # aiohttp's own keep-alive timer (armed when a connection opens and after each response) is a backstop:
            # the sweep below closes idle connections first (and counts them).
            "keepalive_timeout": settings.idle_timeout * 2 + 1,
            "auto_decompress": False,  # gzip is inflated here, within max_body, every member
            "access_log": None,
            # After a refusal with the body unread, read and drop what the client still sends for at most this long
            # (so it can read the answer rather than get a reset), then close.
            "lingering_time": 1.0,
            "max_line_size": 8190,
            "max_field_size": 8190,
        }
        self._web = web.Server(self._handle, **self._protocol_options)
        tasks = [asyncio.create_task(self._accept()), asyncio.create_task(self._sweep())]
        self._ready.set()
        await self._stopping.wait()
        # Stop watching the listener before cancelling the accept: a connection that becomes ready in the loop turn
        # of the cancellation would make asyncio set a result on the cancelled accept (InvalidStateError, logged
        # as a traceback on SIGTERM under load) and leak the accepted socket.
        self._loop.remove_reader(self._listener.fileno())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._listener.close()
        # Requests in progress finish (and are judged) before their connections close.
        await self._web.shutdown(self._grace)
        for slot in list(self._slots):
            self._close(slot)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(self._listener)
            except OSError as exc:
                self._counts["accept_errors"] += 1
                if exc.errno in _READ_ERRORS:
                    # Out of file descriptors (something besides this receiver holds them): make room if an idle
                    # connection can go, and wait a moment before accepting again rather than spinning.
                    victim = self._longest_idle()
                    if victim is not None:
                        self._close(victim)
                        self._counts["replaced"] += 1
                    await asyncio.sleep(0.05)
                else:
                    _logger.warning("otel-loopguard serve: accept failed: %s", exc)
                continue
            self._counts["accepted"] += 1
            if len(self._slots) >= self.max_connections:
                victim = self._longest_idle()
                if victim is None:
                    self._counts["refused"] += 1
                    sock.close()
                    continue
                self._close(victim)
                self._counts["replaced"] += 1
            slot = _Slot(sock, loop.time())
            self._slots.add(slot)
            # The loop keeps only weak references to tasks: hold each until its connection is set up.
            task = loop.create_task(self._open(slot))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(self, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: _Connection(slot, self._web, self, loop=loop, **self._protocol_options),
                slot.sock, ssl=self._ssl,
                ssl_handshake_timeout=self.settings.header_timeout if self._ssl is not None else None,
            )
        except Exception as exc:  # noqa: BLE001 - whatever failed, the slot must be freed or the cap fills up
            # A failed or timed-out TLS handshake (a wrong or missing client certificate, a plain-text client).
            _logger.debug("otel-loopguard serve: connection not established: %s", exc)
            self.forget(slot)
            with contextlib.suppress(OSError):
                slot.sock.close()

    def _longest_idle(self) -> _Slot | None:
        best: _Slot | None = None
        for slot in self._slots:
            if not slot.busy and (best is None or slot.idle_since < best.idle_since):
                best = slot
        return best

    def _close(self, slot: _Slot) -> None:
        self._slots.discard(slot)
        protocol = slot.protocol
        if protocol is not None and protocol.transport is not None:
            protocol.force_close()
            return
        # Not connected to aiohttp yet (a TLS handshake in progress): end the socket under the handshake.
        with contextlib.suppress(OSError):
            slot.sock.shutdown(socket.SHUT_RDWR)

    async def _sweep(self) -> None:
        settings = self.settings
        loop = asyncio.get_running_loop()
        tick = min(1.0, settings.header_timeout / 4, settings.idle_timeout / 4)
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            for slot in list(self._slots):
                if slot.busy:
                    continue
                if slot.peer_eof is not None and now - slot.peer_eof > _EOF_GRACE:
                    # Half-closed and no request came out of what it sent.
                    self._close(slot)
                elif slot.header_since is not None and now - slot.header_since > settings.header_timeout:
                    self._counts["header_timeouts"] += 1
                    self._close(slot)
                elif now - slot.idle_since > settings.idle_timeout:
                    self._counts["idle_closed"] += 1
                    self._close(slot)

    # -- requests ---------------------------------------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        slot = cast(_Connection, request.protocol).slot
        slot.busy = True
        slot.header_since = None
        try:
            try:
                response = await self._post(request, slot)
            except Exception as exc:
                _logger.warning("otel-loopguard serve: request failed: %s", exc, exc_info=exc)
                response = self._answer(500, PROTOBUF, status_body(PROTOBUF, INTERNAL, "internal error"), close=True)
            if slot.peer_eof is not None:
                response.force_close()
            return response
        finally:
            slot.busy = False
            slot.reading = None
            slot.truncated = False
            slot.idle_since = self.loop_time()
            slot.header_since = None

    def _answer(self, status: int, content_type: str, body: bytes, *, close: bool = False,
                headers: dict[str, str] | None = None) -> web.Response:
        response = web.Response(status=status, body=body, headers={"Content-Type": content_type,
                                                                   "Server": _SERVER_HEADER, **(headers or {})})
        if close:
            response.force_close()
        return response

    def _refuse(self, status: int, content_type: str, code: int, message: str,
                headers: dict[str, str] | None = None) -> web.Response:
        self.on_reject()
        # An unread body would be parsed as the next request on a kept-alive connection: close instead.
        return self._answer(status, content_type, status_body(content_type, code, message), close=True,
                            headers=headers)

    async def _post(self, request: web.BaseRequest, slot: _Slot) -> web.Response:
        if request.path != TRACES_PATH:
            return self._refuse(404, PROTOBUF, NOT_FOUND, f"unknown path {request.path!r}; traces go to {TRACES_PATH}")
        if request.method != "POST":
            return self._refuse(405, PROTOBUF, UNIMPLEMENTED, f"method {request.method} is not allowed; use POST",
                                {"Allow": "POST"})
        content_type = (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        reply_type = content_type if content_type in (PROTOBUF, JSON) else PROTOBUF
        tenant = self._tenant(request)
        if tenant is None:
            self._counts["unauthenticated"] += 1
            return self._refuse(401, reply_type, UNAUTHENTICATED, "missing or invalid bearer token",
                                {"WWW-Authenticate": 'Bearer realm="otel-loopguard"'})
        if content_type not in (PROTOBUF, JSON):
            return self._refuse(415, PROTOBUF, INVALID_ARGUMENT,
                                f"unsupported content type {content_type!r}; use {PROTOBUF} or {JSON}")
        encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("gzip", "identity"):
            return self._refuse(415, content_type, INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding!r}")
        limit = self.settings.max_body
        length = request.content_length
        if length is not None and length > limit:
            return self._refuse(413, content_type, RESOURCE_EXHAUSTED,
                                f"body of {length} bytes is over the limit of {limit}")
        async with self._requests:
            if request.headers.get("Expect", "").lower() == "100-continue":
                await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            slot.reading = request.content
            if slot.peer_eof is not None and not request.content.is_eof():
                slot.truncated = True  # the client half-closed before its body was complete
                request.content.feed_eof()
            try:
                body = await asyncio.wait_for(self._read_body(request.content, limit), self.settings.body_timeout)
            except RequestTooLarge:
                return self._refuse(413, content_type, RESOURCE_EXHAUSTED, f"body is over the limit of {limit} bytes")
            except asyncio.TimeoutError:
                self._counts["body_timeouts"] += 1
                return self._refuse(408, content_type, DEADLINE_EXCEEDED,
                                    f"the body did not arrive within {self.settings.body_timeout:g} s")
            except Exception as exc:  # noqa: BLE001 - the client went away or broke the framing mid-body
                _logger.debug("otel-loopguard serve: body not received: %s", exc)
                return self._refuse(400, content_type, INVALID_ARGUMENT, "the body could not be read")
            finally:
                slot.reading = None
            if slot.truncated or (length is not None and len(body) < length):
                return self._refuse(400, content_type, INVALID_ARGUMENT, "body shorter than Content-Length"
                                    if length is not None else "body ended before its last chunk")
            loop = asyncio.get_running_loop()
            done = await loop.run_in_executor(self._pool, self._process, body, content_type, encoding,
                                              request.remote or "", tenant)
        if done.status != 200:
            return self._refuse(done.status, content_type,
                                INVALID_ARGUMENT if done.status == 400 else RESOURCE_EXHAUSTED, done.body.decode())
        return self._answer(200, content_type, done.body)

    @staticmethod
    async def _read_body(content: StreamReader, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while chunk := await content.readany():
            size += len(chunk)
            if size > limit:
                raise RequestTooLarge()
            chunks.append(chunk)
        return b"".join(chunks)

    def _tenant(self, request: web.BaseRequest) -> str | None:
        """Who sent the request: None when its bearer token is missing or wrong, "" without tenants."""
        if self._token is None:
            return ""
        tenant = self._token.tenant(request.headers.get("Authorization"))
        return None if tenant is None else tenant if self._token.named else ""

    def _process(self, body: bytes, content_type: str, encoding: str, peer: str,
                 tenant: str = "") -> _Processed:
        """On a worker thread: decompress, decode and judge; 200 and the reply, or the status and error message."""
        limit = self.settings.max_body
        try:
            spans, plain = decode(body, content_type, encoding, limit)
        except RequestTooLarge:
            return _Processed(413, f"decompressed body is over the limit of {limit} bytes".encode())
        except InputError as exc:
            return _Processed(400, str(exc).encode())
        partial = self.sink(spans, plain, content_type, peer, tenant)
        return _Processed(200, success_body(content_type, partial))
