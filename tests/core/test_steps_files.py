"""Steps files and boolean settings: fixed inputs, the exact value or one-line error each must give.

The randomised fuzz tests prove that no input escapes as another exception; these pin what the answer is (the
README: "a hostile steps file is a one-line error naming the file"), so a changed message, location or boundary
is seen. Every expected message is written from the rule it states.
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.core.config import ConfigError, LoopGuardConfig, ToolSettings, parse_bool
from otel_loopguard.core.model import Lease, ToolCall
from otel_loopguard.core.steps import is_steps_document, parse_steps
from otel_loopguard.errors import InputError


def _error(doc: Any) -> str:
    with pytest.raises(InputError) as info:
        parse_steps(doc, "run.json")
    return str(info.value)


# --- valid documents ----------------------------------------------------------------------------------------------

def test_a_full_step_becomes_a_tool_call() -> None:
    # Every key of a step, as the README lists them: the call carries them all; the raw step keeps tool and args
    # for the step audit. "result" present (even null) means a recorded result.
    doc = [{"tool": "poll", "args": {"job": 7}, "args_captured": True, "result": "rows: 3", "error": "Timeout",
            "progress": "p1", "start": 10, "end": 11.5, "wait": {"owner": "ci", "deadline": 100}}]
    parsed = parse_steps(doc, "run.json")
    assert parsed.steps == [{"tool": "poll", "args": {"job": 7}}]
    assert parsed.calls == [ToolCall("poll", {"job": 7}, True, "rows: 3", True, "Timeout", "p1", 10.0, 11.5,
                                     Lease("ci", 100.0))]
    # A null result is a recorded result too.
    assert parse_steps([{"tool": "t", "result": None}], "x").calls[0].result_captured is True
    # No observed_at: the last step's end.
    assert parsed.observed_at == 11.5
    assert (parsed.max_steps, parsed.repeat_limit) == (None, None)


def test_defaults_of_a_minimal_step() -> None:
    # Only a tool: no arguments (an empty object, recorded), no result recorded, no times, observed at None.
    parsed = parse_steps([{"tool": "t"}], "run.json")
    assert parsed.calls == [ToolCall("t", {}, True, None, False)]
    assert parsed.steps == [{"tool": "t", "args": {}}]
    assert parsed.observed_at is None
    # No step at all: no observation time.
    assert parse_steps([], "run.json").observed_at is None
    # A start without an end: observed at the start.
    assert parse_steps([{"tool": "t", "start": 5}], "run.json").observed_at == 5.0


def test_the_object_form_and_its_options() -> None:
    # max_steps 0 and repeat_limit 0 are allowed (non-negative); observed_at wins over the last step's times.
    parsed = parse_steps({"observed_at": 50, "max_steps": 0, "repeat_limit": 0, "steps": [{"tool": "t", "end": 9}]},
                         "run.json")
    assert (parsed.observed_at, parsed.max_steps, parsed.repeat_limit) == (50.0, 0, 0)
    # A wait without owner has an empty owner.
    assert parse_steps([{"tool": "t", "wait": {"deadline": 3}}], "x").calls[0].lease == Lease("", 3.0)
    assert parse_steps([{"tool": "t", "args_captured": False}], "x").calls[0].arguments_captured is False


def test_what_counts_as_a_steps_document() -> None:
    assert is_steps_document([]) is True
    assert is_steps_document({"steps": []}) is True
    assert is_steps_document({"steps": [], "resourceSpans": []}) is False
    assert is_steps_document({"resourceSpans": []}) is False
    assert is_steps_document("steps") is False


# --- errors: the file, the place, the reason ------------------------------------------------------------------------

@pytest.mark.parametrize(("doc", "message"), [
    ({"step": []}, "run.json:top level: unknown key(s) step"),
    ({"zeta": 1, "alpha": 2, "steps": []}, "run.json:top level: unknown key(s) alpha, zeta"),
    ({"a\nb": 1, "steps": []}, "run.json:top level: unknown key(s) 'a\\nb'"),
    ({"observed_at": 1}, "run.json:top level: missing key 'steps'"),
    ({"steps": {}}, "run.json:steps: steps must be a list"),
    ([1], "run.json:steps[0]: a step must be an object, got int"),
    ([{"tool": "t", "when": 1, "why": 2}], "run.json:steps[0]: unknown key(s) when, why"),
    ([{"tool": ""}], "run.json:steps[0].tool: tool must be a non-empty string, got ''"),
    ([{"tool": "t"}, {"args": {}}], "run.json:steps[1].tool: tool must be a non-empty string, got None"),
    ([{"tool": "t", "args": [1]}], "run.json:steps[0].args: args must be an object or null, got [1]"),
    ([{"tool": "t", "args_captured": 1}], "run.json:steps[0].args_captured: args_captured must be true or false"),
    ([{"tool": "t", "error": 5}], "run.json:steps[0].error: error must be a string"),
    ([{"tool": "t", "progress": 5}], "run.json:steps[0].progress: progress must be a string"),
    ([{"tool": "t", "start": "1"}], "run.json:steps[0].start: expected a number of seconds, got '1'"),
    ([{"tool": "t", "end": True}], "run.json:steps[0].end: expected a number of seconds, got True"),
    ([{"tool": "t", "start": float("inf")}], "run.json:steps[0].start: expected a number of seconds, got inf"),
    ([{"tool": "t", "wait": {"owner": "x"}}],
     "run.json:steps[0].wait: wait must be an object with owner and deadline"),
    ([{"tool": "t", "wait": 5}], "run.json:steps[0].wait: wait must be an object with owner and deadline"),
    ([{"tool": "t", "wait": {"owner": 5, "deadline": 1}}], "run.json:steps[0].wait.owner: wait.owner must be a string"),
    ([{"tool": "t", "wait": {"deadline": "soon"}}],
     "run.json:steps[0].wait.deadline: expected a number of seconds, got 'soon'"),
    ({"max_steps": -1, "steps": []}, "run.json:max_steps: expected a non-negative integer, got -1"),
    ({"max_steps": True, "steps": []}, "run.json:max_steps: expected a non-negative integer, got True"),
    ({"repeat_limit": 2.0, "steps": []}, "run.json:repeat_limit: expected a non-negative integer, got 2.0"),
    ({"observed_at": "now", "steps": []}, "run.json:observed_at: expected a number of seconds, got 'now'"),
])
def test_errors_name_the_file_the_place_and_the_reason(doc: Any, message: str) -> None:
    # "<file>:<location>: <reason>", unknown keys sorted and joined by ", ", a key that is not printable quoted.
    assert _error(doc) == message


def test_long_integers_are_described_not_printed() -> None:
    # A number of seconds that is an integer too large for a float: shown as itself up to 40 characters, beyond
    # that described by its digit count (the message stays one short line). 10**39 has 40 digits, 10**40 has 41.
    assert _error([{"tool": "t", "start": "x" * 3}]).endswith("got 'xxx'")
    assert _error([{"tool": "t", "start": 10**400}]) == (
        "run.json:steps[0].start: expected a number of seconds, got an integer of 401 digits")
    assert _error([{"tool": "t", "start": 10**40 * 10**300}]).endswith("got an integer of 341 digits")
    # A 41-digit integer fits a float: it is a valid (if odd) time.
    assert parse_steps([{"tool": "t", "start": 10**40}], "x").calls[0].start == 1e40
    # A long string is shown whole (only integers are described).
    assert _error([{"tool": "t", "start": "y" * 45}]).endswith("got '" + "y" * 45 + "'")


# --- booleans and tool settings -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "value"), [
    ("1", True), ("true", True), ("yes", True), ("on", True), (" TRUE ", True), ("On", True),
    ("0", False), ("false", False), ("no", False), ("off", False), ("", False), ("FALSE", False), (" Off ", False),
    ("No", False),
])
def test_boolean_spellings(raw: str, value: bool) -> None:
    # true/false, 1/0, yes/no, on/off, any case, surrounding spaces ignored; empty is false.
    assert parse_bool(raw) is value


@pytest.mark.parametrize("raw", ["2", "y", "nope", "truthy"])
def test_other_boolean_text_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=f"expected true or false, got {raw!r}"):
        parse_bool(raw)


def test_per_conversation_from_the_environment() -> None:
    assert LoopGuardConfig.load(environ={"LOOPGUARD_PER_CONVERSATION": "off"}).per_conversation is False
    assert LoopGuardConfig.load(environ={"LOOPGUARD_PER_CONVERSATION": "Yes"}).per_conversation is True


def test_tool_settings_refuse_a_single_string_of_names() -> None:
    # ignore_args = "trace_token" (a string, not a list) would silently mean the names t, r, a, c, e, ...
    with pytest.raises(ConfigError, match=r"tools.ignore_args must be a list of strings, got 'trace_token'"):
        ToolSettings(ignore_args="trace_token")  # type: ignore[arg-type]
    # A list is folded like volatile keys.
    assert ToolSettings(ignore_args=frozenset({"Trace-Token"})).ignore_args == frozenset({"tracetoken"})


# --- files --------------------------------------------------------------------------------------------------------

def test_steps_file_errors_name_the_file(tmp_path: Any) -> None:
    from otel_loopguard.core.steps import load_steps

    missing = tmp_path / "missing.json"
    with pytest.raises(InputError) as info:
        load_steps(str(missing))
    # The OS's reason, not the exception's repr ("[Errno 2] ...").
    assert str(info.value) == f"{missing}: cannot read: No such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(InputError, match=r"bad.json: not valid JSON: "):
        load_steps(str(bad))
    otlp = tmp_path / "otlp.json"
    otlp.write_text('{"resourceSpans": []}')
    with pytest.raises(InputError) as info:
        load_steps(str(otlp))
    assert str(info.value) == f"{otlp}: not a steps file (expected a list of steps or an object with 'steps')"
    # UTF-8 text, whatever the locale: a tool name with an accent reads back as written.
    good = tmp_path / "good.json"
    good.write_bytes('[{"tool": "recherche_\u00e9t\u00e9"}]'.encode())
    assert load_steps(str(good)).calls[0].tool == "recherche_\u00e9t\u00e9"


def test_configuration_file_errors(tmp_path: Any) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(missing, environ={})
    assert str(info.value) == f"{missing}: cannot read configuration: No such file or directory"
    extra = tmp_path / "extra.toml"
    extra.write_text("zeta = 1\nalpha = 2\n")
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(extra, environ={})
    assert str(info.value) == f"{extra}: top level: unknown key(s) alpha, zeta"


def test_configuration_table_errors_name_the_table(tmp_path: Any) -> None:
    # A per-tool retry table with an unknown key: the path of the table is in the message.
    bad_retry = tmp_path / "retry.toml"
    bad_retry.write_text('[tools."fetch".retry]\nbogus = 1\n')
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(bad_retry, environ={})
    assert str(info.value) == f'{bad_retry}: [tools."fetch"].retry: unknown key(s) bogus'
    # prices given as a number instead of a table of models.
    bad_prices = tmp_path / "prices.toml"
    bad_prices.write_text("prices = 5\n")
    with pytest.raises(ConfigError) as info:
        LoopGuardConfig.load(bad_prices, environ={})
    assert str(info.value) == f"{bad_prices}: tables [retry], [lease], [prices.*] and [tools.*] must be TOML tables"


# --- configuration from the environment -------------------------------------------------------------------------------

def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_bad_environment_values_are_named_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    # Each ignored value is logged with its variable, its text and the reason, and the default is used.
    caplog.set_level("WARNING", logger="otel_loopguard.core.config")
    c = LoopGuardConfig.load(environ={"LOOPGUARD_WINDOW": "0", "LOOPGUARD_MAX_COST_USD": "-1",
                                      "LOOPGUARD_MAX_STEPS": "many", "LOOPGUARD_HYSTERESIS": ""})
    assert (c.window, c.max_cost_usd, c.max_steps, c.hysteresis) == (10, None, 200, 1)
    assert sorted(_warnings(caplog)) == sorted([
        "ignoring LOOPGUARD_WINDOW='0': window must be a positive integer, got 0; using the default",
        "ignoring LOOPGUARD_MAX_COST_USD='-1': max_cost_usd must be a non-negative number, got -1.0; using the default",
        "ignoring LOOPGUARD_MAX_STEPS='many': invalid literal for int() with base 10: 'many'; using the default",
    ])  # an empty variable is no setting at all: no warning


def test_environment_values_that_break_a_rule_are_dropped_one_by_one(caplog: pytest.LogCaptureFixture) -> None:
    # window=20 and max_steps=50 are fine; frequency_limit=1 passes its own type check (a positive integer) but
    # breaks the rule frequency_limit >= 2: it alone is dropped, with a warning, and the other two are kept.
    caplog.set_level("WARNING", logger="otel_loopguard.core.config")
    c = LoopGuardConfig.load(environ={"LOOPGUARD_WINDOW": "20", "LOOPGUARD_FREQUENCY_LIMIT": "1",
                                      "LOOPGUARD_MAX_STEPS": "50"})
    assert (c.window, c.frequency_limit, c.max_steps) == (20, 3, 50)
    assert _warnings(caplog) == [
        "ignoring LOOPGUARD_FREQUENCY_LIMIT=1: frequency_limit must be at least 2, got 1; using the default"]
    # Every environment value dropped: the defaults, still a configuration.
    caplog.clear()
    c = LoopGuardConfig.load(environ={"LOOPGUARD_FREQUENCY_LIMIT": "11"})
    assert isinstance(c, LoopGuardConfig) and c.frequency_limit == 3
    assert _warnings(caplog) == [
        "ignoring LOOPGUARD_FREQUENCY_LIMIT=11: frequency_limit (11) cannot exceed window (10); using the default"]


def test_extending_volatile_keys_keeps_names_that_start_with_x() -> None:
    # Only the leading "+" is taken off: "+X-Trace" adds X-Trace (folded "xtrace"), not "-Trace".
    c = LoopGuardConfig.load(environ={"LOOPGUARD_VOLATILE_KEYS": "+X-Trace"})
    assert "xtrace" in c.volatile_keys and "trace" not in c.volatile_keys


def test_a_serve_table_is_left_to_the_serve_command(tmp_path: Any) -> None:
    # The configuration file may hold the serve command's [serve] table: the detector configuration ignores it.
    path = tmp_path / "with-serve.toml"
    path.write_text('window = 12\n\n[serve]\nhost = "127.0.0.1"\n')
    assert LoopGuardConfig.load(path, environ={}).window == 12


def test_an_invalid_steps_document_names_the_file_and_the_place(tmp_path: Any) -> None:
    # A steps object with an unknown key: the error names the file, then where in it ("top level"), then what:
    # "<file>:top level: unknown key(s) bogus" (InputError joins source and location with ":"; a printable key is
    # shown as it is).
    from otel_loopguard.core.steps import load_steps

    path = tmp_path / "steps.json"
    path.write_text('{"steps": [], "bogus": 1}')
    with pytest.raises(InputError) as info:
        load_steps(str(path))
    assert str(info.value) == f"{path}:top level: unknown key(s) bogus"
    assert info.value.source == str(path)
