"""OTLP/gRPC trace receiver for ``serve``.

The ``TraceService/Export`` method is registered with an identity request deserialiser, so the servicer gets
the raw request bytes and decodes them once with :func:`decode_proto_request` (the same decoder the HTTP
receiver and ``audit`` use) instead of letting grpc build a message object first. gzip request compression
and the maximum message size (``RESOURCE_EXHAUSTED``) are handled by grpc itself; a malformed request is
answered with ``INVALID_ARGUMENT``.
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
from .http_server import PROTOBUF, Sink

_logger = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EMPTY_RESPONSE = trace_service_pb2.ExportTraceServiceResponse()


def _serialize(response: trace_service_pb2.ExportTraceServiceResponse) -> bytes:
    return response.SerializeToString()


class OTLPGrpcServer:
    """A grpc server with the OTLP trace service, handing decoded span batches to ``sink``.

    Args:
        address: ``host:port`` to bind; port 0 picks a free one.
        sink: receives each accepted request's spans.
        max_body: the largest accepted message in bytes.
        on_reject: called once per refused request.
        max_workers: threads serving requests.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, address: str, sink: Sink, max_body: int, on_reject: Callable[[], None],
                 max_workers: int = 8) -> None:
        self._sink = sink
        self._on_reject = on_reject
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="loopguard-serve-grpc"),
            options=[("grpc.max_receive_message_length", max_body), ("grpc.so_reuseport", 0)],
        )
        handler: grpc.RpcMethodHandler[bytes, Any] = grpc.unary_unary_rpc_method_handler(
            self._export,
            request_deserializer=None,
            response_serializer=_serialize,
        )
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),))
        self.port = self._server.add_insecure_port(address)
        if not self.port:
            raise OSError(f"cannot bind the OTLP/gRPC receiver to {address!r}")

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self, grace: float | None = 2.0) -> None:
        """Refuse new calls and wait up to ``grace`` seconds for calls in progress."""
        self._server.stop(grace).wait()

    def _export(self, request: bytes, context: grpc.ServicerContext) -> Any:
        try:
            spans = decode_proto_request(request)
        except InputError as exc:
            self._on_reject()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            self._sink(spans, request, PROTOBUF)
        except Exception as exc:
            _logger.warning("otel-loopguard serve: request failed: %s", exc, exc_info=exc)
            context.abort(grpc.StatusCode.INTERNAL, "internal error")
        return _EMPTY_RESPONSE
