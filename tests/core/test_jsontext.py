"""``_otlp_json.loads`` (msgspec first, ``json.loads`` for what msgspec refuses) behaves exactly like ``json.loads``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.otlp.json_general import loads

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.sampled_from(["\ud800", "\udfff", "\x00", "é"])
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                           max_size=4), max_leaves=20)


def _outcome(fn: Any, text: Any) -> tuple[str, str]:
    try:
        # repr: NaN is unequal to itself but prints alike; repr also tells 1 from 1.0 and True from 1.
        return ("value", repr(fn(text)))
    except Exception as exc:
        return ("error", f"{type(exc).__name__}: {exc}")


@settings(max_examples=400, deadline=None)
@given(VALUES, st.booleans(), st.sampled_from(["str", "utf-8", "utf-16"]))
def test_loads_builds_what_json_loads_builds(value: Any, ascii_only: bool, form: str) -> None:
    """Any JSON text, as str or bytes in any encoding json accepts, gives the same object (key order included)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    data: Any = text if form == "str" else text.encode(form, "surrogatepass")
    assert _outcome(loads, data) == _outcome(json.loads, data)


@pytest.mark.parametrize("data", [
    b'{"a": 1, "a": 2, "b": 3}', b'{"b": 1, "a": 2, "b": 3}', b'"\\ud800"', b'"\xed\xa0\x80"', b'"\xff"', b"NaN",
    b"[1e400, -1e400]", b"1" + b"0" * 5000, b"[" * 5000 + b"]" * 5000, b'"a\tb"', b'{"a": 1}\x00', b"\x0c{}",
    b"\xef\xbb\xbf{}", b"", b" ", b"{", b'{"a":}', b"-0", b"-0.0", b"1E2", b"[1.5e-7, 0.1, 123456789012345678901234]",
    '{"é": "\u2028"}', "\ufeff{}",
])
def test_loads_agrees_with_json_loads_on_edge_cases(data: Any) -> None:
    """Duplicate keys, lone surrogates, invalid UTF-8, NaN, huge numbers, deep nesting, BOMs, control characters."""
    assert _outcome(loads, data) == _outcome(json.loads, data)
