"""otel_loopguard: keep AI agents out of loops by watching the OpenTelemetry traces they already emit.

Add :class:`LoopGuardSpanProcessor` to a ``TracerProvider``; it reads GenAI tool
spans (OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry), judges each
trace (working, retrying, waiting, stuck, uncertain) and emits
``loopguard.verdict`` events and metrics through OTLP. A harness asks
:meth:`LoopGuardSpanProcessor.check` whether to nudge the model or stop the run.

Names backed by the OpenTelemetry SDK (the processor, its events) are imported on
first use, so ``import otel_loopguard`` and the pure core load no OpenTelemetry module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import VERSION as __version__
from .core.config import LeasePolicy, LoopGuardConfig, Prices, RetryPolicy, ToolSettings
from .core.cost import Usage, cost_usd
from .core.engine import LoopEngine
from .core.judge import TraceReport
from .core.model import Intervention, Lease, Observation, ReviewRequest, ToolCall, Transition, Verdict
from .core.signature import NORMALIZER_VERSION, ActionSignature
from .core.step_audit import audit_trace
from .errors import ConfigError, InputError, LoopGuardError, LoopStopped, ReviewPending

if TYPE_CHECKING:
    from .conventions.verdicts import VerdictEvent
    from .otlp.read import read_spans
    from .sdk.processor import LoopGuardSpanProcessor

# Public name -> module that defines it, for the names loaded on first use (PEP 562).
_LAZY = {
    "LoopGuardSpanProcessor": ".sdk.processor",
    "VerdictEvent": ".conventions.verdicts",
    "read_spans": ".otlp.read",
}

__all__ = [
    "NORMALIZER_VERSION",
    "ActionSignature",
    "ConfigError",
    "InputError",
    "Intervention",
    "Lease",
    "LeasePolicy",
    "LoopEngine",
    "LoopGuardConfig",
    "LoopGuardError",
    "LoopGuardSpanProcessor",
    "LoopStopped",
    "Observation",
    "Prices",
    "RetryPolicy",
    "ReviewPending",
    "ReviewRequest",
    "ToolCall",
    "ToolSettings",
    "TraceReport",
    "Transition",
    "Usage",
    "Verdict",
    "VerdictEvent",
    "__version__",
    "audit_trace",
    "configure",
    "cost_usd",
    "read_spans",
]


def configure(**options: Any) -> LoopGuardSpanProcessor:
    """Set up loop detection in one call and return the guard (the same guard on every later call).

    Global tracer, logger and meter providers that are still the API's defaults become SDK providers exporting as
    the standard ``OTEL_*`` variables say (as ``opentelemetry-instrument`` would); providers the application set are
    used untouched. With no exporter and no OTLP endpoint variable set, nothing is exported and one line says how.
    With no logs exporter, every verdict is also a line on the ``otel_loopguard`` logger (on standard error unless
    logging is configured).

    Args:
        **options: :class:`LoopGuardConfig` settings (``window=``, ``max_period=``...), over ``LOOPGUARD_*``
            variables; or ``config=`` a whole :class:`LoopGuardConfig`.

    Raises:
        ConfigError: a setting is invalid.
    """
    import os  # noqa: PLC0415 - the SDK and os load only when configuring

    from .sdk.configure import configure_guard  # noqa: PLC0415

    return configure_guard(os.environ, **options)


def _publish(obj: Any) -> Any:
    # Documentation and reprs show the public path, not the private module a name happens to live in.
    if isinstance(obj, type):
        obj.__module__ = __name__
    return obj


for _name in __all__:
    if _name not in _LAZY and _name != "__version__" and isinstance(globals()[_name], type):
        _publish(globals()[_name])
del _name


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _publish(getattr(importlib.import_module(module, __name__), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
