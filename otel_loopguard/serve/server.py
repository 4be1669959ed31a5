"""``otel-loopguard serve``: an OTLP trace receiver that judges agents written in any language.

An agent (any language, any framework) exports its GenAI spans with its own OTLP exporter, directly or through a
Collector, to ``serve``. ``serve`` decodes each request with the same decoders as ``audit``
(:func:`decode_proto_request`, :func:`decode_json_request`), extracts tool calls and model usage with the
processor's extractor, and judges each trace with the processor's engine, incrementally, as spans arrive (see
:mod:`otel_loopguard.core.judge` for how out-of-order and late spans keep the verdicts equal to ``audit``'s).

What it sends: on every transition and intervention, the ``loopguard.verdict`` log-record event, carrying the
trace and span context of the tool span that caused it (so a log backend links to the trace), and the same
metrics as the processor, through the SDK's OTLP log and metric exporters configured by the standard
``OTEL_EXPORTER_OTLP_*`` variables (``service.name`` defaults to ``otel-loopguard``). It cannot add the
``loopguard.verdict`` *span event* the processor adds, because the spans were already exported by the agent; with
``--forward`` the received spans are passed on unchanged to the OTLP traces endpoint, so ``serve`` can sit in a
pipeline.

**Agents.** An event names the innermost agent span whose time holds the call's end, the rule the processor
follows too (``TraceRecord.agent_span_at``). A span reaches ``serve`` when it has ended, so an agent span's
attributes are final whenever it arrives (also those set after its start); an event made before its agent span
arrived (the agent still running: its calls are exported first) names the agent the tool span itself names, if
any. The ``gen_ai.invoke_agent.tool_calls`` histogram is recorded when the trace finishes, once per agent span,
with the calls it was the innermost agent of.

**Unread input.** A tool span whose content is in attributes no convention reads is warned about in the answer to
the request that carried it (an OTLP ``partial_success`` with ``rejected_spans = 0``). That a trace has GenAI spans
but no readable tool call is known only when it finishes (its spans arrive in any order: the root may come first
and its tool spans later, from other exporters): then it is logged and counted, and the warning goes in the next
answer to each sender of the trace (by host; at most eight senders per trace).

Receivers bind 127.0.0.1 unless given another address. Malformed requests get OTLP error responses and never
stop the server. :meth:`Server.stop` (SIGTERM/SIGINT in the command) stops the receivers, finishes every open
trace, sends its events and flushes the providers.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation, get_meter

from .._version import VERSION
from ..conventions import names as n
from ..conventions.assembly import UnreadLog
from ..conventions.span import SpanRecord
from ..conventions.unread import INVALID_IDS, MAX_KEYS, TRACE_CAUSES, Unread, message
from ..conventions.verdicts import VerdictEvent
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.escape import escaped
from ..core.judge import TraceReport
from ..errors import ConfigError
from ..sdk.emit import Emitter
from .exporting import Receiver, bind_error, check_free, export_environ, forward_refusal
from .figures import FinishedTrace, ServeStats
from .grpc_server import OTLPGrpcServer
from .request import JSON, PartialSuccess
from .settings import (
    SETTING_NAMES,
    BearerToken,
    ServeSettings,
    TLSFiles,
    exposure_warnings,
    raise_open_file_limit,
    read_serve_table,
)
from .status import DEFAULT_STATUS, StatusBoard, StatusServer, trace_link
from .table import TraceTable

if TYPE_CHECKING:
    from .http_server import ConnectionStats, OTLPHTTPServer

_logger = logging.getLogger(__name__)
# The partial_success warning's length at most.
_MAX_WARNING = 2048
# Senders with warnings waiting for their next answer, at most (the oldest dropped first).
_MAX_PENDING_PEERS = 1024
# Open traces the status page lists at most (the most recently active).
_MAX_HELD_SHOWN = 500

DEFAULT_GRPC = "127.0.0.1:4317"
DEFAULT_HTTP = "127.0.0.1:4318"
DEFAULT_IDLE = 5.0
DEFAULT_MAX_BODY = ServeSettings.max_body
DEFAULT_SERVICE_NAME = "otel-loopguard"

__all__ = ["ServeStats", "Server", "run_serve", "tune_gc"]

#: The cyclic garbage collector's thresholds in the ``serve`` process (Python's defaults: 700, 10, 10).
SERVE_GC_THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> None:
    """Set the cyclic garbage collector of the ``serve`` process for a server that holds many traces.

    What the trace table holds (about 30 container objects per trace, for up to ``max_traces`` open and as many
    remembered finished traces) lives for seconds at least and is acyclic (reference counting frees it), but the
    collector walks it on every young collection while it is young and on every full collection after. Here the
    objects made by start-up (modules, classes, functions) are frozen out of the collector's reach, and the first
    generation collects after 50 000 allocations instead of 700, so cyclic garbage (asyncio and exception
    tracebacks make some) is still collected, a little later. The ``serve`` command calls this; it changes the
    whole process, so the :class:`Server` class does not.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)


def _split_address(address: str, what: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{what} address must be HOST:PORT, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@contextmanager
def _naming(what: str, flag: str, address: tuple[str, int]) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise bind_error(what, flag, address[0], address[1], exc) from None


class Server:
    """An OTLP/gRPC and OTLP/HTTP trace receiver that judges every trace it receives.

    Args:
        config: settings; :meth:`LoopGuardConfig.load` when None.
        grpc_address: ``host:port`` of the OTLP/gRPC receiver; None or "" disables it; port 0 picks a free one.
        http_address: ``host:port`` of the OTLP/HTTP receiver (``POST /v1/traces``); None or "" disables it.
        idle: seconds without a new span after which a trace is finished.
        logger_provider: receives ``loopguard.verdict`` events; the global one when None.
        meter_provider: receives the metrics; the global one when None.
        forward: called with each accepted request's raw body and content type (``--forward``).
        max_body: the largest request accepted, in bytes (decompressed, for gzip); overrides ``settings``.
        clock: monotonic seconds (the idle timer).
        settings: the receivers' limits, TLS and bearer token (:class:`ServeSettings` defaults when None).
        status: ``host:port`` of the status page (:mod:`otel_loopguard.serve.status`); None or "" disables it.
        trace_url: the status page's link for a trace id (``http://host/trace/{trace_id}``), or None.

    Raises:
        ValueError: an address or ``idle`` is invalid.
        ConfigError: ``trace_url`` is not an http(s) URL holding ``{trace_id}``.
    """

    def __init__(
        self,
        config: LoopGuardConfig | None = None,
        *,
        grpc_address: str | None = DEFAULT_GRPC,
        http_address: str | None = DEFAULT_HTTP,
        idle: float = DEFAULT_IDLE,
        logger_provider: LoggerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        forward: Callable[[bytes, str], None] | None = None,
        max_body: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        settings: ServeSettings | None = None,
        status: str | None = None,
        trace_url: str | None = None,
    ) -> None:
        if not idle > 0:
            raise ValueError(f"idle must be a positive number of seconds, got {idle!r}")
        if max_body is not None and max_body <= 0:
            raise ValueError(f"max_body must be positive, got {max_body!r}")
        settings = settings if settings is not None else ServeSettings()
        self.settings = settings if max_body is None else settings.with_values({"max_body": max_body})
        self.config = config if config is not None else LoopGuardConfig.load()
        engine = LoopEngine(self.config)
        self._table = TraceTable(engine, idle)
        self._emitter = Emitter(logger_provider, meter_provider, self.config.max_tool_names,
                                engine.normalizer_version)
        # serve's own counter, read from the table when the reader collects (nothing per span); no attributes.
        get_meter(n.INSTRUMENTATION_SCOPE, VERSION, meter_provider=meter_provider).create_observable_counter(
            n.METRIC_SPANS_DUPLICATE, [self._observe_duplicates], n.UNIT_SPAN,
            "Tool and model spans received again for a trace that already had them (each counted once)",
        )
        self._grpc_address = grpc_address or None
        self._http_address = _split_address(http_address, "--http") if http_address else None
        if self._grpc_address:
            _split_address(self._grpc_address, "--grpc")
        self._forward = forward
        self._clock = clock
        self._status_address = _split_address(status, "--status") if status else None
        trace_link(trace_url)  # a bad template fails here, not at the first page
        self._trace_url = trace_url
        self._board = StatusBoard(self.config.max_traces, clock) if status else None
        self._status: StatusServer | None = None
        self._listeners: list[Callable[[VerdictEvent], None]] = []
        self._report_listeners: list[Callable[[TraceReport], None]] = []
        self._unread_logged = UnreadLog()
        self._zero_ids_logged = False
        self._unread_lock = threading.Lock()
        # Causes of finished traces not told to their senders yet, by sender.
        self._pending: dict[str, list[Unread]] = {}
        self._grpc: OTLPGrpcServer | None = None
        self._http: OTLPHTTPServer | None = None
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self._started = False
        self._stopped = False

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> Server:
        """Bind and start the receivers and the idle sweeper.

        Returns:
            self.

        Raises:
            OSError: an address cannot be bound.
        """
        with self._state_lock:
            if self._started:
                raise RuntimeError("server already started")
            self._started = True
        try:
            self._bind_all()
        except BaseException:
            if self._http is not None:
                self._http.server_close()
            if self._grpc is not None:
                self._grpc.stop()
            with self._state_lock:
                self._started = False
            raise
        if self._http is not None:
            self._http.start()
        if self._grpc is not None:
            self._grpc.start()
        if self._status is not None:
            self._status.start()
        self._sweeper = threading.Thread(target=self._sweep, name="loopguard-serve-idle", daemon=True)
        self._sweeper.start()
        return self

    def stop(self, drain: bool = True) -> None:
        """Stop the receivers; with ``drain``, finish every open trace and send its events. Safe to call twice."""
        with self._state_lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        self._stop.set()
        if self._grpc is not None:
            self._grpc.stop()
        if self._http is not None:
            self._http.stop()
        if self._status is not None:
            self._status.stop()
        if self._sweeper is not None:
            self._sweeper.join()
        if drain:
            self.finish_all()

    def _bind_all(self) -> None:
        """Bind each enabled receiver and the status page; a failure names the receiver, address and flag."""
        if self._http_address is not None:
            # aiohttp loads only when the HTTP receiver is on (a gRPC-only serve runs without it).
            from .http_server import OTLPHTTPServer  # noqa: PLC0415

            with _naming("OTLP/HTTP", "--http", self._http_address):
                self._http = OTLPHTTPServer(self._http_address, self._receive, self._table.reject, self.settings)
        if self._grpc_address is not None:
            host, port = _split_address(self._grpc_address, "--grpc")
            with _naming("OTLP/gRPC", "--grpc", (host, port)):
                check_free(host, port)
                self._grpc = OTLPGrpcServer(self._grpc_address, self._receive, self._table.reject, self.settings)
        if self._status_address is not None:
            tls = self.settings.tls
            with _naming("the status page", "--status", self._status_address):
                self._status = StatusServer(self._status_address, self.status_document, self._trace_url,
                                            tls.ssl_context() if tls is not None else None,
                                            self.settings.bearer_token)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observation ------------------------------------------------------------

    @property
    def grpc_port(self) -> int | None:
        """The bound OTLP/gRPC port, or None when disabled."""
        return self._grpc.port if self._grpc is not None else None

    @property
    def http_port(self) -> int | None:
        """The bound OTLP/HTTP port, or None when disabled."""
        return self._http.server_address[1] if self._http is not None else None

    @property
    def http_host(self) -> str | None:
        """The host the OTLP/HTTP receiver is bound to, or None when disabled."""
        return str(self._http.server_address[0]) if self._http is not None else None

    def stats(self) -> ServeStats:
        """A snapshot of the counters."""
        return self._table.stats()

    @property
    def status_port(self) -> int | None:
        """The bound port of the status page, or None when disabled."""
        return self._status.port if self._status is not None else None

    def status_document(self) -> dict[str, Any]:
        """What the status page shows now (the ``/traces.json`` document); empty without a status page."""
        if self._board is None:
            return {}
        return self._board.snapshot(self._table.held(_MAX_HELD_SHOWN), self.stats())

    def connection_stats(self) -> ConnectionStats | None:
        """The HTTP receiver's connection counters, or None when it is disabled."""
        return self._http.stats() if self._http is not None else None

    @property
    def grpc_unauthenticated(self) -> int:
        """gRPC calls refused for a missing or wrong bearer token."""
        return self._grpc.unauthenticated if self._grpc is not None else 0

    def add_listener(self, listener: Callable[[VerdictEvent], None]) -> None:
        """Call ``listener(event)`` on every transition and intervention (on a receiver or the sweeper thread)."""
        self._listeners.append(listener)

    def add_report_listener(self, listener: Callable[[TraceReport], None]) -> None:
        """Call ``listener(report)`` when a trace is finished (the report ``audit --json`` prints for its spans).

        The reports of traces opened from then on carry the exact run audit (``ok``, ``violations``), which serve
        computes only for a report listener (add it before :meth:`start`)."""
        self._table.step_audit = True
        self._report_listeners.append(listener)

    def finish_all(self) -> None:
        """Finish every open trace now and send what that decides (the drain on shutdown)."""
        events, finished = self._table.finish_all()
        self._publish(events, finished)

    def ingest(self, spans: list[SpanRecord], peer: str = "", tenant: str = "") -> str | None:
        """Judge decoded spans as if they arrived in one request (what the receivers call).

        Args:
            spans: the request's spans.
            peer: the sender (its host, as the receivers name it).
            tenant: the tenant its bearer token names ("" without tenants): traces are keyed by (tenant, trace id).

        Returns:
            None, or the warning for the OTLP ``partial_success`` of the response (``rejected_spans`` 0): why some
            of the request's spans could not be read as tool calls, and why traces this sender sent, finished
            since its last answer, had none, naming the attribute keys seen.
        """
        unread: list[Unread] = []
        if self._board is not None:
            self._board.spans(spans)
        events, tools, finished, started = self._table.add(spans, self._clock(), unread, peer, tenant)
        for kind in started:
            # The processor counts a trace as active from its first tool or model span; so does serve.
            # A finished trace reopened by late spans comes back with its verdict, a new one as working.
            self._emitter.trace_started(kind)
        if tools:
            # Counted per tool name here, then once per name in the metric (its tally takes a lock and bounds the
            # name: per call, that was a tenth of serve's time for a request).
            calls: dict[str, int] = {}
            for tool in tools:
                calls[tool] = calls.get(tool, 0) + 1
            self._emitter.count_tool_calls(calls)
        self._publish(events, finished)
        for cause in unread:
            self._log_unread(cause)
        if self._pending:
            with self._unread_lock:
                owed = self._pending.pop(peer, None)
            if owed:
                unread += owed
        if not unread:
            return None
        return escaped("; ".join(message(cause) for cause in unread), _MAX_WARNING)

    # -- internals ------------------------------------------------------------

    def _observe_duplicates(self, options: CallbackOptions) -> list[Observation]:
        # Reported from the start of serving (zero included), not for a server that never started: a command that
        # fails to bind must not export a metric on its way out.
        if not self._started:
            return []
        return [Observation(self._table.stats().duplicate_spans)]

    def _receive(self, spans: list[SpanRecord], body: bytes, content_type: str, peer: str,
                 tenant: str = "") -> PartialSuccess | None:
        spans, rejected = self._valid_ids(spans)
        warning = self.ingest(spans, peer, tenant)
        if self._forward is not None:
            try:
                self._forward(body, content_type)
            except Exception as exc:  # noqa: BLE001 - forwarding is best effort; judging already happened
                _logger.warning("otel-loopguard serve: forwarding failed: %s", escaped(str(exc), _MAX_WARNING))
        if not rejected:
            return None if warning is None else PartialSuccess(0, warning)
        message = f"{rejected} span(s) rejected: an all-zero trace id or span id is invalid in OTLP"
        return PartialSuccess(rejected, escaped(f"{message}; {warning}" if warning else message, _MAX_WARNING))

    def _valid_ids(self, spans: list[SpanRecord]) -> tuple[list[SpanRecord], int]:
        """The spans with a trace id and a span id (all-zero ids are invalid: the span belongs to no trace, and
        cannot be told from another), and how many were rejected (counted, logged once per server)."""
        valid = [span for span in spans if span.trace_id and span.span_id]
        rejected = len(spans) - len(valid)
        if rejected:
            self._emitter.unread(INVALID_IDS, rejected)
            if not self._zero_ids_logged:
                self._zero_ids_logged = True
                _logger.warning("otel-loopguard serve: rejected span(s) with an all-zero trace id or span id (counted "
                                "in loopguard.spans.unread{reason=%s}); fix the sender's id generator", INVALID_IDS)
        return (valid if rejected else spans), rejected

    def _log_unread(self, cause: Unread) -> None:
        """Log each cause (reason and keys) once per server."""
        if self._unread_logged.first(cause):
            _logger.warning("otel-loopguard serve: %s", escaped(message(cause), _MAX_WARNING))

    def _owe(self, peers: tuple[str, ...], cause: Unread) -> None:
        """Keep a cause for the next answer to each of ``peers`` (one per reason per sender: keys merged, bounded)."""
        with self._unread_lock:
            pending = self._pending
            for peer in peers:
                owed = pending.pop(peer, None)
                if owed is None and len(pending) >= _MAX_PENDING_PEERS:
                    del pending[next(iter(pending))]
                for i, old in enumerate(owed or ()):
                    if old.reason == cause.reason:
                        keys = tuple(sorted({*old.keys, *cause.keys}))[:MAX_KEYS]
                        assert owed is not None
                        owed[i] = Unread(cause.reason, keys, old.spans + cause.spans,
                                         old.structure_only and cause.structure_only)
                        break
                else:
                    owed = [*(owed or ()), cause]
                pending[peer] = owed

    def _sweep(self) -> None:
        tick = min(0.25, self._table.idle / 4)
        while not self._stop.wait(tick):
            try:
                events, finished = self._table.finish_idle(self._clock())
                self._publish(events, finished)
            except Exception as exc:
                _logger.warning("otel-loopguard serve: finishing idle traces failed: %s", exc, exc_info=exc)

    def _publish(self, events: list[VerdictEvent], finished: list[FinishedTrace]) -> None:
        board = self._board
        for event in events:
            self._emitter.emit(event, None)
            if board is not None:
                board.event(event)
            for listener in self._listeners:
                try:
                    listener(event)
                except Exception as exc:  # noqa: BLE001
                    self._emitter.error(type(exc).__name__)
        for done in finished:
            report = done.report
            if board is not None:
                board.finished(done)
            for cause in done.unread:
                self._emitter.unread(cause.reason, cause.spans)
                self._log_unread(cause)
                if cause.reason in TRACE_CAUSES:
                    self._owe(done.peers, cause)
            for agent, calls in done.agents:
                self._emitter.agent_finished(agent, calls)
            if done.tracked:
                self._emitter.trace_finished(report.verdict.kind, report.steps_used, done.cost_usd, done.evicted)
                if done.task is not None:
                    self._emitter.task_finished(done.task)
            for report_listener in self._report_listeners:
                try:
                    report_listener(report)
                except Exception as exc:  # noqa: BLE001
                    self._emitter.error(type(exc).__name__)


# -- forwarding -----------------------------------------------------------------------------------------------


class Forwarder:
    """Sends received trace requests on, unchanged, to the OTLP traces endpoint (``--forward``).

    Uses OTLP/gRPC unless ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``/``OTEL_EXPORTER_OTLP_PROTOCOL`` says
    ``http/protobuf`` or ``http/json``; the endpoint comes from ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_ENDPOINT``. Over gRPC only protobuf requests can be forwarded (JSON ones are counted in
    ``skipped``). Sending is synchronous on the receiving thread, so a slow backend slows the sender (back
    pressure rather than an unbounded queue).

    Args:
        environ: the environment to read the settings from.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                    or "grpc").strip().lower()
        self.skipped = 0
        self._timeout = 10.0
        self._http = protocol.startswith("http")
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if self._http:
            if not endpoint:
                base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
                endpoint = base.rstrip("/") + "/v1/traces"
            self._url = endpoint
        else:
            import grpc  # noqa: PLC0415

            endpoint = endpoint or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4317"
            target = endpoint.split("://", 1)[-1].rstrip("/")
            self._channel = grpc.insecure_channel(target)
            # Identity serialisers: the received bytes go out as they came.
            self._export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self._channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=None, response_deserializer=None,
            )

    def __call__(self, body: bytes, content_type: str) -> None:
        """Forward one request body."""
        if self._http:
            request = urllib.request.Request(self._url, data=body, headers={"Content-Type": content_type},
                                             method="POST")
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
            return
        if content_type == JSON:
            self.skipped += 1
            return
        self._export(body, timeout=self._timeout)

    def close(self) -> None:
        """Release the connection."""
        if not self._http:
            self._channel.close()


# -- the command ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServeCommand:
    """What ``otel-loopguard serve`` runs with: command-line flags over the ``[serve]`` table over defaults."""

    grpc: str
    http: str
    idle: float
    forward: bool
    settings: ServeSettings
    status: str = DEFAULT_STATUS
    trace_url: str | None = None
    quiet: bool = False


def command_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> ServeCommand:
    """Resolve the command's options: a flag, else the ``[serve]`` table of ``--config``/``LOOPGUARD_CONFIG``, else
    the default.

    Raises:
        ConfigError: a bad value, a file that cannot be read, ``--tls-cert`` without ``--tls-key``, ...
    """
    path = getattr(args, "config", None) or environ.get("LOOPGUARD_CONFIG") or None
    table = read_serve_table(path) if path else {}

    def pick(name: str) -> Any:
        value = getattr(args, name, None)
        return table.get(name) if value is None else value

    cert, key, client_ca = pick("tls_cert"), pick("tls_key"), pick("tls_client_ca")
    if bool(cert) != bool(key):
        raise ConfigError("--tls-cert and --tls-key go together")
    if client_ca and not cert:
        raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")
    token_file = pick("bearer_token_file")
    settings = ServeSettings(
        tls=TLSFiles(cert, key, client_ca or None) if cert else None,
        bearer_token=BearerToken.from_file(token_file) if token_file else None,
    ).with_values({name: pick(name) for name in SETTING_NAMES})
    grpc, http, idle = pick("grpc"), pick("http"), pick("idle")
    return ServeCommand(
        grpc=DEFAULT_GRPC if grpc is None else grpc,
        http=DEFAULT_HTTP if http is None else http,
        idle=DEFAULT_IDLE if idle is None else float(idle),
        forward=bool(pick("forward")),
        settings=settings,
        status=DEFAULT_STATUS if pick("status") is None else pick("status"),
        trace_url=pick("trace_url") or None,
        quiet=bool(pick("quiet")),
    )


def _receivers(command: ServeCommand) -> list[Receiver]:
    """serve's own receivers with a fixed port (what its exporters must never send to)."""
    own = []
    for name, flag, address in (("OTLP/gRPC", "--grpc", command.grpc), ("OTLP/HTTP", "--http", command.http)):
        if address:
            host, port = _split_address(address, flag)
            own.append((name, flag, host, port))
    return own


def _listening_line(server: Server, command: ServeCommand) -> str:
    settings = command.settings
    parts = []
    scheme = "tls" if settings.tls is not None else "plain"
    if server.grpc_port is not None:
        parts.append(f"grpc {command.grpc.rpartition(':')[0]}:{server.grpc_port}")
    if server.http_port is not None:
        parts.append(f"http {server.http_host}:{server.http_port}")
    auth = ", bearer token required" if settings.bearer_token is not None else ""
    mtls = ", client certificates required" if settings.tls is not None and settings.tls.client_ca else ""
    line = (f"otel-loopguard serve: listening on {', '.join(parts)} ({scheme}{mtls}{auth}; "
            f"at most {settings.connections()} connections per receiver)")
    if server.status_port is not None:
        web = "https" if settings.tls is not None else "http"
        line += f"; status page {web}://{command.status.rpartition(':')[0].strip('[]') or '127.0.0.1'}:" \
                f"{server.status_port}/"
    return line


def _checked(command: ServeCommand) -> str | None:
    """Why the command cannot start (one line), or None; prints the exposure warnings."""
    if not command.grpc and not command.http:
        return "both receivers are disabled (--grpc '' --http '')"
    try:
        hosts = {name: _split_address(address, flag)[0] for name, address, flag in (
            ("OTLP/gRPC", command.grpc, "--grpc"), ("OTLP/HTTP", command.http, "--http"),
            ("the status page", command.status, "--status")) if address}
    except ValueError as exc:
        return str(exc)
    settings = command.settings
    for warning in exposure_warnings(hosts, tls=settings.tls is not None, token=settings.bearer_token is not None,
                                     mtls=settings.tls is not None and settings.tls.client_ca is not None):
        print(f"otel-loopguard serve: WARNING: {warning}", file=sys.stderr, flush=True)
    return None


def _start(command: ServeCommand, config: LoopGuardConfig, providers: tuple[Any, Any],
           forwarder: Forwarder | None) -> Server | str:
    """The started server, or the one-line error that stopped it."""
    try:
        server = Server(config, grpc_address=command.grpc, http_address=command.http, idle=command.idle,
                        logger_provider=providers[0], meter_provider=providers[1], forward=forwarder,
                        settings=command.settings, status=command.status, trace_url=command.trace_url)
        if not command.quiet:
            from ..sdk.console import ConsoleLines, attach_stderr  # noqa: PLC0415

            attach_stderr()
            server.add_listener(ConsoleLines())
        server.start()
    except (ValueError, OSError, ConfigError) as exc:
        return str(exc)
    tune_gc()
    return server


def _shut_down(server: Server, forwarder: Forwarder | None, providers: tuple[Any, ...], timeout: float) -> bool:
    """Stop the receivers, judge open traces and flush the providers, on a thread, for at most ``timeout`` seconds
    (a hung backend must not keep a stopped server alive); True when all of it finished in time."""
    done = threading.Event()

    def work() -> None:
        try:
            server.stop(drain=True)
            if forwarder is not None:
                forwarder.close()
            for provider in providers:
                provider.shutdown()
        except Exception as exc:  # noqa: BLE001 - said, and the shutdown goes on to exit
            _logger.warning("otel-loopguard serve: shutdown failed: %s", escaped(str(exc), _MAX_WARNING))
        finally:
            done.set()

    threading.Thread(target=work, name="otel-loopguard-shutdown", daemon=True).start()
    return done.wait(timeout)


def run_serve(args: argparse.Namespace, config: LoopGuardConfig, environ: Mapping[str, str] | None = None) -> int:
    """Run ``otel-loopguard serve`` until SIGTERM or SIGINT; then drain, flush and return 0.

    Raises:
        ConfigError: an option is invalid (the command prints it as one line).
    """
    environ = os.environ if environ is None else environ
    command = command_settings(args, environ)
    problem = _checked(command)
    if problem is not None:
        print(f"otel-loopguard: error: {escaped(problem)}", file=sys.stderr)
        return 2
    settings = command.settings
    # Connection caps are derived from the open-file limit: raise it first, as a Go server would.
    raise_open_file_limit()
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    from ..sdk.providers import build_providers, service_resource  # noqa: PLC0415 - the SDK loads only here

    env, notes = export_environ(environ, _receivers(command))
    refusal = forward_refusal(environ, _receivers(command)) if command.forward else None
    if refusal is not None:
        notes.append(refusal)
    logger_provider, meter_provider = build_providers(env, service_resource(DEFAULT_SERVICE_NAME))
    forwarder = Forwarder(environ) if command.forward and refusal is None else None
    server = _start(command, config, (logger_provider, meter_provider), forwarder)
    if isinstance(server, str):
        print(f"otel-loopguard: error: serve: {escaped(server)}", file=sys.stderr)
        if forwarder is not None:
            forwarder.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return 2
    print(_listening_line(server, command), file=sys.stderr, flush=True)
    for note in notes:
        print(f"otel-loopguard serve: {note}", file=sys.stderr, flush=True)
    try:
        # Event.wait without a timeout cannot be interrupted by a signal on every platform; wake up now and then.
        while not stop.wait(1.0):
            pass
    finally:
        finished = _shut_down(server, forwarder, (logger_provider, meter_provider), settings.shutdown_timeout)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats = server.stats()
    if not finished:
        print(f"otel-loopguard serve: stopped after {stats.spans} spans, {stats.finished_traces} traces; shutdown "
              f"did not finish within {settings.shutdown_timeout:g} s (--shutdown-timeout): verdict events, metrics "
              "and forwarded requests not sent by then were dropped", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Threads still blocked on the backend (exporters, forwarding) would hold the interpreter's exit. The status
        # stays 0: the server stopped as asked; the line above says what was lost.
        os._exit(0)
    print(f"otel-loopguard serve: stopped after {stats.spans} spans, {stats.finished_traces} traces",
          file=sys.stderr, flush=True)
    return 0
