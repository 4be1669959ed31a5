"""Fuzzing the steps-file reader: generated valid documents, the same documents mutated (wrong types, missing and
unknown keys, NaN/Infinity, huge numbers, deep nesting, non-object steps, random JSON) and damaged files (truncated,
invalid UTF-8) go through ``parse_steps`` and through ``otel-loopguard audit``.

What must hold: a bad document is an ``InputError`` (exit status 2 and one ``otel-loopguard: error:`` line naming
the file), never another exception and never a hang; a valid document always audits (exit 0 or 1).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard import cli
from otel_loopguard.core.steps import StepsFile, is_steps_document, parse_steps
from otel_loopguard.errors import InputError

SOURCE = "fuzz.json"
STEP_KEYS = ("tool", "args", "args_captured", "result", "error", "progress", "start", "end", "wait")
# Per example: the CLI on a few kilobytes of JSON takes milliseconds; ten seconds means it is stuck.
HANG_SECONDS = 10
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# -- strategies ---------------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
# Values a hostile file can hold that ordinary JSON generators rarely produce.
nasty_values = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -(10**400), 1e308, -0.0, True, False, None, "", [], {},
                     "\ud800", "\x00", "x" * 5_000]),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.builds(lambda depth: _nested(depth), st.integers(1, 400)),
    json_values,
)
seconds = st.floats(min_value=0, max_value=2e9, allow_nan=False)


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@st.composite
def valid_steps(draw: st.DrawFn) -> Any:
    """A steps document the reader must accept: a bare list or an object with options."""
    tools = draw(st.lists(st.sampled_from(["search", "read_file", "fetch", "ünïcode"]), min_size=1, max_size=3,
                          unique=True))
    steps = []
    for _ in range(draw(st.integers(0, 12))):
        step: dict[str, Any] = {"tool": draw(st.sampled_from(tools))}
        if draw(st.booleans()):
            step["args"] = draw(st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3))
        if draw(st.booleans()):
            step["args_captured"] = draw(st.booleans())
        if draw(st.booleans()):
            step["result"] = draw(json_values)
        for name in ("error", "progress"):
            if draw(st.integers(0, 3)) == 0:
                step[name] = draw(st.none() | st.text(max_size=8))
        if draw(st.booleans()):
            step["start"] = draw(seconds)
            step["end"] = step["start"] + draw(st.floats(0, 60))
        if draw(st.integers(0, 5)) == 0:
            step["wait"] = {"owner": draw(st.text(max_size=6)), "deadline": draw(seconds)}
        steps.append(step)
    if draw(st.booleans()):
        return steps
    doc: dict[str, Any] = {"steps": steps}
    if draw(st.booleans()):
        doc["observed_at"] = draw(seconds)
    if draw(st.booleans()):
        doc["max_steps"] = draw(st.integers(1, 50))
    if draw(st.booleans()):
        doc["repeat_limit"] = draw(st.integers(1, 10))
    return doc


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, (*prefix, i))


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[head] = _replace(doc[head], rest, value)
    return copy


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    head, rest = path[0], path[1:]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    if rest:
        copy[head] = _delete(doc[head], rest)
    else:
        del copy[head]
    return copy


@st.composite
def mutated_steps(draw: st.DrawFn) -> Any:
    """A valid document with one to three mutations anywhere in it."""
    doc = draw(valid_steps())
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "unknown_key", "wrong_step", "swap_container"]))
        if action == "replace":
            doc = _replace(doc, path, draw(nasty_values))
        elif action == "delete" and path:
            doc = _delete(doc, path)
        elif action == "unknown_key":
            target = _get(doc, path)
            if isinstance(target, dict):
                key = draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in STEP_KEYS and k != "steps"))
                doc = _replace(doc, path, {**target, key: draw(json_values)})
        elif action == "wrong_step":
            steps = doc if isinstance(doc, list) else doc.get("steps") if isinstance(doc, dict) else None
            if isinstance(steps, list):
                bad = [*steps, draw(st.sampled_from([None, 1, "search", [], ["tool"], math.nan]))]
                doc = bad if isinstance(doc, list) else {**doc, "steps": bad}
        elif action == "swap_container":
            target = _get(doc, path)
            if isinstance(target, dict):
                doc = _replace(doc, path, list(target.items()))
            elif isinstance(target, list):
                doc = _replace(doc, path, {str(i): v for i, v in enumerate(target)})
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


# -- helpers ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _no_hang(seconds: int = HANG_SECONDS) -> Iterator[None]:
    """Turn a reader that does not return within ``seconds`` into a test failure instead of a stuck run."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _parse(doc: Any) -> StepsFile | InputError:
    """parse_steps' result or its InputError; any other exception propagates and fails the test."""
    try:
        with _no_hang():
            return parse_steps(doc, SOURCE)
    except InputError as exc:
        return exc


def _audit(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with _no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["audit", str(path)])
    return status, out.getvalue(), err.getvalue()


def _assert_clear_error(status: int, err: str, path: Path) -> None:
    assert status == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"otel-loopguard: error: {path}"), err


def _expected_valid(raw: bytes) -> bool | None:
    """True/False when the bytes are a steps document the audit must accept/refuse; None when they may go to the
    OTLP reader, which may accept them (an empty file is an empty protobuf export, ``{}`` an empty OTLP/JSON one)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        # Not JSON: a file opening with a bracket or brace cannot be an OTLP protobuf either.
        return False if raw.lstrip()[:1] in (b"[", b"{") else None
    if not is_steps_document(doc):
        return None
    parsed = _parse(doc)
    # The file's limits replace the configuration's, which must be positive.
    return isinstance(parsed, StepsFile) and parsed.max_steps != 0 and parsed.repeat_limit != 0


def _check_file(path: Path, raw: bytes) -> int:
    path.write_bytes(raw)
    expected = _expected_valid(raw)
    status, out, err = _audit(path)
    if expected is True:
        assert status in (0, 1), err
        assert err == ""
        assert out.startswith(f"{path}: "), out
    elif expected is False or status == 2:
        _assert_clear_error(status, err, path)
    else:
        assert status in (0, 1) and err == "", err
    return status


def _dump(doc: Any) -> bytes:
    # NaN and Infinity as Python's json writes them (what a careless exporter produces); one line, no indent.
    return json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


# -- tests --------------------------------------------------------------------------------------------------


@FUZZ
@given(doc=valid_steps())
def test_valid_documents_parse_and_audit(doc: Any, tmp_path: Path) -> None:
    """Every generated valid document parses to as many calls as it has steps and audits with exit 0 or 1."""
    parsed = _parse(doc)
    assert isinstance(parsed, StepsFile), parsed
    assert len(parsed.calls) == len(doc if isinstance(doc, list) else doc["steps"])
    status = _check_file(tmp_path / "valid.json", _dump(doc))
    assert status in (0, 1)


@FUZZ
@given(doc=mutated_steps())
def test_mutated_documents_are_accepted_or_refused_with_an_input_error(doc: Any, tmp_path: Path) -> None:
    """A mutated document either parses or raises an InputError naming the file; the CLI agrees (exit 2, one line)."""
    parsed = _parse(doc)
    if isinstance(parsed, InputError):
        assert str(parsed).startswith(f"{SOURCE}"), parsed
        assert "\n" not in str(parsed)
    _check_file(tmp_path / "mutated.json", _dump(doc))


@FUZZ
@given(doc=json_values | nasty_values)
def test_random_json_never_escapes_as_another_exception(doc: Any, tmp_path: Path) -> None:
    """Any JSON value (not only steps-shaped ones) is parsed or refused cleanly, by parse_steps and by audit."""
    if is_steps_document(doc):
        parsed = _parse(doc)
        assert isinstance(parsed, (StepsFile, InputError))
    _check_file(tmp_path / "random.json", _dump(doc))


@FUZZ
@given(doc=valid_steps(), data=st.data())
def test_truncated_and_invalid_utf8_files_are_clear_errors(doc: Any, data: st.DataObject, tmp_path: Path) -> None:
    """A valid file cut short, or with invalid UTF-8 bytes spliced in, gives exit 2 and one line naming the file."""
    raw = _dump(doc)
    if data.draw(st.booleans(), "truncate"):
        raw = raw[:data.draw(st.integers(0, max(0, len(raw) - 1)), "cut")]
    else:
        at = data.draw(st.integers(0, len(raw)), "at")
        junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xfe\xff"]), "junk")
        raw = raw[:at] + junk + raw[at:]
    status = _check_file(tmp_path / "damaged.json", raw)
    if _expected_valid(raw) is False:
        assert status == 2


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'[{"tool": "a", "start": 1' + b"0" * 400 + b"}]", "steps[0].start: expected a number of seconds, got an "
                                                           "integer of 401 digits"),
        (b'{"steps": [], "observed_at": 1' + b"0" * 400 + b"}", "observed_at: expected a number"),
        (b'[{"tool": "a", "wait": {"owner": "db", "deadline": -1' + b"0" * 400 + b"}}]", "wait.deadline"),
        (b'[{"tool": "a", "start": NaN}]', "start: expected a number of seconds, got nan"),
        (b'[{"tool": "a", "end": Infinity}]', "end: expected a number of seconds, got inf"),
        (b'[{"tool": "a", "bad\\nkey": 1}]', "unknown key(s) 'bad\\nkey'"),
        (b"[" * 100_000, "not valid JSON"),
        (b'{"steps": [{"tool": "\xff"}]}', "UTF-8"),
        (b'{"steps": [], "max_steps": 0}', "max_steps must be a positive integer, got 0"),
    ],
    ids=["huge-start", "huge-observed-at", "huge-deadline", "nan", "infinity", "newline-key", "deep", "bad-utf8",
         "zero-limit"],
)
def test_known_hostile_files_get_one_line_errors(raw: bytes, message: str, tmp_path: Path) -> None:
    """Cases that once escaped as OverflowError, split the error line or did not name the file give exit 2 and one
    line naming the file."""
    path = tmp_path / "hostile.json"
    path.write_bytes(raw)
    status, _, err = _audit(path)
    _assert_clear_error(status, err, path)
    assert message in err


def test_lone_surrogates_in_a_valid_file_print_on_a_real_stdout(tmp_path: Path) -> None:
    """A valid file whose tool name is a lone surrogate escape audits to exit 1 on a UTF-8 stdout (no
    UnicodeEncodeError half-way through the report)."""
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps([{"tool": "\ud800", "args": {"q": "\udc00"}, "result": "same"}] * 3))
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "audit", str(path)], capture_output=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2],
                          env={"PYTHONIOENCODING": "utf-8", "PATH": ""})
    assert done.returncode == 1, done.stderr.decode()
    assert done.stderr == b""
    assert b"stuck" in done.stdout and b"\\ud800" in done.stdout


@pytest.mark.parametrize("doc", [{}, {"observed_at": 1.0}, {"steps": [{}]}, {"steps": [{"tool": ""}]}, [None]],
                         ids=["empty", "no-steps", "empty-step", "empty-tool", "null-step"])
def test_parse_steps_refuses_shapes_without_steps_or_tool_as_input_errors(doc: Any) -> None:
    """Documents missing the steps list or a step's tool raise InputError naming the source (once a KeyError)."""
    with pytest.raises(InputError) as info:
        parse_steps(doc, SOURCE)
    assert str(info.value).startswith(f"{SOURCE}:")
