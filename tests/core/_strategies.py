"""Hypothesis strategies shared by the core's property tests: JSON documents and JSON texts as clients write them."""

from __future__ import annotations

import json

from hypothesis import strategies as st

ANY_KEY = st.sampled_from(["requestId", "request_id", "Request-ID", "timestamp", "cursor", "attempt_no", "q"]) | st.text(
    max_size=6
)
ANY_SCALAR = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10)
ANY_JSON = st.recursive(
    ANY_SCALAR,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ANY_KEY, children, max_size=5),
    max_leaves=25,
)

# Number spellings the two parsers must fold alike (exponents, integral floats, beyond 2**53, beyond float range).
_NUMBER_TEXTS = st.sampled_from(["1E2", "1e-7", "-0.0", "-0", "2.50", "1e16", "1e22", "9007199254740993.0", "1e400",
                                 "-1e400", "123456789012345678901234567890", "0.1", "5e-324", "1.7976931348623157e308"])
_KEY_TEXTS = st.sampled_from(['"q"', '"Q"', '"é"', '"\\u00e9"', '"😀"', '"\\ud83d\\ude00"', '"\\uffff"', '"request_id"',
                              '"Request-ID"', '"cursor"', '"a\\nb"', '"\\ud800"', '"z"', '"_"'])
SPACES = st.sampled_from(["", " ", "\n", "\t", "\r\n  "])


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON text as clients write it: any spacing, escapes, duplicate keys and number spellings."""
    space = draw(SPACES)
    kind = draw(st.sampled_from(["object", "array", "scalar", "number"] if depth < 3 else ["scalar", "number"]))
    if kind == "number":
        return draw(_NUMBER_TEXTS | st.floats(allow_nan=False, allow_infinity=False).map(repr)
                    | st.integers().map(str))
    if kind == "scalar":
        return json.dumps(draw(ANY_SCALAR), ensure_ascii=draw(st.booleans()))
    if kind == "array":
        items = draw(st.lists(json_texts(depth + 1), max_size=3))
        return "[" + space + ("," + space).join(items) + space + "]"
    members = draw(st.lists(st.tuples(_KEY_TEXTS | st.text(max_size=4).map(json.dumps), json_texts(depth + 1)),
                            max_size=4))
    return "{" + space + ("," + space).join(f"{k}{space}:{space}{v}" for k, v in members) + space + "}"
