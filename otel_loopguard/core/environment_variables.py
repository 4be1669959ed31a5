"""Every environment variable otel_loopguard reads, one documented constant each.

A setting of :class:`~otel_loopguard.core.config.LoopGuardConfig` named ``x`` is read from ``LOOPGUARD_X`` (the
configuration derives the name from the field; a test checks this module lists exactly those names). Precedence,
most explicit first: keyword arguments, the TOML file, the environment, the defaults. A bad environment value is
logged and ignored, because an environment is shared with code the user does not control.
"""

from __future__ import annotations

__all__ = [
    "LOOPGUARD_AGENT_STEPS",
    "LOOPGUARD_CONFIG",
    "LOOPGUARD_ENABLED",
    "LOOPGUARD_FREQUENCY_LIMIT",
    "LOOPGUARD_HANDOFF_STEPS",
    "LOOPGUARD_HYSTERESIS",
    "LOOPGUARD_INTERVENTIONS",
    "LOOPGUARD_MAX_ARGUMENT_BYTES",
    "LOOPGUARD_MAX_COST_USD",
    "LOOPGUARD_MAX_NUDGES",
    "LOOPGUARD_MAX_PERIOD",
    "LOOPGUARD_MAX_STEPS",
    "LOOPGUARD_MAX_TOOL_NAMES",
    "LOOPGUARD_MAX_TRACES",
    "LOOPGUARD_MIN_REPETITIONS",
    "LOOPGUARD_MODEL_STEPS",
    "LOOPGUARD_OUTPUT_REPEAT_LIMIT",
    "LOOPGUARD_OUTPUT_REPETITION",
    "LOOPGUARD_PERMANENT_ERRORS",
    "LOOPGUARD_PER_CONVERSATION",
    "LOOPGUARD_REDACTED_VALUES",
    "LOOPGUARD_REPEAT_LIMIT",
    "LOOPGUARD_SIGNATURE_KEY",
    "LOOPGUARD_STOP_AFTER",
    "LOOPGUARD_TRACE_TTL_SECONDS",
    "LOOPGUARD_VERSION_ATTRIBUTES",
    "LOOPGUARD_VERSION_HARNESS",
    "LOOPGUARD_VERSION_MODEL",
    "LOOPGUARD_VERSION_PROMPT",
    "LOOPGUARD_VERSION_TOOLS",
    "LOOPGUARD_VOLATILE_KEYS",
    "LOOPGUARD_WINDOW",
]

LOOPGUARD_ENABLED = "LOOPGUARD_ENABLED"
"""``true`` adds the processor to the global tracer provider under ``opentelemetry-instrument`` (default false)."""

LOOPGUARD_CONFIG = "LOOPGUARD_CONFIG"
"""Path of a TOML configuration file, read when no path is given to ``LoopGuardConfig.load``."""

LOOPGUARD_WINDOW = "LOOPGUARD_WINDOW"
"""``window``: recent calls of a trace the detectors look at (integer)."""

LOOPGUARD_MAX_PERIOD = "LOOPGUARD_MAX_PERIOD"
"""``max_period``: the longest cycle looked for (integer)."""

LOOPGUARD_MIN_REPETITIONS = "LOOPGUARD_MIN_REPETITIONS"
"""``min_repetitions``: cycles a periodic suffix must hold (integer)."""

LOOPGUARD_FREQUENCY_LIMIT = "LOOPGUARD_FREQUENCY_LIMIT"
"""``frequency_limit``: a signature this often in the window is repetition (integer)."""

LOOPGUARD_REPEAT_LIMIT = "LOOPGUARD_REPEAT_LIMIT"
"""``repeat_limit``: the step audit's runs of identical calls this long are violations (integer)."""

LOOPGUARD_MAX_STEPS = "LOOPGUARD_MAX_STEPS"
"""``max_steps``: the step budget per trace (integer)."""

LOOPGUARD_MAX_COST_USD = "LOOPGUARD_MAX_COST_USD"
"""``max_cost_usd``: the cost budget per trace in USD (number)."""

LOOPGUARD_HYSTERESIS = "LOOPGUARD_HYSTERESIS"
"""``hysteresis``: evaluations of one stuck cycle before entering ``stuck`` (integer)."""

LOOPGUARD_PERMANENT_ERRORS = "LOOPGUARD_PERMANENT_ERRORS"
"""``permanent_errors``: comma-separated error classes retrying cannot fix; a leading ``+`` extends the defaults."""

LOOPGUARD_STOP_AFTER = "LOOPGUARD_STOP_AFTER"
"""``stop_after``: stuck calls after a nudge before the stop (integer)."""

LOOPGUARD_MAX_NUDGES = "LOOPGUARD_MAX_NUDGES"
"""``max_nudges``: nudges per trace (integer)."""

LOOPGUARD_INTERVENTIONS = "LOOPGUARD_INTERVENTIONS"
"""``interventions``: the ladder's rungs, comma-separated, in order (``nudge,review,stop``)."""

LOOPGUARD_VOLATILE_KEYS = "LOOPGUARD_VOLATILE_KEYS"
"""``volatile_keys``: comma-separated argument names removed before comparing; a leading ``+`` extends the defaults."""

LOOPGUARD_SIGNATURE_KEY = "LOOPGUARD_SIGNATURE_KEY"
"""``signature_key``: the HMAC key of emitted digests (text of at least 16 bytes)."""

LOOPGUARD_MAX_TRACES = "LOOPGUARD_MAX_TRACES"
"""``max_traces``: traces tracked at once (integer)."""

LOOPGUARD_TRACE_TTL_SECONDS = "LOOPGUARD_TRACE_TTL_SECONDS"
"""``trace_ttl_seconds``: idle time after which a trace is evicted (number)."""

LOOPGUARD_MAX_TOOL_NAMES = "LOOPGUARD_MAX_TOOL_NAMES"
"""``max_tool_names``: tool and agent names used as metric attributes before ``_OTHER`` (integer)."""

LOOPGUARD_MAX_ARGUMENT_BYTES = "LOOPGUARD_MAX_ARGUMENT_BYTES"
"""``max_argument_bytes``: longer arguments and results are fingerprinted without parsing (integer)."""

LOOPGUARD_PER_CONVERSATION = "LOOPGUARD_PER_CONVERSATION"
"""``per_conversation``: one state per ``gen_ai.conversation.id`` (true/false, 1/0, yes/no, on/off)."""

LOOPGUARD_VERSION_PROMPT = "LOOPGUARD_VERSION_PROMPT"
"""``versions["prompt"]``: set on every span as ``app.prompt.version``."""

LOOPGUARD_VERSION_TOOLS = "LOOPGUARD_VERSION_TOOLS"
"""``versions["tools"]``: set on every span as ``app.tools.version``."""

LOOPGUARD_VERSION_MODEL = "LOOPGUARD_VERSION_MODEL"
"""``versions["model"]``: set on every span as ``app.model.version``."""

LOOPGUARD_VERSION_HARNESS = "LOOPGUARD_VERSION_HARNESS"
"""``versions["harness"]``: set on every span as ``app.harness.version``."""

LOOPGUARD_VERSION_ATTRIBUTES = "LOOPGUARD_VERSION_ATTRIBUTES"
"""``version_attributes``: more span or resource attributes read as versions (comma-separated, at most 8)."""

LOOPGUARD_REDACTED_VALUES = "LOOPGUARD_REDACTED_VALUES"
"""``redacted_values``: placeholders meaning "not recorded" (comma-separated; a leading ``+`` extends the defaults)."""

LOOPGUARD_HANDOFF_STEPS = "LOOPGUARD_HANDOFF_STEPS"
"""``handoff_steps``: judge hand-offs between agents (true/false, 1/0, yes/no, on/off)."""

LOOPGUARD_AGENT_STEPS = "LOOPGUARD_AGENT_STEPS"
"""``agent_steps``: judge sub-agent invocations (true/false, 1/0, yes/no, on/off)."""

LOOPGUARD_MODEL_STEPS = "LOOPGUARD_MODEL_STEPS"
"""``model_steps``: judge repeated model answers (true/false, 1/0, yes/no, on/off)."""

LOOPGUARD_OUTPUT_REPETITION = "LOOPGUARD_OUTPUT_REPETITION"
"""``output_repetition``: judge model outputs that end in one repeated chunk (true/false, 1/0, yes/no, on/off)."""

LOOPGUARD_OUTPUT_REPEAT_LIMIT = "LOOPGUARD_OUTPUT_REPEAT_LIMIT"
"""``output_repeat_limit``: repeats of one chunk at the end of a model output that make it degenerate (integer)."""
