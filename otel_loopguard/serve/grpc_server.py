"""OTLP/gRPC trace receiver for ``serve`` (grpcio).

The ``TraceService/Export`` method is registered with an identity request deserialiser, so the servicer gets
the raw request bytes and decodes them once with :func:`decode_proto_request` (the same decoder the HTTP
receiver and ``audit`` use) instead of letting grpc build a message object first. gzip request compression
and the maximum message size (``RESOURCE_EXHAUSTED``) are handled by grpc itself; a malformed request is
answered with ``INVALID_ARGUMENT``.

Limits, the equivalents of the HTTP receiver's (see :mod:`otel_loopguard.serve.settings` for the defaults),
all enforced by gRPC's core: ``grpc.max_allowed_incoming_connections`` (``max_connections``; beyond it new
connections are closed), ``grpc.server_handshake_timeout_ms`` (``header_timeout``: the TLS handshake and the
HTTP/2 preface), ``grpc.max_connection_idle_ms`` (``idle_timeout``, then a GOAWAY), ``grpc.max_connection_age_ms``
(when set), ``grpc.max_concurrent_streams`` per connection, ``grpc.max_receive_message_length`` (``max_body``), and
``maximum_concurrent_rpcs`` (calls beyond it get ``RESOURCE_EXHAUSTED``). With TLS the server presents its
certificate and, given a client CA, requires a client certificate signed by it. With a bearer token, an interceptor
answers ``UNAUTHENTICATED`` before the request is decoded unless its ``authorization`` metadata carries the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ..errors import InputError
from ..otlp.proto import decode_proto_request
from .request import PROTOBUF, Sink, export_response, peer_host
from .settings import BearerToken, ServeSettings

_logger = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_RESPONSE = trace_service_pb2.ExportTraceServiceResponse()


def _serialize(response: trace_service_pb2.ExportTraceServiceResponse) -> bytes:
    return response.SerializeToString()


def _deny(request: bytes, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")


class _BearerAuth(grpc.ServerInterceptor):
    """Lets a call through only when its ``authorization`` metadata is ``Bearer <token>``."""

    def __init__(self, token: BearerToken, on_reject: Callable[[], None]) -> None:
        self._token = token
        self._on_reject = on_reject
        self.unauthenticated = 0
        self._denied: grpc.RpcMethodHandler[bytes, Any] = grpc.unary_unary_rpc_method_handler(
            _deny, request_deserializer=None, response_serializer=_serialize)

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        metadata = details.invocation_metadata or ()
        if any(key == "authorization" and self._token.matches(value) for key, value in metadata):
            return continuation(details)
        self.unauthenticated += 1
        self._on_reject()
        return self._denied


class OTLPGrpcServer:
    """A grpc server with the OTLP trace service, handing decoded span batches to ``sink``.

    Args:
        address: ``host:port`` to bind; port 0 picks a free one.
        sink: receives each accepted request's spans.
        on_reject: called once per refused request.
        settings: limits, TLS and the bearer token.
        max_workers: threads serving requests.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, address: str, sink: Sink, on_reject: Callable[[], None], settings: ServeSettings,
                 max_workers: int = 8) -> None:
        self._sink = sink
        self._on_reject = on_reject
        self.max_connections = settings.connections()
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", settings.max_body),
            ("grpc.so_reuseport", 0),
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.server_handshake_timeout_ms", int(settings.header_timeout * 1000)),
            ("grpc.max_connection_idle_ms", int(settings.idle_timeout * 1000)),
            ("grpc.max_concurrent_streams", settings.grpc_max_concurrent_streams),
        ]
        if settings.grpc_max_connection_age is not None:
            options.append(("grpc.max_connection_age_ms", int(settings.grpc_max_connection_age * 1000)))
            options.append(("grpc.max_connection_age_grace_ms", int(settings.body_timeout * 1000)))
        self._token = settings.bearer_token
        self._auth = (_BearerAuth(settings.bearer_token, on_reject)
                      if settings.bearer_token is not None else None)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="loopguard-serve-grpc"),
            interceptors=[self._auth] if self._auth is not None else None,
            options=options,
            maximum_concurrent_rpcs=settings.grpc_max_concurrent_rpcs,
        )
        handler: grpc.RpcMethodHandler[bytes, Any] = grpc.unary_unary_rpc_method_handler(
            self._export,
            request_deserializer=None,
            response_serializer=_serialize,
        )
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),))
        try:
            if settings.tls is not None:
                key, cert, client_ca = settings.tls.grpc_credentials()
                credentials = grpc.ssl_server_credentials(
                    [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None)
                self.port = self._server.add_secure_port(address, credentials)
            else:
                self.port = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot bind the OTLP/gRPC receiver to {address!r}: {exc}") from None
        if not self.port:
            raise OSError(f"cannot bind the OTLP/gRPC receiver to {address!r}")

    @property
    def unauthenticated(self) -> int:
        """Calls refused for a missing or wrong bearer token."""
        return self._auth.unauthenticated if self._auth is not None else 0

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self, grace: float | None = 2.0) -> None:
        """Refuse new calls and wait up to ``grace`` seconds for calls in progress."""
        self._server.stop(grace).wait()

    def _tenant(self, context: grpc.ServicerContext) -> str:
        """The tenant of the call's token ("" without tenants); the interceptor has let only known tokens in."""
        token = self._token
        if token is None or not token.named:
            return ""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and (tenant := token.tenant(value)) is not None:
                return tenant
        return ""

    def _export(self, request: bytes, context: grpc.ServicerContext) -> Any:
        try:
            spans = decode_proto_request(request)
        except InputError as exc:
            self._on_reject()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            partial = self._sink(spans, request, PROTOBUF, peer_host(context.peer()), self._tenant(context))
        except Exception as exc:
            _logger.warning("otel-loopguard serve: request failed: %s", exc, exc_info=exc)
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        return _EMPTY_RESPONSE if partial is None else export_response(partial)
