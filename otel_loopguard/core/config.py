"""Configuration: one frozen, validated object read from arguments, a TOML file and ``LOOPGUARD_*`` variables.

Precedence, most explicit first: keyword arguments, then the TOML file, then the
environment, then defaults. A bad argument or file value raises
:class:`ConfigError`; a bad environment value warns and falls back, because an
environment is shared with code the user does not control.

Each setting is stated once, as a field: its default, its check and how the environment spells it. The TOML keys
are the field names, the environment variable of a setting ``x`` is ``LOOPGUARD_X`` (all of them are listed in
:mod:`.environment_variables`), and the tables (``[retry]``, ``[lease]``, ``[prices.*]``, ``[tools.*]``) take the
fields of their classes.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import logging
import math
import os
import re
import secrets
import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from . import environment_variables as ev
from .escape import escaped

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_logger = logging.getLogger(__name__)

#: Argument names removed before comparing calls, matched at any depth after
#: lower-casing and dropping "_" and "-" (so requestId, request_id and Request-ID match).
DEFAULT_VOLATILE_KEYS: frozenset[str] = frozenset(
    {
        "requestid", "traceid", "spanid", "parentspanid", "correlationid", "idempotencykey",
        "nonce", "seed", "randomseed", "timestamp", "ts", "currenttime", "requesttime", "createdat",
        "updatedat", "toolcallid", "callid", "runid", "messageid", "checkpointid", "checkpointns",
        "uuid", "cachebuster", "xrequestid",
    }
)

#: Error classes treated as retryable, matched case-insensitively as substrings.
DEFAULT_RETRYABLE_ERRORS: tuple[str, ...] = (
    "ratelimit", "rate_limit", "rate limit", "toomanyrequests", "too many requests", "429", "throttl",
    "timeout", "timed out", "deadlineexceeded", "unavailable", "503", "overloaded", "529",
    "connectionerror", "connection reset",
)

#: Error classes that retrying cannot fix (permission, authentication, not found, invalid argument), matched
#: case-insensitively as substrings: Python's and the model SDKs' exception names, gRPC status names, HTTP codes.
#: A stuck cycle in which every call failed with one of them is never delayed by hysteresis.
DEFAULT_PERMANENT_ERRORS: tuple[str, ...] = (
    "permission", "forbidden", "accessdenied", "access denied", "403",
    "authentication", "unauthenticated", "unauthorized", "401",
    "notfound", "not_found", "not found", "nosuch", "404",
    "invalidargument", "invalid_argument", "invalid argument", "validationerror", "badrequest", "bad request",
    "unprocessable", "valueerror", "typeerror", "400", "422",
)

#: The version stamps ``versions`` accepts (``LOOPGUARD_VERSION_<KEY>`` each).
VERSION_KEYS: tuple[str, ...] = ("prompt", "tools", "model", "harness")
#: Attribute names ``version_attributes`` accepts at most, and the longest name: each becomes an attribute of every
#: task metric, so both are bounded.
MAX_VERSION_ATTRIBUTES = 8
MAX_VERSION_ATTRIBUTE_CHARS = 128
# The namespace of loopguard's own attributes (conventions/names.py): never read as a version.
_OWN_NAMESPACE = "loopguard"

@dataclass(frozen=True)
class RedactedValue:
    """A placeholder that means "not recorded" wherever it stands for a tool call's arguments or result.

    Args:
        value: the placeholder text.
        attributes: only in these attributes (empty = in any); ADK's ``{}`` is a placeholder only in its own
            content attributes, elsewhere ``{}`` is a call without arguments.
    """

    value: str
    attributes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ConfigError(f"redacted_values: a placeholder must be a string, got {self.value!r}")
        if isinstance(self.attributes, str) or not all(isinstance(a, str) for a in self.attributes):
            raise ConfigError(f"redacted_values: attributes must be a list of strings, got {self.attributes!r}")
        object.__setattr__(self, "attributes", tuple(self.attributes))


#: Placeholders instrumentations write instead of content they do not record: OpenInference's ``hide_inputs``,
#: strands' and Mastra's redaction, ADK's legacy schema with content capture off (only in its content attributes).
DEFAULT_REDACTED_VALUES: tuple[RedactedValue, ...] = (
    RedactedValue("__REDACTED__"),
    RedactedValue("[REDACTED]"),
    RedactedValue("{}", ("gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response")),
)

# Per-tool keys that exist only at the top level: what they mean is per trace.
_TRACE_ONLY = ("window", "max_period", "repeat_limit")


def normalize_key(key: str) -> str:
    """Fold an argument name for volatile-key matching (case, ``_`` and ``-`` ignored)."""
    return key.lower().replace("_", "").replace("-", "")


def parse_bool(raw: str) -> bool:
    """Parse a boolean environment value (true/false, 1/0, yes/no, on/off)."""
    folded = raw.strip().lower()
    if folded in ("1", "true", "yes", "on"):
        return True
    if folded in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


# -- checks: each takes the setting's name and value, returns the value to keep or raises ConfigError ------------


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _non_negative(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
    return value


def _optional_non_negative(name: str, value: Any) -> Any:
    return None if value is None else _non_negative(name, value)


def _positive(name: str, value: Any) -> Any:
    if not _non_negative(name, value):
        raise ConfigError(f"{name} must be positive, got {value!r}")
    return value


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return value


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)) or not all(
        isinstance(item, str) for item in value
    ):
        raise ConfigError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)


def _lower_strings(name: str, value: Any) -> tuple[str, ...]:
    return tuple(item.lower() for item in _strings(name, value))


def _interventions(name: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    rungs = tuple(_strings(name, value))
    known = ("nudge", "review", "stop")
    if not rungs or rungs[-1] != "stop" or any(r not in known for r in rungs) or list(rungs) != sorted(
            set(rungs), key=known.index):
        raise ConfigError(f"{name} must be a subsequence of {list(known)} ending with 'stop', got {list(rungs)!r}")
    return rungs


def _folded_keys(name: str, value: Any) -> frozenset[str]:
    return frozenset(normalize_key(item) for item in _strings(name, value))


def _signature_key(name: str, value: Any) -> bytes | None:
    if isinstance(value, str):
        value = value.encode("utf-8")
    if value is not None and (not isinstance(value, bytes) or len(value) < 16):
        raise ConfigError(f"{name} must be at least 16 bytes")
    return value


def _versions(name: str, value: Any) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a table of strings, got {value!r}")
    unknown = set(value) - set(VERSION_KEYS)
    if unknown:
        raise ConfigError(f"{name} accepts {', '.join(VERSION_KEYS)}; got {sorted(unknown)}")
    return MappingProxyType({k: str(v) for k, v in value.items()})


def _version_attributes(name: str, value: Any) -> tuple[str, ...]:
    """Extra version attribute names: at most 8, each printable, at most 128 characters, none of loopguard's own and
    no id (``.id``, ``_id``): every value becomes a metric attribute."""
    names = tuple(dict.fromkeys(_strings(name, value)))
    if len(names) > MAX_VERSION_ATTRIBUTES:
        raise ConfigError(f"{name} holds at most {MAX_VERSION_ATTRIBUTES} attribute names, got {len(names)}")
    for item in names:
        if not item or len(item) > MAX_VERSION_ATTRIBUTE_CHARS or escaped(item) != item or " " in item:
            raise ConfigError(f"{name}: {escaped(item, 40)!r} is not an attribute name (1 to "
                              f"{MAX_VERSION_ATTRIBUTE_CHARS} printable characters, no space)")
        if item.partition(".")[0] == _OWN_NAMESPACE:
            raise ConfigError(f"{name}: {item!r} is one of loopguard's own attributes")
        if item.lower().endswith((".id", "_id")):
            raise ConfigError(f"{name}: {item!r} names an id, not a version (each value becomes a metric attribute)")
    return names


def _instance_of(kind: type) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if not isinstance(value, kind):
            raise ConfigError(f"{name} must be a {kind.__name__}, got {value!r}")
        return value

    return check


def _mapping_of(kind: type) -> Callable[[str, Any], Mapping[str, Any]]:
    def check(name: str, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping of {kind.__name__}, got {value!r}")
        for k, v in value.items():
            if not isinstance(v, kind):
                raise ConfigError(f"{name}[{k!r}] must be a {kind.__name__}, got {v!r}")
        return MappingProxyType(dict(value))

    return check


def _redacted_values(name: str, value: Any) -> tuple[RedactedValue, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ConfigError(f"{name} must be a list of strings or {{value, attributes}} tables, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, RedactedValue):
            out.append(item)
        elif isinstance(item, str):
            out.append(RedactedValue(item))
        elif isinstance(item, Mapping):
            _check_keys(f"{name} entry", item, ("value", "attributes"))
            if "value" not in item:
                raise ConfigError(f"{name}: an entry needs a value, got {dict(item)!r}")
            attributes = item.get("attributes", ())
            if isinstance(attributes, str) or not isinstance(attributes, (list, tuple)):
                raise ConfigError(f"{name}: attributes must be a list of strings, got {attributes!r}")
            out.append(RedactedValue(item["value"], tuple(attributes)))
        else:
            raise ConfigError(f"{name}: an entry must be a string or a {{value, attributes}} table, got {item!r}")
    return tuple(out)


def _convention_tables(name: str, value: Any) -> Mapping[str, Mapping[str, Any]]:
    # Only the shape: the conventions layer validates each table (otel_loopguard.conventions.user).
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                 for k, v in value.items()):
        raise ConfigError(f"{name} must be [conventions.NAME] tables, got {value!r}")
    return MappingProxyType(dict(value))


# -- environment spellings ------------------------------------------------------------------------------------------


def _extendable(defaults: Any, kind: Callable[[Any], Any]) -> Callable[[str], Any]:
    """A comma-separated list; a leading ``+`` extends ``defaults`` instead of replacing them."""

    def parse(raw: str) -> Any:
        items = [item.strip() for item in raw.lstrip("+").split(",") if item.strip()]
        if raw.startswith("+"):
            return kind([*defaults, *items])
        return kind(items)

    return parse


def _text(raw: str) -> str:
    return raw


# -- fields -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    check: Callable[[str, Any], Any]
    env: Callable[[str], Any] | None


def _setting(default: Any = dataclasses.MISSING, *, check: Callable[[str, Any], Any],
             env: Callable[[str], Any] | None = None, factory: Any = dataclasses.MISSING,
             shown: bool = True) -> Any:
    """A field with its check and its environment spelling (None: not read from the environment).

    ``shown=False`` keeps the value out of the dataclass's repr.
    """
    return dataclasses.field(default=default, default_factory=factory, repr=shown,
                             metadata={"setting": _Setting(check, env)})


def _check_fields(obj: Any, prefix: str = "") -> None:
    """Run every field's check, keeping the value it returns (lists become tuples, mappings read-only)."""
    for f in dataclasses.fields(obj):
        setting = f.metadata.get("setting")
        if setting is not None:
            value = getattr(obj, f.name)
            checked = setting.check(prefix + f.name, value)
            if checked is not value:
                object.__setattr__(obj, f.name, checked)


@dataclass(frozen=True)
class RetryPolicy:
    """When a repeated failing call is a retry rather than a loop.

    Args:
        errors: error classes that may be retried, matched case-insensitively as substrings of the call's error type.
        max_attempts: retries allowed after the first call.
        interval_seconds: expected gap before the first retry.
        backoff_rate: each further gap is this many times the previous one.
        tolerance: fraction by which an observed gap may fall short of the expected one.
    """

    errors: tuple[str, ...] = _setting(DEFAULT_RETRYABLE_ERRORS, check=_lower_strings)
    max_attempts: int = _setting(3, check=_non_negative_int)
    interval_seconds: float = _setting(1.0, check=_non_negative)
    backoff_rate: float = _setting(2.0, check=_non_negative)
    tolerance: float = _setting(0.2, check=_non_negative)

    def __post_init__(self) -> None:
        _check_fields(self, "retry.")
        if self.backoff_rate < 1.0:
            raise ConfigError(f"retry.backoff_rate must be >= 1, got {self.backoff_rate!r}")
        if self.tolerance >= 1:
            raise ConfigError(f"retry.tolerance must be in [0, 1), got {self.tolerance!r}")

    def is_retryable(self, error: str) -> bool:
        """Return True when ``error`` names a retryable error class."""
        folded = error.lower()
        return any(pattern in folded for pattern in self.errors)

    def min_gap(self, retry_number: int) -> float:
        """The shortest acceptable gap, in seconds, before retry ``retry_number`` (1 = first retry)."""
        expected = self.interval_seconds * self.backoff_rate ** (retry_number - 1)
        return expected * (1.0 - self.tolerance)


@dataclass(frozen=True)
class LeasePolicy:
    """Limits on dependency leases (declared waits).

    Args:
        max_renewals: how many times a lease may be extended before it stops explaining repetition.
        max_seconds: the furthest a lease's deadline counts after the call that declares or renews it; a later
            deadline is cut to it, so a deadline of 1e308 cannot keep a loop waiting for ever.
    """

    max_renewals: int = _setting(3, check=_non_negative_int)
    max_seconds: float = _setting(3600.0, check=_positive)

    def __post_init__(self) -> None:
        _check_fields(self, "lease.")


@dataclass(frozen=True)
class Prices:
    """USD per million tokens for one model.

    Args:
        input: price of input tokens (the cached ones excluded).
        output: price of output tokens.
        cache_read: price of input tokens read from the provider's cache.
        cache_write: price of input tokens written to the provider's cache.
    """

    input: float = _setting(check=_non_negative)
    output: float = _setting(check=_non_negative)
    cache_read: float = _setting(0.0, check=_non_negative)
    cache_write: float = _setting(0.0, check=_non_negative)

    def __post_init__(self) -> None:
        _check_fields(self, "prices.")


def _optional_positive_int(name: str, value: Any) -> int | None:
    return None if value is None else _positive_int(name, value)


def _optional_positive(name: str, value: Any) -> float | None:
    return None if value is None else float(_positive(name, value))


def _optional_pattern(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a regular expression (text), got {value!r}")
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(f"{name} is not a valid regular expression: {exc}") from None
    return value


def _optional_retry(name: str, value: Any) -> RetryPolicy | None:
    return None if value is None else _instance_of(RetryPolicy)(name, value)


@dataclass(frozen=True)
class ToolSettings:
    """Per-tool overrides.

    The window, the longest period and the step audit's repeat limit are per trace, so they are set at the top
    level only (a tool table that names one is an error).

    Args:
        exempt: calls of this tool are counted as steps but never judged as repetition.
        ignore_args: argument names removed from this tool's signature (besides the volatile keys).
        min_repetitions: cycles a periodic suffix containing this tool must hold (the largest of the cycle's tools).
        frequency_limit: calls of one signature of this tool in the window that count as repetition.
        retry: a retry policy for this tool instead of the top-level one.
        wait_seconds: the tool is polled (a job's status): repeated calls with identical results are ``waiting``
            (rule ``lease``, the tool as owner) for this long from the first identical call, then judged as usual.
        wait_until: a regular expression; a result it matches ends the wait (the job is done), so polling on
            after it is judged as usual.
    """

    exempt: bool = _setting(False, check=_flag)
    ignore_args: frozenset[str] = _setting(frozenset(), check=_folded_keys)
    min_repetitions: int | None = _setting(None, check=_optional_positive_int)
    frequency_limit: int | None = _setting(None, check=_optional_positive_int)
    retry: RetryPolicy | None = _setting(None, check=_optional_retry)  # noqa: RUF009 - a dataclasses.field
    wait_seconds: float | None = _setting(None, check=_optional_positive)
    wait_until: str | None = _setting(None, check=_optional_pattern)

    def __post_init__(self) -> None:
        _check_fields(self, "tools.")
        # As at the top level: one call is not a repetition (a limit of 1 would make every call of the tool stuck).
        for name in ("min_repetitions", "frequency_limit"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ConfigError(f"tools.{name} must be at least 2, got {value!r}")


@dataclass(frozen=True)
class LoopGuardConfig:
    """Every otel_loopguard setting, validated once.

    Args:
        window: how many recent calls of a trace the detectors look at.
        max_period: the longest cycle (in calls) the periodicity detector looks for.
        min_repetitions: cycles a periodic suffix must hold to count as repetition.
        frequency_limit: a signature seen this many times in the window counts as repetition.
        repeat_limit: step audit: maximal runs of identical consecutive calls at least this long are violations.
        max_steps: a trace with more tool calls than this exceeds the step budget (stop).
        max_cost_usd: a trace whose model usage costs more than this exceeds the cost budget (stop); None = no limit.
        hysteresis: consecutive evaluations with the same cycle and unchanged evidence needed to enter ``stuck``;
            never applied to a budget or to a cycle in which every call failed with a permanent error.
        permanent_errors: error classes that retrying cannot fix, matched case-insensitively as substrings.
        stop_after: calls that stay ``stuck`` after a nudge before the run is stopped.
        max_nudges: nudges per trace; a trace that gets stuck again after them is stopped.
        interventions: the ladder's rungs in order, a subsequence of ``nudge``, ``review``, ``stop`` ending with
            ``stop``; None: nudge, review, stop when a review handler is registered, else nudge, stop.
        volatile_keys: argument names (folded, see :func:`normalize_key`) removed at any depth before comparing.
        signature_key: HMAC key for emitted digests; a random per-process key when None.
        retry: the retry policy.
        lease: the lease policy.
        prices: USD per million tokens per model id.
        tools: per-tool overrides.
        versions: static version stamps set on every span (keys ``prompt``, ``tools``, ``model``, ``harness``).
        version_attributes: more span or resource attributes to read as versions (a prompt or tool-set version your
            instrumentation records, e.g. ``langfuse.prompt.version``), at most 8 names. Always read, without
            listing them: ``service.version``, ``gen_ai.agent.version``, ``gen_ai.request.model`` and the
            ``app.*.version`` stamps. Each goes on verdict events and task metrics (the earliest span that has it
            gives its value; values are escaped and cut at 128 characters), so no id (``.id``, ``_id``) is accepted.
        max_traces: how many traces are tracked at once; the least recently used is evicted beyond it.
        trace_ttl_seconds: a trace idle this long is evicted.
        max_tool_names: distinct tool names used as metric attributes before the rest become ``_OTHER``.
        max_argument_bytes: arguments or results longer than this are fingerprinted without parsing.
        per_conversation: track state per ``gen_ai.conversation.id`` instead of per trace when present.
        handoff_steps: judge hand-offs between agents (a sequence of their own per trace).
        agent_steps: judge sub-agent invocations (an agent span under another agent's span).
        model_steps: judge model turns that produced the same answer with nothing new in the conversation.
        output_repetition: judge a single model output whose tail is one chunk repeated.
        output_repeat_limit: times a chunk must repeat at the end of a model output to count as degenerate.
        redacted_values: placeholders that mean "not recorded" in a call's arguments or result (strings, or
            :class:`RedactedValue` limited to some attributes); an object whose values are all placeholders (as
            arguments or as a result) is not recorded either.
        conventions: user-defined tool-span conventions, ``[conventions.NAME]`` tables as plain values; the
            conventions layer validates them (``otel_loopguard.conventions.user``).

    Raises:
        ConfigError: a value is out of range or of the wrong type; the message names the setting.
    """

    window: int = _setting(10, check=_positive_int, env=int)
    max_period: int = _setting(3, check=_positive_int, env=int)
    min_repetitions: int = _setting(3, check=_positive_int, env=int)
    frequency_limit: int = _setting(3, check=_positive_int, env=int)
    repeat_limit: int = _setting(3, check=_positive_int, env=int)
    max_steps: int = _setting(200, check=_positive_int, env=int)
    max_cost_usd: float | None = _setting(None, check=_optional_non_negative, env=float)
    hysteresis: int = _setting(1, check=_positive_int, env=int)
    permanent_errors: tuple[str, ...] = _setting(
        DEFAULT_PERMANENT_ERRORS, check=_lower_strings, env=_extendable(DEFAULT_PERMANENT_ERRORS, tuple))
    stop_after: int = _setting(1, check=_positive_int, env=int)
    max_nudges: int = _setting(1, check=_positive_int, env=int)
    interventions: tuple[str, ...] | None = _setting(None, check=_interventions, env=_extendable((), tuple))
    volatile_keys: frozenset[str] = _setting(
        DEFAULT_VOLATILE_KEYS, check=_folded_keys, env=_extendable(DEFAULT_VOLATILE_KEYS, frozenset))
    # Never in a repr (nor in a log line, see _shown): whoever holds it can forge and invert digests.
    signature_key: bytes | None = _setting(None, check=_signature_key, env=_text, shown=False)
    retry: RetryPolicy = _setting(factory=RetryPolicy, check=_instance_of(RetryPolicy))  # noqa: RUF009 - a dataclasses.field
    lease: LeasePolicy = _setting(factory=LeasePolicy, check=_instance_of(LeasePolicy))  # noqa: RUF009 - a dataclasses.field
    prices: Mapping[str, Prices] = _setting(factory=dict, check=_mapping_of(Prices))
    tools: Mapping[str, ToolSettings] = _setting(factory=dict, check=_mapping_of(ToolSettings))
    # From LOOPGUARD_VERSION_<KEY>, one variable per key (see _from_env).
    versions: Mapping[str, str] = _setting(factory=dict, check=_versions)
    version_attributes: tuple[str, ...] = _setting((), check=_version_attributes, env=_extendable((), tuple))
    max_traces: int = _setting(10_000, check=_positive_int, env=int)
    trace_ttl_seconds: float = _setting(3600.0, check=_positive, env=float)
    max_tool_names: int = _setting(100, check=_positive_int, env=int)
    max_argument_bytes: int = _setting(65_536, check=_positive_int, env=int)
    per_conversation: bool = _setting(False, check=_flag, env=parse_bool)
    handoff_steps: bool = _setting(True, check=_flag, env=parse_bool)
    agent_steps: bool = _setting(True, check=_flag, env=parse_bool)
    model_steps: bool = _setting(True, check=_flag, env=parse_bool)
    output_repetition: bool = _setting(True, check=_flag, env=parse_bool)
    output_repeat_limit: int = _setting(10, check=_positive_int, env=int)
    redacted_values: tuple[RedactedValue, ...] = _setting(
        DEFAULT_REDACTED_VALUES, check=_redacted_values, env=_extendable(DEFAULT_REDACTED_VALUES, tuple))
    conventions: Mapping[str, Mapping[str, Any]] = _setting(factory=dict, check=_convention_tables)

    def __post_init__(self) -> None:
        _check_fields(self)
        # Rules that tie settings together.
        if self.min_repetitions < 2:
            raise ConfigError(f"min_repetitions must be at least 2, got {self.min_repetitions!r}")
        if self.output_repeat_limit < 2:
            raise ConfigError(f"output_repeat_limit must be at least 2, got {self.output_repeat_limit!r}")
        if self.frequency_limit < 2:
            raise ConfigError(f"frequency_limit must be at least 2, got {self.frequency_limit!r}")
        if self.max_period * self.min_repetitions > self.window:
            raise ConfigError(
                f"window ({self.window}) must hold max_period * min_repetitions "
                f"({self.max_period} * {self.min_repetitions}) calls"
            )
        if self.frequency_limit > self.window:
            raise ConfigError(f"frequency_limit ({self.frequency_limit}) cannot exceed window ({self.window})")
        for tool, settings in self.tools.items():
            if settings.frequency_limit is not None and settings.frequency_limit > self.window:
                raise ConfigError(f"tools.{tool}.frequency_limit ({settings.frequency_limit}) cannot exceed window "
                                  f"({self.window})")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickled as its settings, rebuilt through the constructor; never with the signature key (a pickle is
        stored or sent: the unpickling process uses its own key unless it sets one)."""
        return _rebuilt, ({f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                           if f.name != "signature_key"},)

    def __copy__(self) -> LoopGuardConfig:
        return dataclasses.replace(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> LoopGuardConfig:
        # Within the process, a copy keeps the signature key (the pickle route would drop it).
        settings = {f.name: copy.deepcopy(_plain(getattr(self, f.name)), memo) for f in dataclasses.fields(self)}
        return type(self)(**settings)

    @property
    def digest_key(self) -> bytes:
        """The HMAC key for emitted digests (the configured one, else this process's random key)."""
        return self.signature_key or _PROCESS_KEY

    def is_permanent(self, error: str) -> bool:
        """Whether ``error`` names an error class that retrying cannot fix."""
        folded = error.lower()
        return any(pattern in folded for pattern in self.permanent_errors)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> LoopGuardConfig:
        """Build a configuration from defaults, the environment, a TOML file and keyword arguments.

        Args:
            path: a TOML file (its keys: docs/configuration.md); ``LOOPGUARD_CONFIG`` names one when None.
            environ: the environment to read ``LOOPGUARD_*`` from (``os.environ`` when None).
            **overrides: settings that win over everything else.

        Raises:
            ConfigError: the file or an override is invalid.
        """
        env = os.environ if environ is None else environ
        from_env: dict[str, Any] = _from_env(env)
        if path is None and env.get(ev.LOOPGUARD_CONFIG):
            path = env[ev.LOOPGUARD_CONFIG]
        explicit: dict[str, Any] = _from_toml(path) if path is not None else {}
        from_file = set(explicit) - set(overrides)
        explicit.update(overrides)
        try:
            return cls._combined(from_env, explicit)
        except ConfigError as exc:
            raise (exc if path is None else _in_file(exc, path, from_file)) from None

    @classmethod
    def _combined(cls, from_env: dict[str, Any], explicit: dict[str, Any]) -> LoopGuardConfig:
        """The configuration of ``explicit`` values (file and arguments) over valid environment values."""
        try:
            return cls(**{**from_env, **explicit})
        except TypeError as exc:
            raise ConfigError(f"unknown setting: {exc}") from None
        except ConfigError:
            env_only = {k: v for k, v in from_env.items() if k not in explicit}
            if not env_only:
                raise
        # An environment value that passed its own check can still break a rule
        # (frequency_limit >= 2, window vs max_period...). Arguments and the file must hold
        # on their own; environment values are then added one by one, each bad one warned about.
        accepted: dict[str, Any] = {}
        config = cls(**explicit)
        for name, value in env_only.items():
            try:
                config = cls(**{**accepted, name: value, **explicit})
            except ConfigError as exc:
                _logger.warning("ignoring %s=%s: %s; using the default", env_name(name), _shown(name, value), exc)
                continue
            accepted[name] = value
        return config


# A per-process key means digests are comparable within one process only;
# users who correlate across processes set signature_key.
_PROCESS_KEY = secrets.token_bytes(32)

# The signature keys of live configurations, by id: kept out of the instance's __dict__ so that vars(), a pickle
# or a debugger's dump of a configuration never shows it. An entry leaves with its configuration (weakref.finalize).
_SIGNATURE_KEYS: dict[int, bytes] = {}


def _get_signature_key(config: LoopGuardConfig) -> bytes | None:
    return _SIGNATURE_KEYS.get(id(config))


def _set_signature_key(config: LoopGuardConfig, value: bytes | None) -> None:
    key = id(config)
    if value is None:
        _SIGNATURE_KEYS.pop(key, None)
        return
    if key not in _SIGNATURE_KEYS:
        weakref.finalize(config, _SIGNATURE_KEYS.pop, key, None)
    _SIGNATURE_KEYS[key] = value


# The dataclass keeps the field (constructor argument, equality, replace()); its storage is the table above. Set
# once by the generated __init__ and by the field check, through object.__setattr__, which honours the property.
LoopGuardConfig.signature_key = property(_get_signature_key, _set_signature_key)  # type: ignore[assignment]


def _plain(value: Any) -> Any:
    """``value`` with read-only mappings (at any depth) as plain dicts, for rebuilding through the constructor."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _rebuilt(settings: dict[str, Any]) -> LoopGuardConfig:
    """A configuration from its pickled settings."""
    return LoopGuardConfig(**settings)

_FIELDS = {f.name: f for f in dataclasses.fields(LoopGuardConfig)}

#: Tables of the configuration file that belong to one command, which reads and checks them itself
#: (``[serve]``: otel_loopguard.serve.settings; ``[calibrate]``: the calibrate command).
COMMAND_TABLES = ("serve", "calibrate")


def env_name(setting: str) -> str:
    """The environment variable of a top-level setting (``window`` -> ``LOOPGUARD_WINDOW``)."""
    return "LOOPGUARD_" + setting.upper()


def environment_settings() -> dict[str, str]:
    """Every setting read from the environment, with its variable (the versions: one variable per key)."""
    names = {name: env_name(name) for name, f in _FIELDS.items() if f.metadata["setting"].env is not None}
    names.update({f"versions.{key}": "LOOPGUARD_VERSION_" + key.upper() for key in VERSION_KEYS})
    return names


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, f in _FIELDS.items():
        setting = f.metadata["setting"]
        if setting.env is None:
            continue
        variable = env_name(name)
        raw = environ.get(variable)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = setting.check(name, setting.env(raw))
        except (ValueError, ConfigError) as exc:
            _logger.warning("ignoring %s=%s: %s; using the default", variable, _shown(name, raw), exc)
            continue
        values[name] = value
    versions = {key: environ["LOOPGUARD_VERSION_" + key.upper()] for key in VERSION_KEYS
                if environ.get("LOOPGUARD_VERSION_" + key.upper())}
    if versions:
        values["versions"] = versions
    return values


def _shown(name: str, value: Any) -> str:
    """A setting's value as a log line may show it: the signature key never."""
    return "<redacted>" if name == "signature_key" else repr(value)


# -- the TOML file ----------------------------------------------------------------------------------------------------


def _check_keys(where: str, table: Any, allowed: Any) -> None:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a TOML table, got {table!r}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        named = ", ".join(_with_suggestion(str(key), allowed) for key in unknown)
        raise ConfigError(f"{where}: unknown key(s) {named}")


def _with_suggestion(key: str, allowed: Any) -> str:
    """``key``, followed by ``(did you mean NAME?)`` when a known key is spelled nearly the same."""
    close = difflib.get_close_matches(key, [str(name) for name in allowed], n=1, cutoff=0.75)
    return f"{key} (did you mean {close[0]}?)" if close else key


def _in_file(exc: ConfigError, path: str | os.PathLike[str], keys: Any) -> ConfigError:
    """``exc`` naming the file and the key when the setting it is about came from the file
    (``loopguard.toml: window: must be a positive integer, got 'ten'``); else ``exc`` itself."""
    message = str(exc)
    key = message.split(" ", 1)[0].split(".", 1)[0].split("[", 1)[0].rstrip(":")
    if key not in keys or str(path) in message:
        return exc
    rest = message[len(message.split(" ", 1)[0]):].lstrip(" :")
    return ConfigError(f"{path}: {message.split(' ', 1)[0].rstrip(':')}: {rest}")


#: The largest configuration file read (a price table of thousands of models is far smaller).
MAX_CONFIG_BYTES = 1 << 20


def _read_config_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a configuration file: a regular file of at most :data:`MAX_CONFIG_BYTES`.

    Opened without blocking and checked on the open descriptor, so a FIFO, a device or a huge file named by
    ``LOOPGUARD_CONFIG`` is refused instead of hanging or filling memory.
    """
    import stat  # noqa: PLC0415

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: a configuration must be a regular file")
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: a configuration file may hold at most {MAX_CONFIG_BYTES} bytes")
    return data


def read_config_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML document of a configuration file (a regular UTF-8 file of at most :data:`MAX_CONFIG_BYTES`).

    Raises:
        ConfigError: the file cannot be read, is not a regular file, is too large, not UTF-8 or not TOML.
    """
    try:
        return tomllib.loads(_read_config_file(path).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _table(kind: type, where: str, table: Any) -> Any:
    """An instance of the dataclass ``kind`` from a TOML table whose keys are its fields."""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    if kind is ToolSettings and isinstance(table, Mapping):
        for key in _TRACE_ONLY:
            if key in table:
                raise ConfigError(f"{where}: {key} is per trace, not per tool; set it at the top level")
    _check_keys(where, table, fields)
    required = [name for name, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if any(name not in table for name in required):
        raise ConfigError(f"{where} needs {' and '.join(required)}")
    kwargs = dict(table)
    if "retry" in kwargs and kind is ToolSettings:
        kwargs["retry"] = _table(RetryPolicy, where + ".retry", kwargs["retry"])
    try:
        return kind(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _named_tables(kind: type, label: str, tables: Any) -> dict[str, Any]:
    if not isinstance(tables, Mapping):
        raise ConfigError("tables [retry], [lease], [prices.*] and [tools.*] must be TOML tables")
    return {name: _table(kind, f'[{label}."{name}"]', table) for name, table in tables.items()}


# How the TOML file spells the settings that are tables; the other keys are taken as they are.
_TOML_TABLES: dict[str, Callable[[Any], Any]] = {
    "retry": lambda table: _table(RetryPolicy, "[retry]", table),
    "lease": lambda table: _table(LeasePolicy, "[lease]", table),
    "prices": lambda tables: _named_tables(Prices, "prices", tables),
    "tools": lambda tables: _named_tables(ToolSettings, "tools", tables),
    "redacted_values": lambda value: _redacted_values("redacted_values", value),
    "conventions": lambda tables: _convention_tables("conventions", tables),
}


def _from_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    data = read_config_toml(path)
    try:
        return config_values(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def config_values(data: Mapping[str, Any]) -> dict[str, Any]:
    """Turn a parsed TOML document into :class:`LoopGuardConfig` keyword arguments.

    Raises:
        ConfigError: an unknown key or a value of the wrong type, named by its path.
    """
    _check_keys("top level", data, (*_FIELDS, *COMMAND_TABLES))
    values = {}
    for name, value in data.items():
        if name in COMMAND_TABLES:
            continue  # read and checked by the command that owns the table
        convert = _TOML_TABLES.get(name)
        values[name] = convert(value) if convert is not None else value
    return values
