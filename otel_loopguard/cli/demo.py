"""``otel-loopguard demo``: a scripted agent walks through every verdict, judged live by the real processor.

The scripted agent lives in :mod:`otel_loopguard.cli.demo_agent`, imported only when the demo runs (it loads the
OpenTelemetry SDK).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

_EXAMPLES = """examples:
  otel-loopguard demo
  otel-loopguard demo --out demo.json && otel-loopguard audit demo.json
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 otel-loopguard demo

With OTEL_EXPORTER_OTLP_ENDPOINT set, spans, verdict events and metrics are also exported with the
OTLP exporters (gRPC by default; OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf for HTTP).
"""


def register(commands: Any) -> None:
    """Add the ``demo`` command: scripted agent runs judged live by the processor."""
    demo = commands.add_parser(
        "demo",
        help="watch loopguard judge scripted agent runs (loop, ping-pong, retry, wait, ...) in seconds",
        description="Run a scripted agent through seven situations with the real SDK and LoopGuardSpanProcessor "
                    "(simulated time), printing each tool call, verdict change, nudge and stop, then a summary.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", metavar="FILE", help="also write every span as OTLP/JSON (.jsonl: JSON Lines)")
    demo.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR=1)")
    demo.add_argument("--seed", type=int, default=7, metavar="N", help="seed for ids and timings (default 7)")
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard demo``; returns the exit status."""
    from .demo_agent import run_demo  # noqa: PLC0415 - loads the SDK only for this command

    color = sys.stdout.isatty() and not args.no_color and not os.environ.get("NO_COLOR")
    run_demo(out=args.out, color=color, seed=args.seed)
    return 0
