"""Where ``serve`` sends its verdicts: the ``OTEL_*`` exporter variables, but never to its own receivers.

With no exporter and no OTLP endpoint variable set, the OTLP default (``localhost:4317``) is ``serve``'s own gRPC
receiver: exporting there loses every verdict (``UNIMPLEMENTED``: it receives traces, not logs or metrics). So
``serve`` then keeps its verdicts local (its console lines and the status page) and says once how to export; and
an endpoint that is one of its own receivers is refused for that signal, with one line saying why.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from ..sdk.configure import exports_configured
from ..sdk.providers import Signal, exporter_names, otlp_protocol
from .settings import is_loopback

__all__ = ["Receiver", "bind_error", "check_free", "export_environ", "forward_refusal"]

#: (name, flag, host, port) of one of serve's receivers, e.g. ("OTLP/gRPC", "--grpc", "127.0.0.1", 4317).
Receiver = tuple[str, str, str, int]
_SIGNALS: tuple[Signal, ...] = ("logs", "metrics")
_WILDCARDS = ("", "0.0.0.0", "::")
_OTLP_NAMES = ("otlp", "otlp_proto_grpc", "otlp_proto_http")


def _endpoint(signal: Signal, environ: Mapping[str, str]) -> tuple[str, str, int]:
    """(URL, host, port) the OTLP exporter of ``signal`` would send to, as the exporters read the variables."""
    grpc = otlp_protocol(signal, environ) == "grpc"
    url = (environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
           or ("http://localhost:4317" if grpc else "http://localhost:4318")).strip()
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port or (4317 if grpc else 4318)
    except ValueError:
        port = 0
    return url, parts.hostname or "", port


def _own(host: str, port: int, receivers: Sequence[Receiver]) -> Receiver | None:
    for receiver in receivers:
        _, _, own_host, own_port = receiver
        if port != own_port:
            continue
        if host == own_host or (is_loopback(host) and (is_loopback(own_host) or own_host in _WILDCARDS)):
            return receiver
    return None


def export_environ(environ: Mapping[str, str], receivers: Sequence[Receiver]) -> tuple[dict[str, str], list[str]]:
    """The environment to build serve's providers from, and the lines to print once about it.

    Args:
        environ: the process environment.
        receivers: serve's own receivers (port 0 never matches).
    """
    env = dict(environ)
    if not exports_configured(environ):
        env.update({f"OTEL_{signal.upper()}_EXPORTER": "none" for signal in ("traces", *_SIGNALS)})
        return env, ["verdicts stay here (the lines below and the status page); to export them, set "
                     "OTEL_EXPORTER_OTLP_ENDPOINT to your collector (e.g. http://collector:4317), or "
                     "OTEL_LOGS_EXPORTER/OTEL_METRICS_EXPORTER=console"]
    notes = []
    for signal in _SIGNALS:
        if not any(name in _OTLP_NAMES for name in exporter_names(signal, env)):
            continue
        url, host, port = _endpoint(signal, env)
        receiver = _own(host, port, receivers)
        if receiver is not None:
            kept = [name for name in exporter_names(signal, env) if name not in _OTLP_NAMES]
            env[f"OTEL_{signal.upper()}_EXPORTER"] = ",".join(kept) or "none"
            notes.append(f"not exporting {signal} to {url[:200]}: that is this server's own {receiver[0]} receiver "
                         f"({receiver[1]}); set OTEL_EXPORTER_OTLP_ENDPOINT to your collector")
    return env, notes


def forward_refusal(environ: Mapping[str, str], receivers: Sequence[Receiver]) -> str | None:
    """Why ``--forward`` must not send spans where the variables point, or None to forward.

    ``OTEL_TRACES_EXPORTER=none`` turns forwarding off; an endpoint that is one of serve's own receivers (the
    default ``localhost:4317`` when none is set) would send every request back to serve, forever."""
    if exporter_names("traces", environ) == []:
        return "not forwarding spans: OTEL_TRACES_EXPORTER=none"
    url, host, port = _endpoint("traces", environ)
    receiver = _own(host, port, receivers)
    if receiver is None:
        return None
    return (f"not forwarding spans to {url[:200]}: that is this server's own {receiver[0]} receiver "
            f"({receiver[1]}); set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to your collector")


_REASONS = {errno.EADDRINUSE: "address in use", errno.EACCES: "permission denied",
            errno.EADDRNOTAVAIL: "address not available"}


def check_free(host: str, port: int) -> None:
    """Raise the ``OSError`` of binding ``host:port`` (as a server would, with ``SO_REUSEADDR``) when it fails.

    Asked before gRPC binds: gRPC logs its own multi-part error line on standard error for a busy port, which a user
    should not have to read next to ours. Port 0 is always free."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def bind_error(what: str, flag: str, host: str, port: int, exc: OSError) -> OSError:
    """A one-line error naming the receiver, the address and the flag to change it: ``cannot listen for OTLP/gRPC
    on 127.0.0.1:4317 (address in use); choose another with --grpc``.

    gRPC's own error carries no errno, so the reason is then found by binding the address once more."""
    code = exc.errno
    if code is None:
        try:
            check_free(host, port)
        except OSError as again:
            code = again.errno
    reason = _REASONS.get(code or 0) or (exc.strerror or str(exc))[:200]
    return OSError(f"cannot listen for {what} on {host}:{port} ({reason}); choose another with {flag}")
