"""The commands beyond ``audit`` of steps files; they need the OTLP readers and the OpenTelemetry shell."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Iterator

from ._config import LoopGuardConfig
from ._engine import LoopEngine
from ._replay import TraceReport


def register(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the demo, report and serve sub-commands to the parser."""


def audit_otlp_file(path: str, config: LoopGuardConfig, options: Any) -> Iterator[TraceReport]:
    """Audit every trace of an OTLP file (JSON, JSON Lines, gzip or protobuf), streaming."""
    from ._otlp_read import read_spans
    from ._trace_eval import TraceEvaluator, evaluate_stream

    evaluator = TraceEvaluator(LoopEngine(config))
    yield from evaluate_stream(read_spans(path, on_error=options.on_error), evaluator, path, options.at)


def otlp_auditor() -> Any:
    """The OTLP trace auditor used by ``audit``."""
    return audit_otlp_file
