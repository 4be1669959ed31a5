"""Property tests: canonical forms ignore key order and volatile fields, and never raise on any input."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.core.config import DEFAULT_VOLATILE_KEYS, LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.signature import Canonicalizer
from otel_loopguard.core.step_audit import audit_trace
from tests.core._strategies import ANY_JSON, ANY_KEY, SPACES, json_texts

CANON = Canonicalizer(DEFAULT_VOLATILE_KEYS)
ENGINE = LoopEngine(LoopGuardConfig())
# Keys that fold to a volatile name are excluded from generated documents, so inserting one is the only change.
_SAFE_KEY = st.text(min_size=1, max_size=8).filter(
    lambda k: k.lower().replace("_", "").replace("-", "") not in DEFAULT_VOLATILE_KEYS
)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.text(max_size=20)
JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_SAFE_KEY, children, max_size=4),
    max_leaves=20,
)
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same document with every object's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def with_volatile(value: Any, rng: random.Random) -> Any:
    """The same document with volatile keys (in varied spellings) added to every object."""
    if isinstance(value, dict):
        out = {k: with_volatile(v, rng) for k, v in value.items()}
        out[rng.choice(["requestId", "request_id", "Request-ID", "timestamp", "trace_id"])] = rng.random()
        return out
    if isinstance(value, list):
        return [with_volatile(v, rng) for v in value]
    return value


@PROFILE
@given(doc=st.dictionaries(_SAFE_KEY, JSON, max_size=6), seed=st.integers(0, 2**32))
def test_key_order_invariance(doc: dict, seed: int) -> None:
    """Any reordering of keys, at any depth, gives the same canonical text, as a dict or as JSON."""
    other = shuffled(doc, random.Random(seed))
    assert CANON.canonical(doc) == CANON.canonical(other)
    assert CANON.canonical(json.dumps(doc)) == CANON.canonical(json.dumps(other))


@PROFILE
@given(doc=st.dictionaries(_SAFE_KEY, JSON, max_size=6), seed=st.integers(0, 2**32))
def test_volatile_field_invariance(doc: dict, seed: int) -> None:
    """Adding volatile keys anywhere never changes the canonical text."""
    assert CANON.canonical(with_volatile(doc, random.Random(seed))) == CANON.canonical(doc)


@PROFILE
@given(doc=JSON)
def test_arbitrary_json_never_raises_and_is_stable(doc: Any) -> None:
    """Any JSON value canonicalises to a string, the same as a value and as its JSON text."""
    text = CANON.canonical(doc)
    assert isinstance(text, str)
    if isinstance(doc, (dict, list)):
        assert CANON.canonical(json.dumps(doc)) == text


@PROFILE
@given(junk=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_non_json_junk_never_raises(junk: str) -> None:
    """Arbitrary text, including lone surrogates and broken JSON, gives a signature and evidence."""
    for text in (junk, "{" + junk, "[" + junk, junk + "\ud800"):
        call = ToolCall("t", text, result=text, result_captured=True)
        state = ENGINE.new_state()
        ENGINE.observe(state, call)
        assert ENGINE.signature(call).known


@PROFILE
@given(steps=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1)), max_size=30),
       limit=st.integers(1, 5), max_steps=st.integers(0, 40))
def test_audit_trace_matches_a_reference(steps: list, limit: int, max_steps: int) -> None:
    """``audit_trace`` agrees with a straightforward run-length reference on random traces."""
    trace = [{"tool": t, "args": {"x": x}} for t, x in steps]
    expected = []
    if len(trace) > max_steps:
        expected.append(f"step_limit:{len(trace)}")
    i = 0
    while i < len(trace):
        j = i
        while j < len(trace) and trace[j] == trace[i]:
            j += 1
        if j - i >= limit:
            expected.append(f"repeat_loop:{trace[i]['tool']}|x={trace[i]['args']['x']}@{i}")
        i = j
    assert audit_trace(trace, max_steps, limit) == {
        "ok": not expected, "steps_used": len(trace), "violations": sorted(expected),
    }


@PROFILE
@given(text=json_texts(), ignore=st.sets(st.sampled_from(["attemptno", "cursor", "q"])), pad=SPACES)
def test_msgspec_and_json_canonical_paths_agree(text: str, ignore: set[str], pad: str) -> None:
    """The msgspec path gives exactly the text of the ``json.loads`` path, which it falls back to, on any JSON text."""
    import otel_loopguard.core.signature as signature

    text = pad + text + pad
    frozen = frozenset(ignore)
    fast = Canonicalizer(DEFAULT_VOLATILE_KEYS)._canonical_text(text, frozen)
    saved = signature._ms_decode

    def refuse(_text: Any) -> Any:
        raise signature.msgspec.DecodeError("refused for the test")

    signature._ms_decode = refuse
    try:
        slow = Canonicalizer(DEFAULT_VOLATILE_KEYS)._canonical_text(text, frozen)
    finally:
        signature._ms_decode = saved
    assert fast == slow


@PROFILE
@given(a=st.dictionaries(ANY_KEY, ANY_JSON, max_size=5), b=st.dictionaries(ANY_KEY, ANY_JSON, max_size=5),
       shared=st.dictionaries(ANY_KEY, ANY_JSON, max_size=3), ignore=st.sets(st.sampled_from(["attemptno", "q"])))
def test_fingerprints_differ_only_when_canonical_texts_differ(a: dict, b: dict, shared: dict, ignore: set[str]) -> None:
    """The cheap test the engine uses before canonical texts never calls two equal signatures different."""
    from otel_loopguard.core.signature import argument_fingerprint

    frozen = frozenset(ignore)
    canon = Canonicalizer(DEFAULT_VOLATILE_KEYS)
    kept, dropped = canon.kept(frozen), canon.dropped(frozen)
    texts = [json.dumps({**shared, **a}), json.dumps({**b, **shared}), json.dumps(shared),
             json.dumps(shared, indent=1, sort_keys=True)]
    for x in texts:
        for y in texts:
            fx, fy = argument_fingerprint(x, kept, dropped), argument_fingerprint(y, kept, dropped)
            if fx is not None and fy is not None and fx != fy:
                assert canon.canonical(x, frozen) != canon.canonical(y, frozen)
            if canon.canonical(x, frozen) == canon.canonical(y, frozen) and fx is not None and fy is not None:
                assert fx == fy
