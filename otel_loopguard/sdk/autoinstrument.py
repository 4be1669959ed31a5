"""Zero-code use: ``opentelemetry-instrument`` calls :func:`post_instrument` after configuring the SDK.

It adds a :class:`LoopGuardSpanProcessor` to the global tracer provider when
``LOOPGUARD_ENABLED`` is true, through the same code as :func:`otel_loopguard.configure`
(:mod:`otel_loopguard.sdk.configure`); everything else comes from ``LOOPGUARD_*``
variables (or the TOML file named by ``LOOPGUARD_CONFIG``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from ..core.config import parse_bool
from ..core.environment_variables import LOOPGUARD_ENABLED

_logger = logging.getLogger(__name__)


def post_instrument(*_: Any, environ: Mapping[str, str] | None = None, **__: Any) -> Any:
    """Add the processor to the global SDK tracer provider when ``LOOPGUARD_ENABLED`` is true.

    Returns:
        The processor that was added, or None. Never raises: a bad setting is logged and
        the application starts without loop detection.
    """
    env = os.environ if environ is None else environ
    try:
        if not parse_bool(env.get(LOOPGUARD_ENABLED, "false")):
            return None
    except ValueError:
        _logger.warning("ignoring LOOPGUARD_ENABLED=%r: expected true or false", env.get(LOOPGUARD_ENABLED))
        return None
    if getattr(trace.get_tracer_provider(), "add_span_processor", None) is None:
        _logger.warning("otel_loopguard: the global tracer provider is not an SDK TracerProvider; not enabled")
        return None
    try:
        # Imported only when enabled: every process run under opentelemetry-instrument calls this hook.
        from .configure import configure_guard  # noqa: PLC0415

        # opentelemetry-instrument set the providers already: the same setup as configure(), without that step.
        return configure_guard(env, set_providers=False)
    except Exception as exc:  # noqa: BLE001 - a misconfiguration must not stop the host application
        _logger.error("otel_loopguard: not enabled: %s", exc)
        return None
