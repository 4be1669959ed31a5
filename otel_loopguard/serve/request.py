"""What both OTLP receivers share: content types, the sink they feed, gzip within limits, error bodies.

No server library is imported here, so the gRPC receiver does not need the HTTP one's.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable

import msgspec
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ..conventions.span import SpanRecord
from ..errors import InputError
from ..otlp.proto import decode_proto_request
from ..otlp.read import decode_json_request

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# google.rpc.Code values used in error answers.
INVALID_ARGUMENT = 3
NOT_FOUND = 5
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
INTERNAL = 13
DEADLINE_EXCEEDED = 4
UNAUTHENTICATED = 16

EMPTY_PROTO_RESPONSE = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

class PartialSuccess(msgspec.Struct, frozen=True):
    """What an accepted request's OTLP ``partial_success`` says: spans rejected (an all-zero trace or span id) and
    why, with any warning about spans accepted but not readable."""

    rejected_spans: int
    message: str


# Called with the decoded spans, the raw (decompressed) body and its content type (for forwarding), the sender's
# host and its tenant ("" without tenants); returns None, or the response's partial_success.
Sink = Callable[[list[SpanRecord], bytes, str, str, str], "PartialSuccess | None"]


def peer_host(peer: str) -> str:
    """The host of a gRPC peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``, ``unix:/path``), as the HTTP receiver
    names it (``127.0.0.1``, ``::1``): one sender whatever its connection."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = address.rpartition(":")[0]
        return host.strip("[]") or address
    return peer


def export_response(partial: PartialSuccess | None) -> trace_service_pb2.ExportTraceServiceResponse:
    """The ``ExportTraceServiceResponse`` of an accepted request: empty, or a ``partial_success`` with the spans
    rejected and the message (with ``rejected_spans = 0``, the OTLP way to warn a sender)."""
    response = trace_service_pb2.ExportTraceServiceResponse()
    if partial is not None:
        response.partial_success.rejected_spans = partial.rejected_spans
        response.partial_success.error_message = partial.message
    return response


def success_body(content_type: str, partial: PartialSuccess | None) -> bytes:
    """The body of an HTTP 200 answer: the response as protobuf, or as OTLP/JSON (``{}`` when empty)."""
    if partial is None:
        return b"{}" if content_type == JSON else EMPTY_PROTO_RESPONSE
    if content_type == JSON:
        # OTLP/JSON writes 64-bit integers as strings.
        return json.dumps({"partialSuccess": {"rejectedSpans": str(partial.rejected_spans),
                                              "errorMessage": partial.message}}).encode()
    return export_response(partial).SerializeToString()


class RequestTooLarge(Exception):
    """The body (or its decompressed form) is over the server's limit."""


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress a gzip body, every member of it, refusing to inflate past ``limit`` bytes in all.

    A gzip file may hold several members one after the other (RFC 1952 section 2.2; ``cat a.gz b.gz``, and
    streaming compressors that flush a member at a time); its content is their concatenation.

    Raises:
        RequestTooLarge: the decompressed body is over ``limit``.
        InputError: the body is not valid gzip, or ends inside a member.
    """
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            # len(out) <= limit here, so max_length >= 1 (0 would mean "no limit" to zlib).
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise InputError(f"bad gzip body: {exc}", source="request") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise RequestTooLarge()
        if not inflater.eof:
            raise InputError("truncated gzip body", source="request")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def decode(body: bytes, content_type: str, encoding: str, limit: int) -> tuple[list[SpanRecord], bytes]:
    """Decompress (``gzip`` or ``identity``) and decode a trace request; returns the spans and the plain body.

    Raises:
        RequestTooLarge: the decompressed body is over ``limit``.
        InputError: the body is malformed.
    """
    if encoding == "gzip":
        body = gunzip(body, limit)
    spans = decode_json_request(body) if content_type == JSON else decode_proto_request(body)
    return spans, body


def status_body(content_type: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` in the request's encoding (protobuf, or JSON for JSON requests)."""
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    body: bytes = status_pb2.Status(code=code, message=message).SerializeToString()
    return body
