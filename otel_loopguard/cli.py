"""The ``otel-loopguard`` command line: audit, demo, report and serve.

Errors are one line on standard error and a non-zero exit status; no tracebacks.
Exit status: 0 fine, 1 a trace reached the ``--fail-on`` verdict, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib import metadata
from typing import Any, Sequence

from ._config import LoopGuardConfig
from ._errors import ConfigError, InputError, LoopGuardError
from ._model import VERDICT_KINDS

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2

_AUDIT_EXAMPLES = """examples:
  otel-loopguard audit trace.json
  otel-loopguard audit traces.jsonl.gz --json --fail-on stuck
  otel-loopguard audit export.pb --config loopguard.toml --at 1767225600
"""


def _version() -> str:
    try:
        return metadata.version("otel-loopguard")
    except metadata.PackageNotFoundError:  # running from a checkout
        return "0+unknown"


def _detector_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE.toml", help="configuration file (see README, Configuration)")
    for flag in ("window", "max-period", "min-repetitions", "frequency-limit", "max-steps", "repeat-limit"):
        parser.add_argument(f"--{flag}", type=int, metavar="N")
    parser.add_argument("--max-cost", type=float, metavar="USD", dest="max_cost_usd", help="cost budget per trace")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="otel-loopguard",
        description="Detect AI-agent loops in OpenTelemetry GenAI traces.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    audit = commands.add_parser(
        "audit",
        help="judge stored traces (steps files, OTLP/JSON, JSON Lines, gzip, OTLP/protobuf)",
        description="Replay stored traces through the loop engine and report verdicts, transitions and interventions.",
        epilog=_AUDIT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("files", nargs="+", metavar="FILE")
    _detector_options(audit)
    audit.add_argument("--json", action="store_true", help="one JSON object per trace per line")
    audit.add_argument("--fail-on", choices=VERDICT_KINDS, default="stuck",
                       help="exit 1 when a trace reached this verdict (default: stuck)")
    audit.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: the trace's last end)")
    audit.set_defaults(handler=_cmd_audit)

    from . import _commands  # noqa: PLC0415 - the other commands need the OTel shell

    _commands.register(commands, _detector_options)
    return parser


def load_config(args: argparse.Namespace) -> LoopGuardConfig:
    """The configuration from ``--config``, the environment and the detector flags."""
    overrides = {
        name: getattr(args, name)
        for name in ("window", "max_period", "min_repetitions", "frequency_limit", "max_steps", "repeat_limit",
                     "max_cost_usd")
        if getattr(args, name, None) is not None
    }
    return LoopGuardConfig.load(getattr(args, "config", None), **overrides)


def _cmd_audit(args: argparse.Namespace) -> int:
    from ._audit_cmd import AuditOptions, audit_paths, format_report, report_json, write_error
    from ._commands import otlp_auditor

    config = load_config(args)
    failed = False
    status = EXIT_OK

    def on_error(exc: InputError) -> None:
        nonlocal failed
        failed = True
        write_error(exc)

    options = AuditOptions(at=args.at, on_error=on_error)
    color = sys.stdout.isatty() and not args.json
    progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
    for item in audit_paths(args.files, config, options, otlp_auditor()):
        if isinstance(item, InputError):
            if progress:
                progress.clear()
            on_error(item)
            continue
        if progress:
            progress.tick(item.source)
        if args.json:
            print(report_json(item), flush=False)
        else:
            format_report(item, sys.stdout, color)
        reached = item.verdict.kind == args.fail_on or any(t.verdict.kind == args.fail_on for t in item.transitions)
        if reached:
            status = EXIT_FOUND
    sys.stdout.flush()
    if progress:
        progress.clear()
    return EXIT_ERROR if failed else status


class _Progress:
    """A one-line count of audited traces on a terminal, redrawn at most five times a second."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._traces = 0
        self._drawn = 0.0
        self._shown = False

    def tick(self, source: str) -> None:
        self._traces += 1
        now = time.monotonic()
        if now - self._drawn >= 0.2:
            self._drawn = now
            self._stream.write(f"\r\x1b[Kaudited {self._traces} trace(s); reading {source}")
            self._stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        return args.handler(args)
    except (ConfigError, InputError, LoopGuardError) as exc:
        print(f"otel-loopguard: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
