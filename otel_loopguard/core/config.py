"""Configuration: one frozen, validated object read from arguments, a TOML file and ``LOOPGUARD_*`` variables.

Precedence, most explicit first: keyword arguments, then the TOML file, then the
environment, then defaults. A bad argument or file value raises
:class:`ConfigError`; a bad environment value warns and falls back, because an
environment is shared with code the user does not control.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError

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
#: strands' and Mastra's redaction, ADK's legacy schema with content capture off.
DEFAULT_REDACTED_VALUES: tuple[RedactedValue, ...] = (
    RedactedValue("__REDACTED__"),
    RedactedValue("[REDACTED]"),
    RedactedValue("{}", ("gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response")),
)


def _redacted_values(value: Any) -> tuple[RedactedValue, ...]:
    if isinstance(value, (str, Mapping)) or not isinstance(value, (list, tuple, frozenset, set)):
        raise ConfigError(f"redacted_values must be a list of strings or {{value, attributes}} tables, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, RedactedValue):
            out.append(item)
        elif isinstance(item, str):
            out.append(RedactedValue(item))
        elif isinstance(item, Mapping):
            _check_keys("redacted_values entry", item, ("value", "attributes"))
            if "value" not in item:
                raise ConfigError(f"redacted_values: an entry needs a value, got {dict(item)!r}")
            attributes = item.get("attributes", ())
            if isinstance(attributes, str) or not isinstance(attributes, (list, tuple)):
                raise ConfigError(f"redacted_values: attributes must be a list of strings, got {attributes!r}")
            out.append(RedactedValue(item["value"], tuple(attributes)))
        else:
            raise ConfigError(f"redacted_values: an entry must be a string or a {{value, attributes}} table, "
                              f"got {item!r}")
    return tuple(out)


def normalize_key(key: str) -> str:
    """Fold an argument name for volatile-key matching (case, ``_`` and ``-`` ignored)."""
    return key.lower().replace("_", "").replace("-", "")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _non_negative_float(name: str, value: Any, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


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

    errors: tuple[str, ...] = DEFAULT_RETRYABLE_ERRORS
    max_attempts: int = 3
    interval_seconds: float = 1.0
    backoff_rate: float = 2.0
    tolerance: float = 0.2

    def __post_init__(self) -> None:
        if isinstance(self.errors, str) or not all(isinstance(e, str) for e in self.errors):
            raise ConfigError(f"retry.errors must be a list of strings, got {self.errors!r}")
        object.__setattr__(self, "errors", tuple(e.lower() for e in self.errors))
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 0:
            raise ConfigError(f"retry.max_attempts must be a non-negative integer, got {self.max_attempts!r}")
        _non_negative_float("retry.interval_seconds", self.interval_seconds)
        if _non_negative_float("retry.backoff_rate", self.backoff_rate) < 1.0:  # type: ignore[operator]
            raise ConfigError(f"retry.backoff_rate must be >= 1, got {self.backoff_rate!r}")
        tol = _non_negative_float("retry.tolerance", self.tolerance)
        if tol is not None and tol >= 1:
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
    """

    max_renewals: int = 3

    def __post_init__(self) -> None:
        if isinstance(self.max_renewals, bool) or not isinstance(self.max_renewals, int) or self.max_renewals < 0:
            raise ConfigError(f"lease.max_renewals must be a non-negative integer, got {self.max_renewals!r}")


@dataclass(frozen=True)
class Prices:
    """USD per million tokens for one model."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _non_negative_float(f"prices.{f.name}", getattr(self, f.name))


_DETECTOR_SETTINGS = ("window", "max_period", "min_repetitions", "frequency_limit", "repeat_limit")


@dataclass(frozen=True)
class ToolSettings:
    """Per-tool overrides.

    Args:
        exempt: calls of this tool are counted as steps but never judged as repetition.
        ignore_args: argument names removed from this tool's signature (besides the volatile keys).
        min_repetitions, frequency_limit, repeat_limit: detector thresholds for repetitions of this tool.
        window, max_period: accepted for symmetry with the top level; the window is per trace, so these only
            take effect through the top-level values.
        retry: a retry policy for this tool instead of the top-level one.
    """

    exempt: bool = False
    ignore_args: frozenset[str] = frozenset()
    window: int | None = None
    max_period: int | None = None
    min_repetitions: int | None = None
    frequency_limit: int | None = None
    repeat_limit: int | None = None
    retry: RetryPolicy | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.exempt, bool):
            raise ConfigError(f"tools.exempt must be true or false, got {self.exempt!r}")
        if isinstance(self.ignore_args, str):
            raise ConfigError(f"tools.ignore_args must be a list of names, got {self.ignore_args!r}")
        object.__setattr__(self, "ignore_args", frozenset(normalize_key(k) for k in self.ignore_args))
        for name in _DETECTOR_SETTINGS:
            value = getattr(self, name)
            if value is not None:
                _positive_int(f"tools.{name}", value)


_INT_SETTINGS = {
    "window": 10,
    "max_period": 3,
    "min_repetitions": 3,
    "frequency_limit": 3,
    "repeat_limit": 3,
    "max_steps": 200,
    "hysteresis": 1,
    "stop_after": 1,
    "max_nudges": 1,
    "max_traces": 10_000,
    "max_tool_names": 100,
    "max_argument_bytes": 65_536,
}


@dataclass(frozen=True)
class LoopGuardConfig:
    """Every otel_loopguard setting, validated once.

    Args:
        window: how many recent calls of a trace the detectors look at.
        max_period: the longest cycle (in calls) the periodicity detector looks for.
        min_repetitions: cycles a periodic suffix must hold to count as repetition.
        frequency_limit: a signature seen this many times in the window counts as repetition.
        repeat_limit: seed-000 maximal runs of identical calls at least this long are violations.
        max_steps: a trace with more tool calls than this exceeds the step budget (stop).
        max_cost_usd: a trace whose model usage costs more than this exceeds the cost budget (stop); None = no limit.
        hysteresis: consecutive evaluations with the same cycle and unchanged evidence needed to enter ``stuck``.
        stop_after: calls that stay ``stuck`` after a nudge before the run is stopped.
        max_nudges: nudges per trace; a trace that gets stuck again after them is stopped.
        volatile_keys: argument names (folded, see :func:`normalize_key`) removed at any depth before comparing.
        signature_key: HMAC key for emitted digests; a random per-process key when None.
        retry: the retry policy.
        lease: the lease policy.
        prices: USD per million tokens per model id.
        tools: per-tool overrides.
        versions: static version stamps set on every span (keys ``prompt``, ``tools``, ``model``, ``harness``).
        max_traces: how many traces are tracked at once; the least recently used is evicted beyond it.
        trace_ttl_seconds: a trace idle this long is evicted.
        max_tool_names: distinct tool names used as metric attributes before the rest become ``_OTHER``.
        max_argument_bytes: arguments or results longer than this are fingerprinted without parsing.
        per_conversation: track state per ``gen_ai.conversation.id`` instead of per trace when present.
        redacted_values: placeholders that mean "not recorded" in a call's arguments or result (strings, or
            :class:`RedactedValue` limited to some attributes); an argument object whose values are all
            placeholders is not recorded either.
        conventions: user-defined tool-span conventions, ``[conventions.NAME]`` tables as plain values; the
            conventions layer validates them (``otel_loopguard.conventions.user``).

    Raises:
        ConfigError: a value is out of range or of the wrong type; the message names the setting.
    """

    window: int = 10
    max_period: int = 3
    min_repetitions: int = 3
    frequency_limit: int = 3
    repeat_limit: int = 3
    max_steps: int = 200
    max_cost_usd: float | None = None
    hysteresis: int = 1
    stop_after: int = 1
    max_nudges: int = 1
    volatile_keys: frozenset[str] = DEFAULT_VOLATILE_KEYS
    signature_key: bytes | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    lease: LeasePolicy = field(default_factory=LeasePolicy)
    prices: Mapping[str, Prices] = field(default_factory=dict)
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    versions: Mapping[str, str] = field(default_factory=dict)
    max_traces: int = 10_000
    trace_ttl_seconds: float = 3600.0
    max_tool_names: int = 100
    max_argument_bytes: int = 65_536
    per_conversation: bool = False
    redacted_values: tuple[RedactedValue, ...] = DEFAULT_REDACTED_VALUES
    conventions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _INT_SETTINGS:
            _positive_int(name, getattr(self, name))
        if self.min_repetitions < 2:
            raise ConfigError(f"min_repetitions must be at least 2, got {self.min_repetitions!r}")
        if self.frequency_limit < 2:
            raise ConfigError(f"frequency_limit must be at least 2, got {self.frequency_limit!r}")
        if self.max_period * self.min_repetitions > self.window:
            raise ConfigError(
                f"window ({self.window}) must hold max_period * min_repetitions "
                f"({self.max_period} * {self.min_repetitions}) calls"
            )
        if self.frequency_limit > self.window:
            raise ConfigError(f"frequency_limit ({self.frequency_limit}) cannot exceed window ({self.window})")
        _non_negative_float("max_cost_usd", self.max_cost_usd, allow_none=True)
        ttl = _non_negative_float("trace_ttl_seconds", self.trace_ttl_seconds)
        if not ttl:
            raise ConfigError(f"trace_ttl_seconds must be positive, got {self.trace_ttl_seconds!r}")
        if not isinstance(self.per_conversation, bool):
            raise ConfigError(f"per_conversation must be true or false, got {self.per_conversation!r}")
        if isinstance(self.volatile_keys, str) or not all(isinstance(k, str) for k in self.volatile_keys):
            raise ConfigError(f"volatile_keys must be a list of strings, got {self.volatile_keys!r}")
        object.__setattr__(self, "volatile_keys", frozenset(normalize_key(k) for k in self.volatile_keys))
        key = self.signature_key
        if isinstance(key, str):
            key = key.encode("utf-8")
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigError("signature_key must be at least 16 bytes")
        object.__setattr__(self, "signature_key", key)
        for label, mapping, kind in (("prices", self.prices, Prices), ("tools", self.tools, ToolSettings)):
            for k, v in mapping.items():
                if not isinstance(v, kind):
                    raise ConfigError(f"{label}[{k!r}] must be a {kind.__name__}, got {v!r}")
            object.__setattr__(self, label, MappingProxyType(dict(mapping)))
        unknown = set(self.versions) - {"prompt", "tools", "model", "harness"}
        if unknown:
            raise ConfigError(f"versions accepts prompt, tools, model, harness; got {sorted(unknown)}")
        object.__setattr__(self, "versions", MappingProxyType({k: str(v) for k, v in self.versions.items()}))
        object.__setattr__(self, "redacted_values", _redacted_values(self.redacted_values))
        if not isinstance(self.conventions, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in self.conventions.items()
        ):
            raise ConfigError(f"conventions must be [conventions.NAME] tables, got {self.conventions!r}")
        object.__setattr__(self, "conventions", MappingProxyType(dict(self.conventions)))

    @property
    def digest_key(self) -> bytes:
        """The HMAC key for emitted digests (the configured one, else this process's random key)."""
        return self.signature_key or _PROCESS_KEY

    def for_tool(self, tool: str) -> ToolSettings | None:
        """The overrides for ``tool``, or None."""
        return self.tools.get(tool)

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
            path: a TOML file (see the README for its keys); ``LOOPGUARD_CONFIG`` names one when None.
            environ: the environment to read ``LOOPGUARD_*`` from (``os.environ`` when None).
            **overrides: settings that win over everything else.

        Raises:
            ConfigError: the file or an override is invalid.
        """
        env = os.environ if environ is None else environ
        from_env: dict[str, Any] = _from_env(env)
        if path is None and env.get("LOOPGUARD_CONFIG"):
            path = env["LOOPGUARD_CONFIG"]
        explicit: dict[str, Any] = _from_toml(path) if path is not None else {}
        explicit.update(overrides)
        try:
            return cls(**{**from_env, **explicit})
        except TypeError as exc:
            raise ConfigError(f"unknown setting: {exc}") from None
        except ConfigError:
            env_only = {k: v for k, v in from_env.items() if k not in explicit}
            if not env_only:
                raise
        # An environment value that passed its own type check can still break a rule
        # (frequency_limit >= 2, window vs max_period...). Arguments and the file must hold
        # on their own; environment values are then added one by one, each bad one warned about.
        accepted: dict[str, Any] = {}
        config = cls(**explicit)
        for name, value in env_only.items():
            try:
                config = cls(**{**accepted, name: value, **explicit})
            except ConfigError as exc:
                _logger.warning("ignoring LOOPGUARD_%s=%r: %s; using the default", name.upper(), value, exc)
                continue
            accepted[name] = value
        return config


# A per-process key means digests are comparable within one process only;
# users who correlate across processes set signature_key.
_PROCESS_KEY = secrets.token_bytes(32)

_ENV_FLOATS = {"max_cost_usd", "trace_ttl_seconds"}
_ENV_STRINGS = {"signature_key"}
_ENV_BOOLS = {"per_conversation"}
_ENV_LISTS = {"volatile_keys", "redacted_values"}
_ENV_VERSIONS = {"prompt", "tools", "model", "harness"}


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in (*_INT_SETTINGS, *_ENV_FLOATS, *_ENV_STRINGS, *_ENV_BOOLS, *_ENV_LISTS):
        raw = environ.get("LOOPGUARD_" + name.upper())
        if raw is None or raw.strip() == "":
            continue
        try:
            if name in _INT_SETTINGS:
                value: Any = int(raw)
                _positive_int(name, value)
            elif name in _ENV_FLOATS:
                value = float(raw)
                _non_negative_float(name, value)
            elif name in _ENV_BOOLS:
                value = parse_bool(raw)
            elif name == "volatile_keys":
                # A leading "+" extends the defaults instead of replacing them.
                extend = raw.startswith("+")
                keys = {k.strip() for k in raw.lstrip("+").split(",") if k.strip()}
                value = DEFAULT_VOLATILE_KEYS | keys if extend else frozenset(keys)
            elif name == "redacted_values":
                extend = raw.startswith("+")
                placeholders = tuple(RedactedValue(k.strip()) for k in raw.lstrip("+").split(",") if k.strip())
                value = DEFAULT_REDACTED_VALUES + placeholders if extend else placeholders
            else:
                value = raw
        except (ValueError, ConfigError) as exc:
            _logger.warning("ignoring LOOPGUARD_%s=%r: %s; using the default", name.upper(), raw, exc)
            continue
        values[name] = value
    versions = {
        k: environ["LOOPGUARD_VERSION_" + k.upper()]
        for k in _ENV_VERSIONS
        if environ.get("LOOPGUARD_VERSION_" + k.upper())
    }
    if versions:
        values["versions"] = versions
    return values


def parse_bool(raw: str) -> bool:
    """Parse a boolean environment value (true/false, 1/0, yes/no, on/off)."""
    folded = raw.strip().lower()
    if folded in ("1", "true", "yes", "on"):
        return True
    if folded in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


_TOP_KEYS = {
    "window", "max_period", "min_repetitions", "frequency_limit", "repeat_limit", "max_steps", "max_cost_usd",
    "hysteresis", "stop_after", "max_nudges", "volatile_keys", "signature_key", "retry", "lease", "prices", "tools",
    "versions", "max_traces", "trace_ttl_seconds", "max_tool_names", "max_argument_bytes", "per_conversation",
    "redacted_values", "conventions",
    "serve",  # the serve command's network settings, read and checked by otel_loopguard.serve.settings
}


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str] | tuple[str, ...]) -> None:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a TOML table, got {table!r}")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")


def _from_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    try:
        return config_values(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def config_values(data: Mapping[str, Any]) -> dict[str, Any]:
    """Turn a parsed TOML document into :class:`LoopGuardConfig` keyword arguments.

    Raises:
        ConfigError: an unknown key or a value of the wrong type, named by its path.
    """
    _check_keys("top level", data, _TOP_KEYS)
    values = {k: v for k, v in data.items() if k not in ("retry", "lease", "prices", "tools", "serve")}
    try:
        if "retry" in data:
            values["retry"] = _retry(data["retry"], "[retry]")
        if "lease" in data:
            _check_keys("[lease]", data["lease"], {"max_renewals"})
            values["lease"] = LeasePolicy(**data["lease"])
        if "prices" in data:
            prices = {}
            for model, table in data["prices"].items():
                _check_keys(f'[prices."{model}"]', table, {"input", "output", "cache_read", "cache_write"})
                if "input" not in table or "output" not in table:
                    raise ConfigError(f'[prices."{model}"] needs input and output')
                prices[model] = Prices(**table)
            values["prices"] = prices
        if "tools" in data:
            tools = {}
            for tool, table in data["tools"].items():
                where = f'[tools."{tool}"]'
                _check_keys(where, table, {"exempt", "ignore_args", "retry", *_DETECTOR_SETTINGS})
                kwargs = dict(table)
                if "retry" in kwargs:
                    kwargs["retry"] = _retry(kwargs["retry"], where + ".retry")
                try:
                    tools[tool] = ToolSettings(**kwargs)
                except ConfigError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
            values["tools"] = tools
        if "redacted_values" in values:
            values["redacted_values"] = _redacted_values(values["redacted_values"])
        if "conventions" in values and not isinstance(values["conventions"], Mapping):
            raise ConfigError(f"conventions must be [conventions.NAME] tables, got {values['conventions']!r}")
        if "volatile_keys" in values and not isinstance(values["volatile_keys"], list):
            raise ConfigError(f"volatile_keys must be a list of strings, got {values['volatile_keys']!r}")
        if "volatile_keys" in values:
            values["volatile_keys"] = frozenset(values["volatile_keys"])
    except AttributeError:
        raise ConfigError("tables [retry], [lease], [prices.*] and [tools.*] must be TOML tables") from None
    return values


def _retry(table: Mapping[str, Any], where: str) -> RetryPolicy:
    _check_keys(where, table, ("errors", "max_attempts", "interval_seconds", "backoff_rate", "tolerance"))
    kwargs = dict(table)
    if "errors" in kwargs:
        if not isinstance(kwargs["errors"], list):
            raise ConfigError(f"{where}.errors must be a list of strings, got {kwargs['errors']!r}")
        kwargs["errors"] = tuple(kwargs["errors"])
    return RetryPolicy(**kwargs)
