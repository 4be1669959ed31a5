"""The commands beyond ``audit`` of steps files; they need the OpenTelemetry shell."""

from __future__ import annotations

import argparse
from typing import Any, Callable


def register(commands: Any, detector_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the demo, report and serve sub-commands to the parser."""


def otlp_auditor() -> Any:
    """The OTLP trace auditor, or None while it is not available."""
    return None
