"""Configuration: defaults, precedence (arguments > TOML > environment > default) and error policy."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otel_loopguard.core.config import (
    DEFAULT_RETRYABLE_ERRORS,
    DEFAULT_VOLATILE_KEYS,
    LeasePolicy,
    LoopGuardConfig,
    Prices,
    RetryPolicy,
    ToolSettings,
    parse_bool,
)
from otel_loopguard.errors import ConfigError

FULL_TOML = """
window = 12
max_period = 4
min_repetitions = 3
frequency_limit = 4
repeat_limit = 5
max_steps = 50
max_cost_usd = 2.5
hysteresis = 2
stop_after = 2
max_nudges = 2
interventions = ["nudge", "review", "stop"]
volatile_keys = ["requestId", "my_nonce"]
signature_key = "0123456789abcdef0123"
max_traces = 100
trace_ttl_seconds = 60.0
max_tool_names = 20
max_argument_bytes = 4096
per_conversation = true
handoff_steps = false
agent_steps = false
model_steps = false
output_repetition = false
output_repeat_limit = 12
redacted_values = ["<hidden>", { value = "N/A", attributes = ["my.args"] }]
version_attributes = ["langfuse.prompt.version"]

[versions]
prompt = "p-7"
model = "m-1"

[retry]
errors = ["RateLimit", "Timeout"]
max_attempts = 5
interval_seconds = 2.0
backoff_rate = 3.0
tolerance = 0.1

[lease]
max_renewals = 1

[prices."claude-x"]
input = 5.0
output = 25.0
cache_read = 0.5
cache_write = 6.25

[prices."gpt-y"]
input = 3.0
output = 15.0

[tools."search"]
ignore_args = ["attempt"]
min_repetitions = 4
frequency_limit = 5

[tools."wait_for_job"]
exempt = true

[tools."call_api"]
retry = { errors = ["503"], max_attempts = 1, interval_seconds = 0.5 }
"""


def write(tmp_path: Path, text: str) -> Path:
    """Write a TOML file and return its path."""
    path = tmp_path / "loopguard.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    """The defaults are the documented ones."""
    c = LoopGuardConfig()
    assert (c.window, c.max_period, c.min_repetitions, c.frequency_limit, c.repeat_limit) == (10, 3, 3, 3, 3)
    assert (c.max_steps, c.max_cost_usd, c.hysteresis, c.stop_after, c.max_nudges) == (200, None, 1, 1, 1)
    assert (c.max_traces, c.trace_ttl_seconds, c.max_tool_names, c.max_argument_bytes) == (10_000, 3600.0, 100, 65_536)
    assert c.volatile_keys == DEFAULT_VOLATILE_KEYS and c.signature_key is None and c.per_conversation is False
    assert c.retry == RetryPolicy() and c.retry.errors == DEFAULT_RETRYABLE_ERRORS
    assert (c.retry.max_attempts, c.retry.interval_seconds, c.retry.backoff_rate) == (3, 1.0, 2.0)
    assert c.lease.max_renewals == 3
    assert dict(c.prices) == {} and dict(c.tools) == {} and dict(c.versions) == {}
    assert len(c.digest_key) == 32


def test_load_without_sources_is_the_default() -> None:
    """Loading with an empty environment and no file gives the defaults."""
    assert LoopGuardConfig.load(environ={}) == LoopGuardConfig()


def test_full_toml_parses(tmp_path: Path) -> None:
    """Every top-level key and every table of the TOML file is read."""
    c = LoopGuardConfig.load(write(tmp_path, FULL_TOML), environ={})
    assert (c.window, c.max_period, c.frequency_limit, c.repeat_limit, c.max_steps) == (12, 4, 4, 5, 50)
    assert (c.max_cost_usd, c.hysteresis, c.stop_after, c.max_nudges) == (2.5, 2, 2, 2)
    assert c.volatile_keys == frozenset({"requestid", "mynonce"})
    assert c.signature_key == b"0123456789abcdef0123" and c.digest_key == b"0123456789abcdef0123"
    assert (c.max_traces, c.trace_ttl_seconds, c.max_tool_names, c.max_argument_bytes) == (100, 60.0, 20, 4096)
    assert c.per_conversation is True
    assert dict(c.versions) == {"prompt": "p-7", "model": "m-1"}
    assert c.version_attributes == ("langfuse.prompt.version",)
    assert c.retry == RetryPolicy(errors=("ratelimit", "timeout"), max_attempts=5, interval_seconds=2.0,
                                  backoff_rate=3.0, tolerance=0.1)
    assert c.lease == LeasePolicy(max_renewals=1)
    assert c.prices["claude-x"] == Prices(5.0, 25.0, 0.5, 6.25)
    assert c.prices["gpt-y"] == Prices(3.0, 15.0)
    assert c.tools["search"] == ToolSettings(ignore_args=frozenset({"attempt"}), min_repetitions=4, frequency_limit=5)
    assert c.tools["wait_for_job"].exempt is True
    assert c.tools["call_api"].retry == RetryPolicy(errors=("503",), max_attempts=1, interval_seconds=0.5)
    assert "other" not in c.tools


def test_precedence_kwargs_then_toml_then_env_then_default(tmp_path: Path) -> None:
    """An argument beats the file, the file beats the environment, the environment beats the default."""
    path = write(tmp_path, "window = 12\nmax_steps = 50\n")
    env = {"LOOPGUARD_WINDOW": "15", "LOOPGUARD_MAX_STEPS": "60", "LOOPGUARD_REPEAT_LIMIT": "7"}
    c = LoopGuardConfig.load(path, environ=env, window=20)
    assert (c.window, c.max_steps, c.repeat_limit, c.hysteresis) == (20, 50, 7, 1)


def test_config_file_named_by_the_environment(tmp_path: Path) -> None:
    """LOOPGUARD_CONFIG names the file when no path is given."""
    path = write(tmp_path, "max_steps = 42\n")
    assert LoopGuardConfig.load(environ={"LOOPGUARD_CONFIG": str(path)}).max_steps == 42


def test_environment_values_of_every_type() -> None:
    """Integers, floats, booleans, strings, key lists and versions are read from the environment."""
    env = {
        "LOOPGUARD_MAX_STEPS": "9", "LOOPGUARD_MAX_COST_USD": "1.5", "LOOPGUARD_PER_CONVERSATION": "yes",
        "LOOPGUARD_SIGNATURE_KEY": "k" * 16, "LOOPGUARD_VOLATILE_KEYS": "+my_id, other",
        "LOOPGUARD_VERSION_PROMPT": "v3", "LOOPGUARD_VERSION_HARNESS": "h1",
    }
    c = LoopGuardConfig.load(environ=env)
    assert (c.max_steps, c.max_cost_usd, c.per_conversation, c.signature_key) == (9, 1.5, True, b"k" * 16)
    assert c.volatile_keys == DEFAULT_VOLATILE_KEYS | {"myid", "other"}
    assert dict(c.versions) == {"prompt": "v3", "harness": "h1"}
    assert LoopGuardConfig.load(environ={"LOOPGUARD_VOLATILE_KEYS": "a,b"}).volatile_keys == {"a", "b"}


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("WINDOW", "ten"), ("WINDOW", "0"), ("MAX_STEPS", "-3"), ("MAX_COST_USD", "cheap"),
        ("PER_CONVERSATION", "maybe"), ("HYSTERESIS", "1.5"),
        # Values of the right type that break a rule also fall back.
        ("FREQUENCY_LIMIT", "1"), ("MAX_PERIOD", "5"), ("SIGNATURE_KEY", "short"), ("TRACE_TTL_SECONDS", "0"),
    ],
)
def test_bad_environment_value_warns_and_falls_back(name: str, raw: str, caplog: pytest.LogCaptureFixture) -> None:
    """A bad LOOPGUARD_* value logs a warning naming it (and its value, except the signature key's) and the
    default is used."""
    with caplog.at_level(logging.WARNING, logger="otel_loopguard.core.config"):
        c = LoopGuardConfig.load(environ={f"LOOPGUARD_{name}": raw, "LOOPGUARD_MAX_NUDGES": "4"})
    assert getattr(c, name.lower()) == getattr(LoopGuardConfig(), name.lower())
    assert c.max_nudges == 4  # the good value beside it is kept
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 1 and f"LOOPGUARD_{name}" in messages[0]
    assert (raw in messages[0]) is (name != "SIGNATURE_KEY")


def test_environment_values_valid_only_together_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    """A window and period that only fit each other are both taken, without warnings."""
    with caplog.at_level(logging.WARNING):
        c = LoopGuardConfig.load(environ={"LOOPGUARD_WINDOW": "20", "LOOPGUARD_MAX_PERIOD": "6"})
    assert (c.window, c.max_period) == (20, 6) and caplog.records == []


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"window": 0}, "window must be a positive integer, got 0"),
        ({"window": "10"}, "window must be a positive integer, got '10'"),
        ({"max_steps": True}, "max_steps must be a positive integer, got True"),
        ({"min_repetitions": 1}, "min_repetitions must be at least 2, got 1"),
        ({"frequency_limit": 11}, "frequency_limit (11) cannot exceed window (10)"),
        ({"max_period": 4}, "window (10) must hold max_period * min_repetitions (4 * 3) calls"),
        ({"max_cost_usd": -1}, "max_cost_usd must be a non-negative number, got -1"),
        ({"trace_ttl_seconds": 0}, "trace_ttl_seconds must be positive, got 0"),
        ({"signature_key": b"short"}, "signature_key must be at least 16 bytes"),
        ({"versions": {"colour": "x"}}, "versions accepts prompt, tools, model, harness; got ['colour']"),
        ({"prices": {"m": {"input": 1}}}, "prices['m'] must be a Prices"),
        ({"nonsense": 1}, "unknown setting"),
    ],
)
def test_bad_argument_raises_naming_setting_and_value(kwargs: dict, text: str) -> None:
    """A bad keyword argument raises ConfigError whose message names the setting and the value."""
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(environ={}, **kwargs)
    assert text in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_argument_is_not_rescued_by_the_environment() -> None:
    """A bad argument raises even when the environment holds a good value for it."""
    with pytest.raises(ConfigError, match="window must be a positive integer, got -1"):
        LoopGuardConfig.load(environ={"LOOPGUARD_WINDOW": "12"}, window=-1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("window = -1\n", "window: must be a positive integer, got -1"),
        ("window = 'big'\n", "window: must be a positive integer, got 'big'"),
        ("colour = 1\n", "top level: unknown key(s) colour"),
        ("[retry]\nbackoff = 2\n", "[retry]: unknown key(s) backoff"),
        ("[retry]\nbackoff_rate = 0.5\n", "retry.backoff_rate must be >= 1, got 0.5"),
        ("[retry]\nerrors = 'RateLimit'\n", "[retry]: retry.errors must be a list of strings, got 'RateLimit'"),
        ("[retry]\ntolerance = 1.0\n", "retry.tolerance must be in [0, 1), got 1.0"),
        ("[lease]\nmax_renewals = -1\n", "lease.max_renewals must be a non-negative integer, got -1"),
        ("[lease]\nrenewals = 1\n", "[lease]: unknown key(s) renewals"),
        ('[prices."m"]\ninput = 1.0\n', '[prices."m"] needs input and output'),
        ('[prices."m"]\ninput = 1.0\noutput = -2.0\n', "prices.output must be a non-negative number, got -2.0"),
        ('[prices."m"]\ninput = 1\noutput = 1\ncached = 1\n', '[prices."m"]: unknown key(s) cached'),
        ('[tools."t"]\nexempt = "yes"\n', "tools.exempt must be true or false, got 'yes'"),
        ('[tools."t"]\nmin_repetitions = 0\n', '[tools."t"]: tools.min_repetitions must be a positive integer, got 0'),
        ('[tools."t"]\nignore = ["a"]\n', '[tools."t"]: unknown key(s) ignore'),
        ("volatile_keys = 'requestId'\n", "volatile_keys: must be a list of strings, got 'requestId'"),
        ("retry = 3\n", "[retry] must be a TOML table, got 3"),
        ("[prices]\nm = 3\n", '[prices."m"] must be a TOML table, got 3'),
        ("[tools]\nt = 'x'\n", "[tools.\"t\"] must be a TOML table, got 'x'"),
        ("prices = 3\n", "tables [retry], [lease], [prices.*] and [tools.*] must be TOML tables"),
        ("window = \n", "invalid TOML"),
    ],
)
def test_bad_toml_raises_naming_setting_and_value(tmp_path: Path, text: str, message: str) -> None:
    """A bad TOML value or key raises ConfigError naming it."""
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(write(tmp_path, text), environ={})
    assert message in str(info.value)


def test_missing_file_raises(tmp_path: Path) -> None:
    """A configuration file that cannot be read raises ConfigError naming it."""
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read configuration"):
        LoopGuardConfig.load(missing, environ={})


def test_config_is_frozen_and_mappings_are_read_only() -> None:
    """A configuration cannot be changed after validation, not even through its mappings."""
    c = LoopGuardConfig(prices={"m": Prices(1.0, 2.0)})
    with pytest.raises(AttributeError):
        c.window = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.prices["n"] = Prices(1.0, 1.0)  # type: ignore[index]


def test_volatile_keys_are_folded() -> None:
    """Configured volatile keys are folded like argument names (case, '_' and '-')."""
    assert LoopGuardConfig(volatile_keys=frozenset({"Session-ID"})).volatile_keys == {"sessionid"}


def test_retry_policy_gaps_and_matching() -> None:
    """Retryable errors match case-insensitively as substrings; gaps grow by the backoff rate less the tolerance."""
    p = RetryPolicy(interval_seconds=2.0, backoff_rate=2.0, tolerance=0.25)
    assert p.is_retryable("openai.RateLimitError") and p.is_retryable("HTTP 503 Service Unavailable")
    assert not p.is_retryable("ValueError")
    assert (p.min_gap(1), p.min_gap(2), p.min_gap(3)) == (1.5, 3.0, 6.0)


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("TRUE", True), (" on ", True), ("no", False), ("0", False)])
def test_parse_bool(raw: str, value: bool) -> None:
    """Boolean environment values accept the usual spellings."""
    assert parse_bool(raw) is value


def test_parse_bool_rejects_other_text() -> None:
    """Anything else is an error (which the environment reader turns into a warning)."""
    with pytest.raises(ValueError, match="expected true or false"):
        parse_bool("perhaps")


def test_defaults_pinned_by_value() -> None:
    """The default lists and the retry policy, written out (not compared with themselves)."""
    assert {
        "requestid", "traceid", "spanid", "parentspanid", "correlationid", "idempotencykey", "nonce", "seed",
        "randomseed", "timestamp", "ts", "currenttime", "requesttime", "createdat", "updatedat", "toolcallid",
        "callid", "runid", "messageid", "checkpointid", "checkpointns", "uuid", "cachebuster", "xrequestid",
    } == DEFAULT_VOLATILE_KEYS
    assert DEFAULT_RETRYABLE_ERRORS == (
        "ratelimit", "rate_limit", "rate limit", "toomanyrequests", "too many requests", "429", "throttl",
        "timeout", "timed out", "deadlineexceeded", "unavailable", "503", "overloaded", "529",
        "connectionerror", "connection reset",
    )
    retry = LoopGuardConfig().retry
    assert (retry.max_attempts, retry.interval_seconds, retry.backoff_rate, retry.tolerance) == (3, 1.0, 2.0, 0.2)


def test_every_environment_variable_is_listed_in_one_module() -> None:
    """The variables the configuration reads (derived from its fields) are exactly the ones the environment
    variables module lists, besides LOOPGUARD_CONFIG and LOOPGUARD_ENABLED; each has a docstring-like entry."""
    import otel_loopguard.core.environment_variables as ev
    from otel_loopguard.core.config import environment_settings

    listed = set(ev.__all__)
    assert {getattr(ev, name) for name in listed} == listed  # each constant is its own name
    derived = set(environment_settings().values())
    assert listed == derived | {"LOOPGUARD_CONFIG", "LOOPGUARD_ENABLED"}
    # The settings that are tables of their own are not environment variables.
    assert "LOOPGUARD_RETRY" not in derived and "LOOPGUARD_TOOLS" not in derived
    source = Path(ev.__file__).read_text(encoding="utf-8")
    for name in listed:
        assert f'{name} = "{name}"\n"""' in source, name  # a documented constant


def test_every_setting_is_read_from_the_environment_as_documented() -> None:
    """Each scalar setting is read from LOOPGUARD_<NAME>: a value other than the default is taken."""
    from otel_loopguard.core.config import RedactedValue, environment_settings

    values = {
        "window": ("20", 20), "max_period": ("4", 4), "min_repetitions": ("4", 4), "frequency_limit": ("4", 4),
        "repeat_limit": ("5", 5), "max_steps": ("9", 9), "max_cost_usd": ("1.5", 1.5), "hysteresis": ("2", 2),
        "permanent_errors": ("Quota", ("quota",)), "stop_after": ("2", 2), "max_nudges": ("3", 3),
        "interventions": ("review,stop", ("review", "stop")),
        "volatile_keys": ("a_b", frozenset({"ab"})), "signature_key": ("k" * 16, b"k" * 16),
        "max_traces": ("7", 7), "trace_ttl_seconds": ("5", 5.0), "max_tool_names": ("8", 8),
        "max_argument_bytes": ("99", 99), "per_conversation": ("on", True),
        "handoff_steps": ("off", False), "agent_steps": ("no", False), "model_steps": ("0", False),
        "output_repetition": ("false", False), "output_repeat_limit": ("12", 12),
        "redacted_values": ("<hidden>", (RedactedValue("<hidden>"),)),
        "version_attributes": ("a.version,b.version", ("a.version", "b.version")),
    }
    settings = {name: variable for name, variable in environment_settings().items() if "." not in name}
    assert set(settings) == set(values)
    for name, (raw, expected) in values.items():
        # A window of 30 leaves room for the larger period and repetitions.
        environ = {"LOOPGUARD_WINDOW": "30", settings[name]: raw}
        assert getattr(LoopGuardConfig.load(environ=environ), name) == expected, name


def test_every_setting_is_a_toml_key(tmp_path: Path) -> None:
    """The TOML keys are the field names: FULL_TOML plus permanent_errors sets every top-level setting."""
    import dataclasses

    text = "permanent_errors = ['Quota']\n" + FULL_TOML + '\n[conventions.acme]\nwhen = { "acme.kind" = "tool" }\n'
    c = LoopGuardConfig.load(write(tmp_path, text), environ={})
    assert c.permanent_errors == ("quota",)
    keys = {line.split("=")[0].strip() for line in text.splitlines() if "=" in line and not line.startswith(" ")}
    tables = {line.strip("[]").split(".")[0] for line in text.splitlines() if line.startswith("[")}
    assert {f.name for f in dataclasses.fields(LoopGuardConfig)} <= keys | tables


@pytest.mark.parametrize("key", ["window", "max_period", "repeat_limit"])
def test_per_tool_trace_settings_are_refused(tmp_path: Path, key: str) -> None:
    """window, max_period and repeat_limit are per trace: a tool table naming one is an error that says so."""
    with pytest.raises(ConfigError, match=rf'\[tools."t"\]: {key} is per trace, not per tool; set it at the top level'):
        LoopGuardConfig.load(write(tmp_path, f'[tools."t"]\n{key} = 5\n'), environ={})
    with pytest.raises(TypeError):
        ToolSettings(**{key: 5})  # type: ignore[arg-type]
