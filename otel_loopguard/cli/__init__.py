"""The ``otel-loopguard`` command line: one module per command (audit, report, calibrate, demo, serve).

Errors are one line on standard error and a non-zero exit status; no tracebacks.
Exit status: 0 fine, 1 a trace reached the ``--fail-on`` verdict, 2 a usage or input error.
Each command imports what it needs when it runs, so ``audit`` never loads the OpenTelemetry SDK.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

from .._version import VERSION
from ..core.escape import escaped
from ..errors import ConfigError, InputError, LoopGuardError
from . import audit, calibrate, demo, report, serve
from .options import EXIT_ERROR, EXIT_FOUND, EXIT_OK

__all__ = ["EXIT_ERROR", "EXIT_FOUND", "EXIT_OK", "build_parser", "main"]


_EXAMPLES = """examples:
  otel-loopguard demo                                   scripted agent runs judged live, in seconds
  otel-loopguard audit trace.json                       judge a stored trace (exit 1 when one got stuck)
  otel-loopguard audit export.jsonl.gz --json           one JSON report per trace
  otel-loopguard report traces.jsonl --by app.prompt.version
  otel-loopguard serve                                  receive OTLP on 127.0.0.1:4317 (gRPC) and :4318 (HTTP)

exit status: 0 fine, 1 a trace reached the --fail-on verdict (audit), 2 a usage or input error,
130 interrupted.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="otel-loopguard",
        description="Detect AI-agent loops in OpenTelemetry GenAI traces.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     help="what to do (otel-loopguard COMMAND --help for its options)")
    for command in (audit, report, calibrate, demo, serve):
        command.register(commands)
    return parser


@functools.cache
def _shared_parser() -> argparse.ArgumentParser:
    """The parser :func:`main` uses, built on first use and kept (building it costs milliseconds per call).

    Sharing it is safe because parsing changes nothing in it: each call makes a new namespace, and no argument has
    a mutable default (an ``append`` option defaults to None, not to a list the namespaces would share).
    """
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _shared_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        status: int = args.handler(args)
        return status
    except (ConfigError, InputError, LoopGuardError) as exc:
        print(f"otel-loopguard: error: {escaped(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
