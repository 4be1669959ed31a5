"""The ``otel-loopguard`` command line: one module per command (audit, report, calibrate, demo, serve).

Errors are one line on standard error and a non-zero exit status; no tracebacks.
Exit status: 0 fine, 1 a trace reached the ``--fail-on`` verdict, 2 a usage or input error.
Each command imports what it needs when it runs, so ``audit`` never loads the OpenTelemetry SDK.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._version import VERSION
from ..errors import ConfigError, InputError, LoopGuardError
from . import audit, calibrate, demo, report, serve
from .options import EXIT_ERROR, EXIT_FOUND, EXIT_OK

__all__ = ["EXIT_ERROR", "EXIT_FOUND", "EXIT_OK", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="otel-loopguard",
        description="Detect AI-agent loops in OpenTelemetry GenAI traces.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (audit, report, calibrate, demo, serve):
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        status: int = args.handler(args)
        return status
    except (ConfigError, InputError, LoopGuardError) as exc:
        print(f"otel-loopguard: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
