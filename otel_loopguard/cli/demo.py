"""``otel-loopguard demo``: a scripted agent walks through every verdict, judged live by the real processor.

The scripted agent lives in :mod:`otel_loopguard.cli.demo_agent`, imported only when the demo runs (it loads the
OpenTelemetry SDK).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..core.escape import escaped

_EXAMPLES = """examples:
  otel-loopguard demo
  otel-loopguard demo --out demo.json && otel-loopguard audit demo.json
  otel-loopguard demo --out demo.jsonl && otel-loopguard audit demo.jsonl --config DEMO_PRICES

DEMO_PRICES is the demo's price table, shipped with the package as examples/demo-prices.toml (its path is
printed with --out); with it, audit finds the demo's costs and its cost stop too.
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
    demo.add_argument("--run", type=int, default=7, metavar="N", dest="variant",
                      help="which reproducible run: ids and timings (default 7)")
    demo.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard demo``; returns the exit status."""
    from .demo_agent import run_demo  # noqa: PLC0415 - loads the SDK only for this command

    if args.out is not None:
        # Before the demo runs: a path that cannot be written fails now, not after the whole demo.
        error = writable_path(args.out)
        if error is not None:
            print(f"otel-loopguard: error: {escaped(f'--out {args.out}: {error}')}", file=sys.stderr)
            return 2
    color = sys.stdout.isatty() and not args.no_color and not os.environ.get("NO_COLOR")
    run_demo(out=args.out, color=color, variant=args.variant)
    return 0


def writable_path(path: str) -> str | None:
    """Why ``path`` cannot be written as a new or replaced regular file, or None when it can."""
    if os.path.isdir(path):
        return "is a directory"
    if os.path.exists(path) and not os.path.isfile(path):
        return "exists and is not a regular file"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"no such directory: {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return "permission denied"
    return _probe(path)


def _probe(path: str) -> str | None:
    """Open ``path`` for appending (nothing truncated) and close it: some files refuse writing only when opened
    (``/proc`` files, for root whom :func:`os.access` always allows). A file the probe created is removed."""
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}"
    if not existed:
        os.remove(path)
    return None
