"""The configuration's value checks, one example each, with the message a user reads.

Each setting is a dataclass field built by ``_setting`` with a check (``_non_negative``, ``_strings``,
``_mapping_of(Prices)``...) and an environment spelling (``_extendable``...). Most of those are called once, when the
module defines its classes; the tests below call the builders as well, so a change to them shows here and not only
through the classes built at import. Every expected value is worked out from the rule the message states.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from otel_loopguard.core.config import (
    MAX_CONFIG_BYTES,
    LoopGuardConfig,
    Prices,
    RedactedValue,
    RetryPolicy,
    ToolSettings,
    _extendable,
    _mapping_of,
    _Setting,
    _setting,
    config_values,
)
from otel_loopguard.errors import ConfigError

# --- the field builder --------------------------------------------------------------------------------------------


def _check(name: str, value: object) -> object:
    return value


def test_a_setting_with_a_default_keeps_it_and_its_check_and_spelling() -> None:
    # A plain default (5): no factory; the metadata holds the check and the environment spelling under "setting",
    # which is where the configuration looks for them (_check_fields, _from_env).
    f = _setting(5, check=_check, env=int)
    assert f.default == 5
    assert f.default_factory is dataclasses.MISSING
    assert f.metadata["setting"] == _Setting(_check, int)
    assert (f.metadata["setting"].check, f.metadata["setting"].env) == (_check, int)


def test_a_setting_with_a_factory_has_no_plain_default() -> None:
    # factory=dict: each instance gets a new dict; there is no plain default, and no environment spelling (None).
    f = _setting(factory=dict, check=_check)
    assert f.default is dataclasses.MISSING
    assert f.default_factory is dict
    assert f.metadata["setting"] == _Setting(_check, None)


def test_a_setting_without_default_is_required() -> None:
    # Prices.input has no default: the class cannot be made without it (a required field).
    f = _setting(check=_check)
    assert (f.default, f.default_factory) == (dataclasses.MISSING, dataclasses.MISSING)
    with pytest.raises(TypeError):
        Prices(output=1.0)


# --- environment spellings ----------------------------------------------------------------------------------------


def test_an_extendable_list_with_a_plus_extends_the_defaults_in_order() -> None:
    # "+Xray, b+,,c": the leading "+" means "the defaults, then these"; it is stripped from the start only (the "+"
    # of "b+" stays, and so does the "X" of "Xray"); items are split at commas, stripped, empties dropped.
    parse = _extendable(("A",), tuple)
    assert parse("+Xray, b+,,c") == ("A", "Xray", "b+", "c")
    # Several leading "+" are one: lstrip removes them all.
    assert parse("++d") == ("A", "d")


def test_an_extendable_list_without_a_plus_replaces_the_defaults() -> None:
    # No leading "+": the list as given; "x+" keeps its trailing "+", " y " is stripped.
    parse = _extendable(("A",), tuple)
    assert parse("x+, y ") == ("x+", "y")
    assert parse("") == ()
    # The kind is applied to the result: a frozenset here.
    assert _extendable(frozenset({"a"}), frozenset)("b,c") == frozenset({"b", "c"})
    assert _extendable(frozenset({"a"}), frozenset)("+b") == frozenset({"a", "b"})


# --- mappings of settings -----------------------------------------------------------------------------------------


def test_a_mapping_of_prices_is_kept_read_only() -> None:
    check = _mapping_of(Prices)
    p = Prices(input=1.0, output=2.0)
    got = check("prices", {"m": p})
    assert isinstance(got, MappingProxyType)
    assert dict(got) == {"m": p}
    with pytest.raises(TypeError):
        got["n"] = p  # type: ignore[index]


def test_a_mapping_of_prices_names_what_is_wrong() -> None:
    check = _mapping_of(Prices)
    with pytest.raises(ConfigError, match=r"^prices must be a mapping of Prices, got \['m'\]$"):
        check("prices", ["m"])
    with pytest.raises(ConfigError, match=r"^prices\['m'\] must be a Prices, got 3$"):
        check("prices", {"m": 3})
    # Through the configuration: the same check, built when the class was defined.
    with pytest.raises(ConfigError, match=r"^tools\['t'\] must be a ToolSettings, got 'x'$"):
        LoopGuardConfig(tools={"t": "x"})  # type: ignore[dict-item]


# --- numbers ------------------------------------------------------------------------------------------------------


def test_non_negative_numbers_refuse_infinity_and_text() -> None:
    # A gap of "inf" seconds is no gap anyone can wait for: refused as not finite. "1" is text, not a number, and
    # must be refused with the setting's name, not fail on the comparison.
    with pytest.raises(ConfigError, match=r"^retry.interval_seconds must be a non-negative number, got inf$"):
        RetryPolicy(interval_seconds=float("inf"))
    with pytest.raises(ConfigError, match=r"^prices.input must be a non-negative number, got '1'$"):
        Prices(input="1", output=1.0)  # type: ignore[arg-type]


def test_non_negative_integers_refuse_fractions_and_text() -> None:
    # 2.5 retries is not a count; neither is "3".
    with pytest.raises(ConfigError, match=r"^retry.max_attempts must be a non-negative integer, got 2.5$"):
        RetryPolicy(max_attempts=2.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^retry.max_attempts must be a non-negative integer, got '3'$"):
        RetryPolicy(max_attempts="3")  # type: ignore[arg-type]


def test_a_positive_number_names_the_setting_in_both_errors() -> None:
    # trace_ttl_seconds must be > 0: -1 fails the non-negative part (with the setting's name), 0 the positive part.
    with pytest.raises(ConfigError, match=r"^trace_ttl_seconds must be a non-negative number, got -1.0$"):
        LoopGuardConfig(trace_ttl_seconds=-1.0)
    with pytest.raises(ConfigError, match=r"^trace_ttl_seconds must be positive, got 0$"):
        LoopGuardConfig(trace_ttl_seconds=0)
    assert LoopGuardConfig(trace_ttl_seconds=0.5).trace_ttl_seconds == 0.5


# --- lists, tables, instances -------------------------------------------------------------------------------------


def test_a_list_of_strings_refuses_other_items_and_non_lists() -> None:
    with pytest.raises(ConfigError, match=r"^volatile_keys must be a list of strings, got \['a', 1\]$"):
        LoopGuardConfig(volatile_keys=["a", 1])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^volatile_keys must be a list of strings, got 5$"):
        LoopGuardConfig(volatile_keys=5)  # type: ignore[arg-type]


def test_versions_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match=r"^versions must be a table of strings, got 'x'$"):
        LoopGuardConfig(versions="x")  # type: ignore[arg-type]


def test_a_tool_retry_must_be_a_retry_policy() -> None:
    # A per-tool retry is optional (None) or a RetryPolicy; the message names the tool setting.
    with pytest.raises(ConfigError, match=r"^tools.retry must be a RetryPolicy, got 'x'$"):
        ToolSettings(retry="x")  # type: ignore[arg-type]
    assert ToolSettings(retry=None).retry is None


# --- rules between settings, at their boundaries ------------------------------------------------------------------


def test_a_backoff_rate_of_one_is_allowed() -> None:
    # The rule is backoff_rate >= 1: 1.0 (constant gaps) and 1.5 are allowed, 0.99 is not. With interval 1 s and
    # tolerance 0.2 the shortest acceptable gap before retry n is 1 * rate ** (n - 1) * 0.8: 0.8 for every retry at
    # rate 1; 1.5 * 0.8 = 1.2 before the second retry at rate 1.5.
    assert RetryPolicy(backoff_rate=1.0).min_gap(3) == pytest.approx(0.8)
    assert RetryPolicy(backoff_rate=1.5).min_gap(2) == pytest.approx(1.2)
    with pytest.raises(ConfigError, match=r"^retry.backoff_rate must be >= 1, got 0.99$"):
        RetryPolicy(backoff_rate=0.99)


def test_a_frequency_limit_of_two_is_allowed() -> None:
    # "at least 2": 2 is allowed (two calls of one signature in the window count as repetition), 1 is not.
    assert LoopGuardConfig(frequency_limit=2).frequency_limit == 2
    with pytest.raises(ConfigError, match=r"^frequency_limit must be at least 2, got 1$"):
        LoopGuardConfig(frequency_limit=1)


# --- the TOML document --------------------------------------------------------------------------------------------


def test_a_trace_only_key_in_a_retry_table_is_just_unknown() -> None:
    # "window is per trace, not per tool" is said of tool tables only; in [retry] a window is an unknown key.
    with pytest.raises(ConfigError, match=r"^\[retry\]: unknown key\(s\) window$"):
        config_values({"retry": {"window": 5}})
    with pytest.raises(ConfigError, match=r"window is per trace, not per tool"):
        config_values({"tools": {"t": {"window": 5}}})


def test_settings_after_a_command_table_are_read() -> None:
    # A [serve] table belongs to the serve command; the settings after it in the document are still read.
    got = config_values({"serve": {"port": 1}, "window": 20, "retry": {"max_attempts": 5}})
    assert got["window"] == 20
    assert got["retry"].max_attempts == 5
    assert "serve" not in got


# --- the signature key kept out of repr and logs --------------------------------------------------------------------


def test_settings_are_shown_in_the_repr_unless_told_not_to() -> None:
    # shown defaults to True: a field appears in the dataclass's repr; shown=False keeps it out (the signature key).
    assert _setting(5, check=_check).repr is True
    assert _setting(5, check=_check, shown=False).repr is False
    text = repr(LoopGuardConfig(signature_key="k" * 16))  # type: ignore[arg-type]
    assert "window=10" in text and "max_steps=200" in text
    assert "signature_key" not in text and "kkkk" not in text


def test_a_rejected_signature_key_is_logged_as_redacted(caplog: pytest.LogCaptureFixture) -> None:
    # The warning names the variable and the reason, and shows "<redacted>" where other settings show the value.
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        LoopGuardConfig.load(environ={"LOOPGUARD_SIGNATURE_KEY": "short-secret", "LOOPGUARD_WINDOW": "zero"})
    messages = sorted(r.getMessage() for r in caplog.records)
    assert messages == [
        "ignoring LOOPGUARD_SIGNATURE_KEY=<redacted>: signature_key must be at least 16 bytes; using the default",
        "ignoring LOOPGUARD_WINDOW='zero': invalid literal for int() with base 10: 'zero'; using the default",
    ]


# --- the configuration file: a regular file of at most MAX_CONFIG_BYTES ----------------------------------------------


def test_a_file_of_exactly_the_limit_is_read_whole(tmp_path: Path) -> None:
    # 1 MiB = 1048576 bytes exactly, ending in "window = 20" without a newline: the limit is inclusive, and reading
    # one byte less would cut the "0" (window 2, which the default period and repetitions do not fit in).
    assert MAX_CONFIG_BYTES == 1_048_576
    tail = b"window = 20"
    path = tmp_path / "exact.toml"
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES - len(tail) - 1) + b"\n" + tail)
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert LoopGuardConfig.load(path, environ={}).window == 20


def test_a_file_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * MAX_CONFIG_BYTES + b"\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: a configuration file may hold at most 1048576 "
                                          r"bytes$"):
        LoopGuardConfig.load(path, environ={})


def test_a_device_or_a_directory_is_no_configuration_file(tmp_path: Path) -> None:
    # /dev/null opens at once (a character device) and fstat tells it is not a regular file. A directory opens
    # read-only too, but Python's file object refuses it (EISDIR) before the check: a read error.
    with pytest.raises(ConfigError, match=r"^/dev/null: a configuration must be a regular file$"):
        LoopGuardConfig.load("/dev/null", environ={})
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path))}: cannot read configuration: Is a directory$"):
        LoopGuardConfig.load(tmp_path, environ={})


def test_a_file_that_is_not_utf8_is_named_so(tmp_path: Path) -> None:
    # 0xff can never start a UTF-8 sequence: "invalid start byte" is the codec's reason.
    path = tmp_path / "latin.toml"
    path.write_bytes(b"# caf\xe9\nwindow = 20\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: not UTF-8 text: invalid continuation byte$"):
        LoopGuardConfig.load(path, environ={})
    path.write_bytes(b"\xff")
    with pytest.raises(ConfigError, match=r": not UTF-8 text: invalid start byte$"):
        LoopGuardConfig.load(path, environ={})


def test_the_file_is_opened_without_blocking_and_read_to_one_byte_past_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A FIFO opened for reading without O_NONBLOCK waits for a writer (forever); without O_CLOEXEC a process
    # started meanwhile inherits the descriptor. The read asks for MAX + 1 bytes: enough to tell "too large",
    # never the whole of a huge file. Observed on the real calls (the file is really opened and read).
    flags: list[int] = []
    sizes: list[int | None] = []
    real_open, real_fdopen = os.open, os.fdopen

    def spy_open(path: Any, flag: int, *rest: Any) -> int:
        flags.append(flag)
        return real_open(path, flag, *rest)

    class SpyFile:
        def __init__(self, fh: Any) -> None:
            self._fh = fh

        def read(self, size: int | None = -1) -> bytes:
            sizes.append(size)
            return self._fh.read(size)  # type: ignore[no-any-return]

        def __enter__(self) -> SpyFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self._fh.close()

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: SpyFile(real_fdopen(fd, *a, **k)))
    path = tmp_path / "small.toml"
    path.write_text("window = 20\n")
    assert LoopGuardConfig.load(path, environ={}).window == 20
    assert len(flags) == 1 and flags[0] & os.O_NONBLOCK and flags[0] & os.O_CLOEXEC
    assert flags[0] & (os.O_WRONLY | os.O_RDWR) == 0
    assert sizes == [MAX_CONFIG_BYTES + 1]


# --- redacted values ------------------------------------------------------------------------------------------------


def test_a_redacted_value_is_a_string_limited_to_a_list_of_attribute_names() -> None:
    # The attributes are kept as a tuple (a list given is converted); each part is checked with its own message.
    assert RedactedValue("x", ["a", "b"]).attributes == ("a", "b")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^redacted_values: a placeholder must be a string, got 3$"):
        RedactedValue(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^redacted_values: attributes must be a list of strings, got \['a', 1\]$"):
        RedactedValue("x", ["a", 1])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^redacted_values: attributes must be a list of strings, got 'ab'$"):
        RedactedValue("x", "ab")  # type: ignore[arg-type]


def test_redacted_values_must_be_a_list() -> None:
    # A single string is not a list of placeholders, nor is a number.
    with pytest.raises(ConfigError, match=r"^redacted_values must be a list of strings or \{value, attributes\} "
                                          r"tables, got 'x'$"):
        LoopGuardConfig(redacted_values="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^redacted_values must be a list of strings or \{value, attributes\} "
                                          r"tables, got 5$"):
        LoopGuardConfig(redacted_values=5)  # type: ignore[arg-type]
    assert LoopGuardConfig(redacted_values=["-"]).redacted_values == (RedactedValue("-"),)  # type: ignore[arg-type]
