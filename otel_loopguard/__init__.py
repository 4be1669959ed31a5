"""otel_loopguard: keep AI agents out of loops by watching the OpenTelemetry traces they already emit.

Add :class:`LoopGuardSpanProcessor` to a ``TracerProvider``; it reads GenAI tool
spans (OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry), judges each
trace (working, retrying, waiting, stuck, uncertain) and emits
``loopguard.verdict`` events and metrics through OTLP. A harness asks
:meth:`LoopGuardSpanProcessor.check` whether to nudge the model or stop the run.
"""

from ._audit import audit_trace
from ._config import LeasePolicy, LoopGuardConfig, Prices, RetryPolicy, ToolSettings
from ._cost import CostTotal, Usage, cost_usd
from ._emit import VerdictEvent
from ._engine import LoopEngine, TraceState
from ._errors import ConfigError, InputError, LoopGuardError, LoopStopped
from ._model import Intervention, Lease, Observation, ToolCall, Transition, Verdict
from ._processor import LoopGuardSpanProcessor
from ._signature import NORMALIZER_VERSION, ActionSignature
from ._version import VERSION as __version__

__all__ = [
    "NORMALIZER_VERSION",
    "ActionSignature",
    "ConfigError",
    "CostTotal",
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
    "ToolCall",
    "ToolSettings",
    "TraceState",
    "Transition",
    "Usage",
    "Verdict",
    "VerdictEvent",
    "__version__",
    "audit_trace",
    "cost_usd",
]
