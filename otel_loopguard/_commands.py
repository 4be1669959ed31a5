"""The commands beyond ``audit`` of steps files; they need the OTLP readers and the OpenTelemetry shell."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Iterator

from ._config import LoopGuardConfig
from ._engine import LoopEngine
from ._replay import TraceReport


def register(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the demo, report and serve sub-commands to the parser."""
    _register_demo(commands)
    _register_report(commands, detector_options)
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


# -- demo ------------------------------------------------------------------------------------------------------------

_DEMO_EXAMPLES = """examples:
  otel-loopguard demo
  otel-loopguard demo --out demo.json && otel-loopguard audit demo.json
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 otel-loopguard demo

With OTEL_EXPORTER_OTLP_ENDPOINT set, spans, verdict events and metrics are also exported with the
OTLP exporters (gRPC by default; OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf for HTTP).
"""


def _register_demo(commands: Any) -> None:
    """Add ``demo``: scripted agent runs judged live by the processor."""
    demo = commands.add_parser(
        "demo",
        help="watch loopguard judge scripted agent runs (loop, ping-pong, retry, wait, ...) in seconds",
        description="Run a scripted agent through seven situations with the real SDK and LoopGuardSpanProcessor "
                    "(simulated time), printing each tool call, verdict change, nudge and stop, then a summary.",
        epilog=_DEMO_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", metavar="FILE", help="also write every span as OTLP/JSON (.jsonl: JSON Lines)")
    demo.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR=1)")
    demo.add_argument("--seed", type=int, default=7, metavar="N", help="seed for ids and timings (default 7)")
    demo.set_defaults(handler=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from ._demo import run_demo  # noqa: PLC0415 - loads the SDK only for this command

    color = sys.stdout.isatty() and not args.no_color and not os.environ.get("NO_COLOR")
    run_demo(out=args.out, color=color, seed=args.seed)
    return 0


# -- report ----------------------------------------------------------------------------------------------------------

_REPORT_EXAMPLES = """examples:
  otel-loopguard report traces.jsonl --by app.prompt.version
  otel-loopguard report baseline.jsonl.gz canary.jsonl.gz --by service.version
  otel-loopguard report exports/ --by gen_ai.request.model --json --config loopguard.toml

The attribute is looked up on the trace's spans first, then on their resource; traces without it
form the group (none). Cost per trace needs prices in the configuration ([prices."MODEL"]).
"""


def _register_report(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``report``: loop, intervention and error rates per attribute value."""
    report = commands.add_parser(
        "report",
        help="compare loop, nudge, stop and error rates across prompt versions, models or releases",
        description="Judge every trace of stored OTLP files and print, per value of an attribute: traces, tool "
                    "calls per trace, the share of traces that got stuck, were nudged or were stopped, the tool "
                    "call error rate and the cost per trace.",
        epilog=_REPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("paths", nargs="+", metavar="PATH", help="OTLP files (JSON, JSON Lines, gzip, protobuf) "
                        "or directories of them")
    report.add_argument("--by", required=True, metavar="ATTRIBUTE",
                        help="span or resource attribute to group by, e.g. app.prompt.version")
    report.add_argument("--json", action="store_true", help="one JSON object per group per line")
    report.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: each trace's last end)")
    detector_options(report)
    report.set_defaults(handler=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from ._report import run_report  # noqa: PLC0415
    from .cli import load_config  # noqa: PLC0415 - cli imports this module

    return run_report(args.paths, args.by, load_config(args), as_json=args.json, at=args.at)


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
