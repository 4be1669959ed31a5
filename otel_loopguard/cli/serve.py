"""``otel-loopguard serve``: an OTLP trace receiver that judges traces from agents in any language.

The receivers live in :mod:`otel_loopguard.serve`, imported only when the command runs (gRPC and the OTLP
exporters load then).
"""

from __future__ import annotations

import argparse
from typing import Any

from .options import detector_options, load_config

_EXAMPLES = """examples:
  otel-loopguard serve                                  verdicts printed here, status page on :4319
  otel-loopguard serve --trace-url 'http://localhost:16686/trace/{trace_id}'
  otel-loopguard serve --grpc 127.0.0.1:4317 --http '' --idle 10
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 otel-loopguard serve --forward
  otel-loopguard serve --grpc 0.0.0.0:4317 --http 0.0.0.0:4318 \\
      --tls-cert server.pem --tls-key server.key --bearer-token-file /run/secrets/otlp-token

Every option also reads from the [serve] table of the --config file (the option's name with '_' for '-');
a flag wins over the file.
"""


def register(commands: Any) -> None:
    """Add the ``serve`` command to the parser."""
    serve = commands.add_parser(
        "serve",
        help="receive OTLP traces (gRPC and HTTP) and emit verdict events and metrics over OTLP",
        description="Receive OTLP traces from agents without the processor, judge each trace for loops, print a "
                    "line per verdict, show them on a status page, and send verdict events and metrics where the "
                    "OTEL_{LOGS,METRICS}_EXPORTER and OTEL_EXPORTER_OTLP_* variables say (nowhere when none is set).",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Defaults are None so that the [serve] table of the configuration file can fill what the command line omits.
    serve.add_argument("--grpc", metavar="HOST:PORT",
                       help="OTLP/gRPC listen address ('' disables; default 127.0.0.1:4317)")
    serve.add_argument("--http", metavar="HOST:PORT",
                       help="OTLP/HTTP listen address ('' disables; default 127.0.0.1:4318)")
    serve.add_argument("--idle", type=float, metavar="SECONDS",
                       help="a trace is finished after this long without new spans (default 5)")
    serve.add_argument("--forward", action="store_true", default=None,
                       help="also forward the received spans unchanged to the OTLP traces endpoint")
    serve.add_argument("--status", metavar="HOST:PORT",
                       help="status page (/ and /traces.json) listen address ('' disables; default 127.0.0.1:4319)")
    serve.add_argument("--trace-url", metavar="TEMPLATE",
                       help="link each trace id on the status page to your trace UI, e.g. "
                            "'http://localhost:16686/trace/{trace_id}'")
    serve.add_argument("--quiet", action="store_true", default=None,
                       help="do not print a line per verdict on standard error")
    _security_options(serve)
    _limit_options(serve)
    detector_options(serve)
    serve.set_defaults(handler=run)


def _security_options(serve: argparse.ArgumentParser) -> None:
    """TLS and bearer-token options, shared by both receivers and the status page."""
    security = serve.add_argument_group("TLS and authentication (both receivers)")
    security.add_argument("--tls-cert", metavar="FILE", help="server certificate chain (PEM); needs --tls-key")
    security.add_argument("--tls-key", metavar="FILE", help="private key of --tls-cert (PEM)")
    security.add_argument("--tls-client-ca", metavar="FILE",
                          help="require client certificates signed by this CA (PEM): mutual TLS")
    security.add_argument("--bearer-token-file", metavar="FILE",
                          help="require 'Authorization: Bearer <token>' with a token of this file: one per line, "
                               "TOKEN or TENANT TOKEN; with tenants, traces are kept apart per tenant (HTTP 401 / "
                               "gRPC UNAUTHENTICATED otherwise)")


def _limit_options(serve: argparse.ArgumentParser) -> None:
    """The receivers' limits and the shutdown bound."""
    limits = serve.add_argument_group("limits (both receivers unless named)")
    limits.add_argument("--max-body", type=int, metavar="BYTES",
                        help="largest request, before and after gzip (default 16777216)")
    limits.add_argument("--max-connections", type=int, metavar="N",
                        help="open connections per receiver (default: half the open-file limit less 128, "
                             "at most 1024)")
    limits.add_argument("--header-timeout", type=float, metavar="SECONDS",
                        help="to receive a request's headers, or a TLS handshake (default 10)")
    limits.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                        help="a connection without a request is closed after this long (default 60)")
    limits.add_argument("--body-timeout", type=float, metavar="SECONDS",
                        help="to receive one HTTP request body (default 60)")
    limits.add_argument("--max-concurrent-requests", type=int, metavar="N",
                        help="HTTP request bodies read and decoded at once (default 16)")
    limits.add_argument("--backlog", type=int, metavar="N", help="listen queue length (default 1024)")
    limits.add_argument("--grpc-max-concurrent-streams", type=int, metavar="N",
                        help="streams per gRPC connection (default 100)")
    limits.add_argument("--grpc-max-concurrent-rpcs", type=int, metavar="N",
                        help="gRPC calls in progress before RESOURCE_EXHAUSTED (default 64)")
    limits.add_argument("--grpc-max-connection-age", type=float, metavar="SECONDS",
                        help="ask gRPC clients to reconnect after this long (default: never)")
    limits.add_argument("--shutdown-timeout", type=float, metavar="SECONDS",
                        help="on SIGTERM/SIGINT, the longest wait for open traces to be judged and their events "
                             "and metrics to be sent; what is still pending then is dropped and said so (default 5)")


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard serve`` until SIGTERM or SIGINT; returns the exit status."""
    from ..serve.server import run_serve  # noqa: PLC0415 - grpc and the exporters load only for this command

    return run_serve(args, load_config(args))
