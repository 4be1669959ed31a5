"""The production canonicaliser writes exactly the text of the plain standard-library reference
(``_canonical_reference.py``), on JSON texts as clients write them, on Python values and on any string, so the
normalizer version ``loopguard-norm/1`` and every digest stay what they were.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from otel_loopguard.core.config import DEFAULT_VOLATILE_KEYS, LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.signature import NORMALIZER_VERSION, Canonicalizer, make_normalizer
from tests.core._canonical_reference import ReferenceCanonicalizer, blake, keyed
from tests.core._strategies import ANY_JSON, ANY_KEY, SPACES, json_texts

PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Tests whose counterexamples are kept as @example (and that CI runs derandomised, tests/conftest.py): half the
# random examples, the pinned ones always run first.
PINNED = settings(PROFILE, max_examples=150)
IGNORE = st.sets(st.sampled_from(["attemptno", "cursor", "q", "page"])).map(frozenset)
REFERENCE = ReferenceCanonicalizer(DEFAULT_VOLATILE_KEYS)
# One shared production canonicaliser (warm caches, as in a process) and a fresh one per example (cold caches).
SHARED = Canonicalizer(DEFAULT_VOLATILE_KEYS)


def _both(value: Any, ignore: frozenset[str] = frozenset()) -> None:
    expected = REFERENCE.canonical(value, ignore)
    assert Canonicalizer(DEFAULT_VOLATILE_KEYS).canonical(value, ignore) == expected
    assert SHARED.canonical(value, ignore) == expected


class _Thing:
    def __repr__(self) -> str:
        return "<thing>"


# Python values as applications pass them: tuples, sets, bytes, keys that are not strings, objects, any float.
_PY_SCALAR = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
              | st.binary(max_size=6) | st.just(_Thing()))
PY_VALUES = st.recursive(
    _PY_SCALAR,
    lambda children: (st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
                      | st.frozensets(st.integers(-50, 50) | st.text(max_size=3), max_size=4)
                      | st.dictionaries(ANY_KEY | st.integers(-3, 3) | st.booleans(), children, max_size=4)),
    max_leaves=20,
)


@PINNED
@given(text=json_texts(), ignore=IGNORE, pad=SPACES)
@example(text='{"a": NaN, "b": [Infinity, -Infinity]}', ignore=frozenset(), pad="")
@example(text='{"\\ud800": "\\udfff", "x": 1.0}', ignore=frozenset(), pad=" ")
@example(text='{"q": 1, "Request-ID": 2, "n": {"time_stamp": 3, "k": 2.50}}', ignore=frozenset({"q"}), pad="")
@example(text='[1e16, 1e-7, 9007199254740993.0, 1e400, 123456789012345678901234567890]', ignore=frozenset(), pad="")
def test_json_texts_match_the_reference(text: str, ignore: frozenset[str], pad: str) -> None:
    """Any JSON text (spacing, escapes, duplicate keys, number spellings, NaN) canonicalises as the reference does."""
    _both(pad + text + pad, ignore)


@PROFILE
@given(doc=st.dictionaries(ANY_KEY, ANY_JSON, max_size=5) | st.lists(ANY_JSON, max_size=4), ignore=IGNORE,
       indent=st.sampled_from([None, 0, 2]))
def test_dumped_documents_and_their_values_match_the_reference(doc: Any, ignore: frozenset[str], indent: int | None) -> None:
    """A document, and its JSON text in any layout, canonicalise as the reference does."""
    _both(doc, ignore)
    _both(json.dumps(doc, indent=indent), ignore)
    _both(json.dumps(doc, ensure_ascii=False), ignore)


@PINNED
@given(value=PY_VALUES, ignore=IGNORE)
@example(value={"s": "\ud800", "t": ["\udfff x", 0.1]}, ignore=frozenset())  # lone surrogates: msgspec will not write them
@example(value={1: "a", "1": "b", None: 1.5}, ignore=frozenset())  # keys spelled alike by repr
@example(value=[float("nan"), float("inf"), -float("inf"), -0.0, 2.0**53, 1e16], ignore=frozenset())
def test_python_values_match_the_reference(value: Any, ignore: frozenset[str]) -> None:
    """Tuples, sets, bytes, non-string keys, objects and non-finite floats canonicalise as the reference does."""
    _both(value, ignore)


@PINNED
@given(text=st.text(max_size=40) | st.text(alphabet='{}[]",:0123456789.eE-+ \\tnulrsa', max_size=30))
@example(text="\u00a0[1]")
@example(text="\x0c{}")
@example(text="[1] x")
@example(text='{"a": "\x01"}')
@example(text="\ufeff[1]")
def test_any_string_matches_the_reference(text: str) -> None:
    """Any string, JSON or not, bracket-led or not, canonicalises as the reference does."""
    _both(text)
    _both("[" + text)
    _both("{" + text)


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66, 100])
@pytest.mark.parametrize("inner", ["", "1", '{"k": 1}'])
def test_nesting_at_the_depth_limit_matches_the_reference(depth: int, inner: str) -> None:
    """Around 64 levels of nesting (the depth limit) text and values canonicalise as the reference does."""
    text = "[" * depth + inner + "]" * depth
    _both(text)
    _both(json.loads(text))
    _both('{"a": ' + text + "}")


def test_many_brackets_without_depth_match_the_reference() -> None:
    """More than 64 brackets side by side (no deep nesting) take the other parse and still match."""
    _both(json.dumps({f"k{i}": [i, {"request_id": i}] for i in range(40)}))


@pytest.mark.parametrize("max_bytes", [1, 8, 30])
@given(doc=st.dictionaries(ANY_KEY, ANY_JSON, max_size=4))
@settings(max_examples=60, deadline=None)
def test_length_limit_matches_the_reference(max_bytes: int, doc: Any) -> None:
    """Text over ``max_bytes`` is digested unparsed, as the reference does."""
    text = json.dumps(doc)
    assert Canonicalizer(DEFAULT_VOLATILE_KEYS, max_bytes).canonical(text) == (
        ReferenceCanonicalizer(DEFAULT_VOLATILE_KEYS, max_bytes).canonical(text))


@pytest.mark.parametrize(("value", "expected"), [
    # Keys sorted, the volatile request_id dropped, 2.50 written as float repr writes it, 1.0 folded to 1.
    ('{"b": 1.0, "a": 2.50, "request_id": "r-1"}', '{"a":2.5,"b":1}'),
    # Nested volatile keys go at any depth; spellings fold (Request-ID, timeStamp).
    ('{"q": {"Request-ID": 1, "timeStamp": 2, "k": [true, null]}}', '{"q":{"k":[true,null]}}'),
    # json writes 1e16 as 1e+16 (msgspec alone would write 1e16); non-ASCII is kept, not escaped.
    ('[1e16, 0.5, "é"]', '[1e+16,0.5,"é"]'),
    # Not JSON: the string stands for itself, as a JSON string.
    ("search cats", '"search cats"'),
    # NaN (json accepts it, msgspec does not) becomes the marker string.
    ('{"x": NaN}', '{"x":"\\u0000NaN"}'),
    # A tuple is a list, a set is sorted, bytes are a digest of the bytes.
    ({"t": (2, 1), "s": frozenset({3, 1, 2})}, '{"s":[1,2,3],"t":[2,1]}'),
])
def test_canonical_texts_pinned_by_hand(value: Any, expected: str) -> None:
    """Canonical texts derived by hand from the rules (see each case's comment)."""
    assert Canonicalizer(DEFAULT_VOLATILE_KEYS).canonical(value) == expected
    assert REFERENCE.canonical(value) == expected


def test_set_order_is_sorted_whatever_the_iteration_order() -> None:
    """Set members are sorted by their canonical text: strings whose set iteration order varies by hash."""
    members = frozenset(f"m{i}" for i in (9, 3, 27, 1, 14))
    assert Canonicalizer(DEFAULT_VOLATILE_KEYS).canonical({"s": members}) == '{"s":["m1","m14","m27","m3","m9"]}'


@PROFILE
@given(tool=st.sampled_from(["search", "read"]), args=ANY_JSON | json_texts(), result=ANY_JSON | json_texts(),
       nudge=st.booleans())
def test_signature_digest_and_evidence_match_the_reference(tool: str, args: Any, result: Any, nudge: bool) -> None:
    """Emitted signature digests and result evidence are the reference's, so no digest changed."""
    key = b"k" * 16
    engine = LoopEngine(LoopGuardConfig(signature_key=key))
    sig = engine.signature(ToolCall(tool, args))
    expected_key = tool + "\x1f" + REFERENCE.canonical({} if args is None else args)
    assert sig.key == expected_key
    assert sig.digest(key) == keyed(key, expected_key)
    if nudge and isinstance(result, str):
        result = result + "\n\n[loopguard] You have repeated yourself."
    normalizer = make_normalizer(DEFAULT_VOLATILE_KEYS, 65_536, {})
    got = normalizer.evidence(error=None, progress=None, result=result, result_captured=True)
    assert got == REFERENCE.evidence(error=None, progress=None, result=result, result_captured=True)


def test_evidence_digest_pinned_by_hand() -> None:
    """The evidence of a result is "r:" + BLAKE2b-96 of its canonical text (here '{"a":1}')."""
    normalizer = make_normalizer(DEFAULT_VOLATILE_KEYS, 65_536, {})
    got = normalizer.evidence(error=None, progress=None, result='{ "a": 1.0, "ts": 5 }', result_captured=True)
    assert got == "r:" + blake('{"a":1}')
    assert NORMALIZER_VERSION == "loopguard-norm/1"
