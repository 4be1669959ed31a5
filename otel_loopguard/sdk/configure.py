"""One call to set up: providers from the ``OTEL_*`` variables when the application has none, the guard, visible lines.

:func:`configure` (the public one-liner) and the zero-code ``opentelemetry-instrument`` hook
(:func:`~otel_loopguard.sdk.autoinstrument.post_instrument`) both come here, so they cannot drift apart:

- a global tracer, logger or meter provider that is still the API's default is replaced by an SDK provider exporting
  through the exporters ``OTEL_{TRACES,LOGS,METRICS}_EXPORTER`` name (entry points loaded by the SDK's own
  configuration code; ``otlp`` as ``OTEL_EXPORTER_OTLP_*`` say). A provider the application set is used untouched;
- when no exporter variable and no OTLP endpoint variable is set at all, nothing is exported (a first try must not
  fill the terminal with "connection refused") and one line says how to export;
- when no logs exporter is configured, each verdict is also one line on the ``otel_loopguard`` logger
  (:mod:`otel_loopguard.sdk.console`), sent to standard error unless the application configured logging.

A second call returns the first call's guard.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs, metrics, trace

from ..conventions import names as n
from ..core.config import LoopGuardConfig
from .console import ConsoleLines, attach_stderr
from .processor import LoopGuardSpanProcessor
from .providers import Signal, exporters_for, sdk_logger_provider, sdk_meter_provider, service_resource

__all__ = ["EXPORT_HINT", "configure_guard", "exports_configured"]

_logger = logging.getLogger(n.CONSOLE_LOGGER)
_lock = threading.Lock()
_guard: LoopGuardSpanProcessor | None = None

#: Said once when nothing is exported.
EXPORT_HINT = ("loopguard: verdicts are printed here only; to export them, set OTEL_EXPORTER_OTLP_ENDPOINT "
               "(e.g. http://localhost:4317) or OTEL_TRACES_EXPORTER/OTEL_LOGS_EXPORTER/OTEL_METRICS_EXPORTER")
_SIGNALS: tuple[Signal, ...] = ("traces", "logs", "metrics")
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                       "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def exports_configured(environ: Mapping[str, str]) -> bool:
    """Whether any ``OTEL_*_EXPORTER`` or OTLP endpoint variable is set (else nothing is exported by default)."""
    named = (f"OTEL_{signal.upper()}_EXPORTER" for signal in _SIGNALS)
    return any(environ.get(name, "").strip() for name in (*named, *_ENDPOINT_VARIABLES))


@dataclass(frozen=True)
class _Providers:
    """The providers the guard uses, and whether verdict events reach a logs exporter."""

    logger: Any
    meter: Any
    logs_exported: bool


def _is_default(provider: Any) -> bool:
    # The API's stand-ins until an application sets a provider: Proxy* classes, and the no-op ones.
    name = type(provider).__name__
    return name.startswith(("Proxy", "_Proxy", "NoOp", "_NoOp"))


def _logs_exported(environ: Mapping[str, str], own_providers: bool) -> bool:
    """A logs exporter is configured: ``OTEL_LOGS_EXPORTER`` names one, or (when we set the providers, not
    ``opentelemetry-instrument``, which sets a logger provider whatever the variables say) the application set a
    logger provider."""
    named = environ.get("OTEL_LOGS_EXPORTER", "").strip().lower() not in ("", "none")
    return named or (own_providers and not _is_default(_logs.get_logger_provider()))


def _set_providers(environ: Mapping[str, str]) -> None:
    """Set SDK providers for the signals whose global provider is still the API's default."""
    chosen = environ if exports_configured(environ) else {**environ, **{
        f"OTEL_{signal.upper()}_EXPORTER": "none" for signal in _SIGNALS}}
    resource = service_resource("unknown_service")
    if _is_default(trace.get_tracer_provider()):
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415 - only when the application set none
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

        tracer_provider = TracerProvider(resource=resource)
        for exporter in exporters_for("traces", chosen):
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(tracer_provider)
    if _is_default(_logs.get_logger_provider()):
        _logs.set_logger_provider(sdk_logger_provider(chosen, resource))
    if _is_default(metrics.get_meter_provider()):
        metrics.set_meter_provider(sdk_meter_provider(chosen, resource))


def _attach(guard: LoopGuardSpanProcessor) -> None:
    add = getattr(trace.get_tracer_provider(), "add_span_processor", None)
    if add is None:
        _logger.warning("otel_loopguard: the global tracer provider is not an SDK TracerProvider; "
                        "add the returned processor to yours")
        return
    add(guard)


def configure_guard(
    environ: Mapping[str, str], *, set_providers: bool = True, **options: Any
) -> LoopGuardSpanProcessor:
    """Add one guard to the global tracer provider (the same guard on every later call) and return it.

    Args:
        environ: the environment (``OTEL_*`` for exporters, ``LOOPGUARD_*`` for settings).
        set_providers: replace the API's default providers (False under ``opentelemetry-instrument``, which set
            them already).
        **options: :class:`LoopGuardConfig` settings, over the environment; or ``config=`` a whole configuration.

    Raises:
        ConfigError: a setting is invalid.
    """
    global _guard
    with _lock:
        if _guard is not None:
            return _guard
        config = options.pop("config", None) or LoopGuardConfig.load(environ=environ, **options)
        logs_exported = _logs_exported(environ, set_providers)
        if set_providers:
            _set_providers(environ)
        guard = LoopGuardSpanProcessor(config, logger_provider=_logs.get_logger_provider(),
                                       meter_provider=metrics.get_meter_provider())
        if not logs_exported:
            guard.add_listener(ConsoleLines())
            attach_stderr()
        if set_providers and not exports_configured(environ):
            _logger.info("%s", EXPORT_HINT)
        _attach(guard)
        _guard = guard
        return guard
