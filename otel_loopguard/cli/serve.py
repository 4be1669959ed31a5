"""``otel-loopguard serve``: an OTLP trace receiver that judges traces from agents in any language.

The receivers live in :mod:`otel_loopguard.serve`, imported only when the command runs (gRPC and the OTLP
exporters load then).
"""

from __future__ import annotations

import argparse
from typing import Any

from .options import detector_options, load_config

_EXAMPLES = """examples:
  otel-loopguard serve
  otel-loopguard serve --grpc 127.0.0.1:4317 --http '' --idle 10
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 otel-loopguard serve --forward
"""


def register(commands: Any) -> None:
    """Add the ``serve`` command to the parser."""
    serve = commands.add_parser(
        "serve",
        help="receive OTLP traces (gRPC and HTTP) and emit verdict events and metrics over OTLP",
        description="Receive OTLP traces from agents without the processor, judge each trace for loops, and send "
                    "verdict events and metrics to the OTLP endpoint of the OTEL_EXPORTER_OTLP_* variables.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--grpc", default="127.0.0.1:4317", metavar="HOST:PORT",
                       help="OTLP/gRPC listen address ('' disables; default 127.0.0.1:4317)")
    serve.add_argument("--http", default="127.0.0.1:4318", metavar="HOST:PORT",
                       help="OTLP/HTTP listen address ('' disables; default 127.0.0.1:4318)")
    serve.add_argument("--idle", type=float, default=5.0, metavar="SECONDS",
                       help="a trace is finished after this long without new spans (default 5)")
    serve.add_argument("--forward", action="store_true",
                       help="also forward the received spans unchanged to the OTLP traces endpoint")
    detector_options(serve)
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard serve`` until SIGTERM or SIGINT; returns the exit status."""
    from ..serve.server import run_serve  # noqa: PLC0415 - grpc and the exporters load only for this command

    return run_serve(args, load_config(args))
