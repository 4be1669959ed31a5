"""The commands beyond ``audit`` of steps files; they need the OTLP readers and the OpenTelemetry shell."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Iterator

from ._config import LoopGuardConfig
from ._engine import LoopEngine
from ._replay import TraceReport


def register(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the demo, report and serve sub-commands to the parser."""
    _register_serve(commands, detector_options)


def audit_otlp_file(path: str, config: LoopGuardConfig, options: Any) -> Iterator[TraceReport]:
    """Audit every trace of an OTLP file (JSON, JSON Lines, gzip or protobuf), streaming."""
    from ._otlp_read import read_spans
    from ._trace_eval import TraceEvaluator, evaluate_stream

    evaluator = TraceEvaluator(LoopEngine(config))
    yield from evaluate_stream(read_spans(path, on_error=options.on_error), evaluator, path, options.at)


def otlp_auditor() -> Any:
    """The OTLP trace auditor used by ``audit``."""
    return audit_otlp_file


# -- serve (owned by the serve module; kept apart so other commands can be added above without conflicts) ----------

_SERVE_EXAMPLES = """examples:
  otel-loopguard serve
  otel-loopguard serve --grpc 127.0.0.1:4317 --http '' --idle 10
  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 otel-loopguard serve --forward
"""


def _register_serve(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``serve``: an OTLP trace receiver that judges traces from agents in any language."""
    serve = commands.add_parser(
        "serve",
        help="receive OTLP traces (gRPC and HTTP) and emit verdict events and metrics over OTLP",
        description="Receive OTLP traces from agents without the processor, judge each trace for loops, and send "
                    "verdict events and metrics to the OTLP endpoint of the OTEL_EXPORTER_OTLP_* variables.",
        epilog=_SERVE_EXAMPLES,
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
    serve.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from ._serve import run_serve  # noqa: PLC0415 - grpc and the exporters load only for this command
    from .cli import load_config  # noqa: PLC0415 - cli imports this module

    return run_serve(args, load_config(args))
