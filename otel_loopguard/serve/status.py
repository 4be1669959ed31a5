"""The status page of ``serve`` (like the Collector's zPages): what is held now, what happened last, the counters.

``/`` is an HTML page rendered on the server, with no script, that reloads itself every few seconds; ``/traces.json``
is the same data as JSON. Memory is bounded: a fixed ring of the last :data:`MAX_EVENTS` transitions and
interventions, the last :data:`MAX_FINISHED` finished traces, and the service names of at most ``max_traces`` traces.
Every string on the page passes :func:`~otel_loopguard.core.escape.escaped` (escaped, bounded); JSON strings are
bounded the same way. The server binds loopback unless told otherwise and takes the receivers' TLS and bearer token.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..conventions.span import SpanRecord
from ..conventions.verdicts import VerdictEvent
from ..core.escape import bounded_name, escaped
from ..core.store import TraceMap
from ..errors import ConfigError
from .figures import FinishedTrace, HeldTrace, ServeStats
from .settings import BearerToken

__all__ = ["DEFAULT_STATUS", "MAX_EVENTS", "MAX_FINISHED", "StatusBoard", "StatusServer", "render_html",
           "trace_link"]

_logger = logging.getLogger(__name__)

DEFAULT_STATUS = "127.0.0.1:4319"
#: Transitions and interventions the page shows (a ring: the oldest leave first).
MAX_EVENTS = 200
#: Finished traces the page still lists.
MAX_FINISHED = 100
#: Seconds between the page's reloads.
REFRESH_SECONDS = 2
# Characters of a name (service, agent, tool) at most, on the page and in the JSON.
_NAME = 128
_SERVICE_KEY = "service.name"


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One trace as the page shows it (``state``: ``open`` or ``finished``; ``age_s`` since its first span;
    ``step_kind``: the kind of step its verdict is about, ``tool``, ``handoff``, ``agent`` or ``model``)."""

    trace_id: str
    service: str
    agent: str
    verdict: str
    tool_calls: int
    cost_usd: float | None
    age_s: float
    state: str
    tenant: str = ""
    step_kind: str = "tool"


@dataclass(frozen=True, slots=True)
class EventRow:
    """One transition or intervention (``at``: epoch seconds when serve saw it)."""

    at: float
    trace_id: str
    agent: str
    previous: str
    verdict: str
    rule: str
    intervention: str
    step: int
    tenant: str = ""
    step_kind: str = "tool"


class StatusBoard:
    """What the status page shows, fed by the server: spans (service names), events and finished traces.

    Args:
        max_traces: traces whose service name and first-seen time are remembered, at most.
        clock: monotonic seconds (ages); ``wall``: epoch seconds (event times).
    """

    def __init__(self, max_traces: int, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._max = max(1, max_traces)
        self._clock, self._wall = clock, wall
        self._lock = threading.Lock()
        # trace id -> (service, first seen), oldest first (bounded: the oldest is forgotten).
        self._seen: TraceMap[int, tuple[str, float], None] = TraceMap(self._max)
        # trace id -> agent named by its last event (bounded with _seen).
        self._agents: dict[int, str] = {}
        self._events: deque[EventRow] = deque(maxlen=MAX_EVENTS)
        self._finished: deque[TraceRow] = deque(maxlen=MAX_FINISHED)
        # Spans of finished traces that could not be read as tool calls (as loopguard.spans.unread counts them).
        self._unread = 0

    def spans(self, spans: Iterable[SpanRecord]) -> None:
        """Note the service and first arrival of each new trace among a request's spans."""
        now = self._clock()
        with self._lock:
            seen = self._seen
            for span in spans:
                if span.trace_id not in seen:
                    service = span.resource.get(_SERVICE_KEY)
                    first = (bounded_name(service) if isinstance(service, str) else "", now)
                    for old, _ in seen.add(span.trace_id, first):
                        self._agents.pop(old, None)

    def event(self, event: VerdictEvent) -> None:
        """Keep a transition or intervention in the ring (a listener of the server)."""
        agent = bounded_name(event.agent) if event.agent else ""
        intervention = event.intervention
        row = EventRow(
            at=self._wall(), trace_id=f"{event.trace_id:032x}", agent=agent,
            previous=event.transition.previous if event.transition else event.verdict.kind,
            verdict=event.verdict.kind,
            rule=intervention.rule if intervention is not None else event.verdict.rule,
            intervention=intervention.action if intervention is not None else "none",
            step=event.steps,
            tenant=bounded_name(event.tenant) if event.tenant else "",
            step_kind=event.verdict.step_kind,
        )
        with self._lock:
            self._events.append(row)
            if agent and event.trace_id in self._seen:
                self._agents[event.trace_id] = agent

    def finished(self, done: FinishedTrace) -> None:
        """Keep a finished trace's final figures."""
        report = done.report
        trace_id = int(report.trace_id, 16) if report.trace_id else 0
        with self._lock:
            service, first = self._seen.get(trace_id, ("", self._clock()))
            agent = self._agents.get(trace_id, "")
            self._unread += sum(cause.spans for cause in done.unread)
        self._finished.append(TraceRow(
            trace_id=f"{trace_id:032x}", service=service, agent=agent, verdict=report.verdict.kind,
            tool_calls=report.steps_used, cost_usd=done.cost_usd, age_s=round(self._clock() - first, 3),
            state="finished", tenant=bounded_name(done.tenant) if done.tenant else "",
            step_kind=report.verdict.step_kind))

    def snapshot(self, held: Iterable[HeldTrace], stats: ServeStats) -> dict[str, Any]:
        """The page's data (the ``/traces.json`` document), newest first."""
        now = self._clock()
        with self._lock:
            rows = []
            for trace in held:
                service, first = self._seen.get(trace.trace_id, ("", now))
                rows.append(TraceRow(
                    trace_id=f"{trace.trace_id:032x}", service=service,
                    agent=bounded_name(trace.agent) if trace.agent else self._agents.get(trace.trace_id, ""),
                    verdict=trace.verdict, tool_calls=trace.tool_calls, cost_usd=trace.cost_usd,
                    age_s=round(now - first, 3), state="open",
                    tenant=bounded_name(trace.tenant) if trace.tenant else "", step_kind=trace.step_kind))
            events = list(self._events)
            finished = list(self._finished)
            unread = self._unread
        return {
            "counters": {"spans": stats.spans, "traces_open": stats.open_traces,
                         "traces_finished": stats.finished_traces, "tool_calls": stats.tool_calls,
                         "unread_spans": unread, "duplicate_spans": stats.duplicate_spans,
                         "dropped_traces": stats.evicted_traces, "rejected_requests": stats.rejected_requests},
            "traces": [asdict(row) for row in reversed(rows)],
            "finished": [asdict(row) for row in reversed(finished)],
            "events": [asdict(row) for row in reversed(events)],
        }


def _html(text: str, limit: int) -> str:
    """``text`` escaped for an HTML page, at most ``limit`` characters shown."""
    return escaped(text, limit, html=True)


def trace_link(template: str | None) -> Callable[[str], str | None]:
    """The function turning a trace id into the user's trace-UI link, from a ``--trace-url`` template.

    Raises:
        ConfigError: the template lacks ``{trace_id}`` or is not an http(s) URL.
    """
    if not template:
        return lambda trace_id: None
    if "{trace_id}" not in template or not template.startswith(("http://", "https://")):
        raise ConfigError(f"--trace-url must be an http(s) URL holding {{trace_id}}, got {escaped(template, 200)!r}")
    return lambda trace_id: template.replace("{trace_id}", trace_id)


def _cell(value: Any) -> str:
    if value is None:
        return "<td>-</td>"
    if isinstance(value, float):
        return f"<td>{value:.4g}</td>"
    return f"<td>{_html(str(value), _NAME)}</td>"


def _trace_cell(trace_id: str, link: Callable[[str], str | None]) -> str:
    url = link(trace_id)
    text = _html(trace_id, 32)
    if url is None:
        return f"<td class=id>{text}</td>"
    return f'<td class=id><a href="{_html(url, 2048)}">{text}</a></td>'


def _table(caption: str, rows: list[dict[str, Any]], columns: tuple[str, ...],
           link: Callable[[str], str | None], id_: str) -> str:
    head = "".join(f"<th>{_html(column, 40)}</th>" for column in columns)
    body = []
    for row in rows:
        cells = [_trace_cell(row[c], link) if c == "trace_id" else _cell(row[c]) for c in columns]
        body.append(f"<tr class=\"{_html(str(row.get('verdict', '')), 16)}\">{''.join(cells)}</tr>")
    empty = f"<tr><td colspan={len(columns)}>none</td></tr>" if not rows else ""
    return (f"<h2>{_html(caption, 80)}</h2><table id={id_}><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}{empty}</tbody></table>")


_TRACE_COLUMNS = ("trace_id", "service", "agent", "verdict", "step_kind", "tool_calls", "cost_usd", "age_s")
_EVENT_COLUMNS = ("trace_id", "agent", "previous", "verdict", "step_kind", "rule", "intervention", "step")
_STYLE = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin-bottom:1em}"
          "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}.id{font-family:monospace}"
          "tr.stuck td{background:#fdd}tr.uncertain td{background:#eef}tr.retrying td{background:#dff}")


def render_html(doc: dict[str, Any], link: Callable[[str], str | None]) -> str:
    """The status page for a :meth:`StatusBoard.snapshot` document: escaped, bounded, reloading itself."""
    counters = "".join(f"<tr><th>{_html(k, 40)}</th><td>{int(v)}</td></tr>" for k, v in doc["counters"].items())
    # With tenants (a token file naming them), every table says whose trace each row is.
    tenants = any(row.get("tenant") for name in ("traces", "events", "finished") for row in doc[name])
    trace_columns = ("tenant", *_TRACE_COLUMNS) if tenants else _TRACE_COLUMNS
    event_columns = ("tenant", *_EVENT_COLUMNS) if tenants else _EVENT_COLUMNS
    return (
        "<!DOCTYPE html><html><head><meta charset=utf-8>"
        f"<meta http-equiv=refresh content={REFRESH_SECONDS}><title>otel-loopguard serve</title>"
        f"<style>{_STYLE}</style></head><body><h1>otel-loopguard serve</h1>"
        f"<table id=counters>{counters}</table>"
        + _table("Traces held now", doc["traces"], trace_columns, link, "traces")
        + _table(f"Last {MAX_EVENTS} transitions and interventions", doc["events"], event_columns, link, "events")
        + _table(f"Last {MAX_FINISHED} finished traces", doc["finished"], trace_columns, link, "finished")
        + '<p><a href="traces.json">traces.json</a></p></body></html>'
    )


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    # A connection that sends nothing for this long is closed (the page is small; nothing needs longer).
    timeout = 10

    def do_GET(self) -> None:
        owner = self.server.owner
        if owner.token is not None and not owner.token.matches(self.headers.get("Authorization")):
            self._send(401, "text/plain; charset=utf-8", b"missing or invalid bearer token\n")
            return
        path = self.path.split("?", 1)[0]
        if path == "/traces.json":
            self._send(200, "application/json", json.dumps(owner.document()).encode())
        elif path == "/":
            self._send(200, "text/html; charset=utf-8", owner.page().encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged: the page reloads every few seconds


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: StatusServer


class StatusServer:
    """Serves ``/`` and ``/traces.json`` from a board on its own thread.

    Args:
        address: ``(host, port)``; port 0 picks a free one.
        document: returns the current :meth:`StatusBoard.snapshot` document.
        trace_url: the ``--trace-url`` template, or None.
        tls: a server SSL context, or None; ``token``: the bearer token required, or None.
    """

    def __init__(self, address: tuple[str, int], document: Callable[[], dict[str, Any]], trace_url: str | None,
                 tls: ssl.SSLContext | None = None, token: BearerToken | None = None) -> None:
        self.document = document
        self.token = token
        self._link = trace_link(trace_url)
        self._server = _HTTPServer(address, _Handler)
        self._server.owner = self
        if tls is not None:
            # The handshake happens on the connection's own thread (first read), not in accept().
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopguard-status", daemon=True)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def page(self) -> str:
        """The HTML page now."""
        return render_html(self.document(), self._link)

    def start(self) -> StatusServer:
        """Serve on a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
