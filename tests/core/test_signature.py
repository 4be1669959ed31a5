"""Action signatures and progress evidence: canonical forms, volatile keys, digests and the normalizer version."""

from __future__ import annotations

import json

import pytest

from otel_loopguard.core.config import DEFAULT_VOLATILE_KEYS, LoopGuardConfig, ToolSettings
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.signature import (
    FAILED,
    NORMALIZER_VERSION,
    UNKNOWN,
    ActionSignature,
    Canonicalizer,
    keyed_digest,
    make_normalizer,
)

from ._helpers import call, observe_all

ENGINE = LoopEngine(LoopGuardConfig())


def sig(args: object, tool: str = "search", captured: bool = True, engine: LoopEngine = ENGINE) -> ActionSignature:
    """The signature the engine derives for one call."""
    return engine.signature(ToolCall(tool, args, arguments_captured=captured))


def test_key_order_does_not_matter_at_any_depth() -> None:
    """Reordered keys, nested inside objects and lists, give one signature."""
    a = {"q": "x", "filter": {"lang": "en", "since": {"y": 2024, "m": 1}}, "sort": [{"b": 1, "a": 2}]}
    b = {"sort": [{"a": 2, "b": 1}], "filter": {"since": {"m": 1, "y": 2024}, "lang": "en"}, "q": "x"}
    assert sig(a) == sig(b)
    assert sig(a).canonical == '{"filter":{"lang":"en","since":{"m":1,"y":2024}},"q":"x","sort":[{"a":2,"b":1}]}'


def test_list_order_matters() -> None:
    """Lists keep their order: [1, 2] and [2, 1] are different actions."""
    assert sig({"ids": [1, 2]}) != sig({"ids": [2, 1]})


@pytest.mark.parametrize("spelling", ["requestId", "request_id", "Request-ID", "REQUEST_ID", "x-request-id"])
def test_volatile_keys_are_removed_at_any_depth(spelling: str) -> None:
    """Request ids in any spelling, at the top, nested and inside lists, do not change the signature."""
    plain = {"q": "x", "meta": {"page": 2}, "items": [{"id": 1}]}
    noisy = {"q": "x", spelling: "r-1", "meta": {"page": 2, spelling: "r-2"}, "items": [{"id": 1, spelling: "r-3"}]}
    assert sig(noisy) == sig(plain)


@pytest.mark.parametrize("key", ["timestamp", "trace_id", "tool_call_id", "nonce", "seed", "idempotency-key"])
def test_other_volatile_keys_are_removed(key: str) -> None:
    """Timestamps, trace ids, call ids, nonces and seeds are noise."""
    assert sig({"q": "x", key: "v1"}) == sig({"q": "x", key: "v2"}) == sig({"q": "x"})


@pytest.mark.parametrize("key", ["cursor", "page_token", "offset", "query", "page", "path"])
def test_meaningful_keys_are_kept(key: str) -> None:
    """Keys that change what the call asks for (cursor, page token, offset, query) are kept."""
    assert sig({key: "a"}) != sig({key: "b"})


def test_per_tool_ignore_args() -> None:
    """A tool's ignore_args drop those names for that tool only, in any spelling."""
    engine = LoopEngine(LoopGuardConfig(tools={"search": ToolSettings(ignore_args=frozenset({"attempt_no"}))}))
    assert sig({"q": "x", "attemptNo": 1}, engine=engine) == sig({"q": "x", "attempt_no": 2}, engine=engine)
    assert sig({"q": "x", "attempt_no": 1}, tool="read", engine=engine) != sig(
        {"q": "x", "attempt_no": 2}, tool="read", engine=engine
    )


def test_dict_and_json_string_agree() -> None:
    """Arguments given as a dict and as the JSON string a span carries give the same signature."""
    args = {"query": "weather", "limit": 10, "request_id": "r-1"}
    assert sig(args) == sig(json.dumps(args)) == sig(json.dumps({"limit": 10, "query": "weather"}, indent=2))


def test_non_json_string_stands_for_itself() -> None:
    """A plain string (or broken JSON) is compared as text."""
    assert sig("ls -la").canonical == '"ls -la"'
    assert sig("ls -la") != sig("ls -l")
    assert sig('{"broken": ').canonical == json.dumps('{"broken": ')


def test_list_arguments() -> None:
    """Top-level list arguments are canonicalised element by element."""
    assert sig([{"b": 1, "a": 2}, 3]).canonical == '[{"a":2,"b":1},3]'
    assert sig('[{"b": 1, "a": 2}, 3]') == sig([{"a": 2, "b": 1}, 3])


def test_none_means_no_arguments() -> None:
    """None arguments are the empty object, a known signature."""
    s = sig(None)
    assert s.canonical == "{}" and s.known
    assert sig(None) == sig({}) == sig("{}")


def test_not_captured_is_not_empty() -> None:
    """Arguments that were not recorded give the unknown signature, which differs from empty arguments."""
    unknown = sig({"q": "x"}, captured=False)
    assert unknown.canonical == UNKNOWN and not unknown.known
    assert unknown != sig({})
    assert sig({}).known


def test_integral_floats_equal_ints_but_bools_do_not() -> None:
    """1 and 1.0 are the same value; true and 1 are not."""
    assert sig({"n": 1}) == sig({"n": 1.0}) == sig('{"n": 1.0}')
    assert sig({"n": True}) != sig({"n": 1})
    assert sig({"n": 1.5}) != sig({"n": 1})


def test_non_json_values_get_stable_spellings() -> None:
    """Bytes, sets, tuples and NaN canonicalise without raising, and sets ignore their order."""
    assert sig({"b": b"\x00\x01"}) == sig({"b": bytearray(b"\x00\x01")})
    assert sig({"s": {3, 1, 2}}) == sig({"s": {2, 3, 1}})
    assert sig({"t": (1, 2)}) == sig({"t": [1, 2]})
    assert sig({"x": float("nan")}) == sig({"x": float("nan")})
    assert sig({"x": float("inf")}) != sig({"x": float("-inf")})


def test_huge_strings_are_digested_without_parsing() -> None:
    """Arguments longer than max_argument_bytes are digested whole: equal text equal, volatile keys not stripped."""
    engine = LoopEngine(LoopGuardConfig(max_argument_bytes=1024))
    body = "x" * 2000
    a = json.dumps({"body": body, "request_id": "r-1"})
    b = json.dumps({"body": body, "request_id": "r-2"})
    assert sig(a, engine=engine).canonical.startswith("#")
    assert sig(a, engine=engine) == sig(a, engine=engine)
    # Not parsed, so the volatile key is still part of the text and the two differ.
    assert sig(a, engine=engine) != sig(b, engine=engine)
    # Under the default limit the same pair is parsed and equal.
    assert sig(a) == sig(b)


def test_huge_invalid_json_does_not_raise() -> None:
    """A huge string that starts like JSON but is not is digested, not parsed."""
    engine = LoopEngine(LoopGuardConfig(max_argument_bytes=1024))
    assert sig("{" * 5000, engine=engine).canonical.startswith("#")


def test_deep_nesting_does_not_raise() -> None:
    """Arguments nested deeper than the limit are digested rather than raising RecursionError."""
    deep: object = 1
    for _ in range(200):
        deep = {"a": deep}
    assert sig(deep).canonical.startswith("#")
    assert sig(json.dumps(deep)).canonical.startswith("#")


def test_cached_canonical_is_identical_to_fresh() -> None:
    """A repeated raw string returns the cached canonical form, equal to a fresh computation."""
    canon = Canonicalizer(DEFAULT_VOLATILE_KEYS)
    text = '{"q": "x", "requestId": "1"}'
    first = canon.canonical(text)
    assert canon.canonical(text) == first == Canonicalizer(DEFAULT_VOLATILE_KEYS).canonical(text) == '{"q":"x"}'


def test_keyed_digest_depends_on_the_key() -> None:
    """Emitted digests are HMACs: the same signature under another key gives another digest."""
    s = sig({"q": "secret customer name"})
    d1, d2 = s.digest(b"k" * 32), s.digest(b"j" * 32)
    assert d1 != d2 and len(d1) == 32 and int(d1, 16) >= 0
    assert s.digest(b"k" * 32) == d1 == keyed_digest(b"k" * 32, s.key)
    assert "secret" not in d1


def test_engine_digests_use_the_configured_key() -> None:
    """Verdict signature digests follow signature_key, so two processes with one key agree."""
    calls = [call("search", {"q": "x"}, at=float(i)) for i in range(3)]
    digests = []
    for key in (b"a" * 16, b"a" * 16, b"b" * 16):
        _, obs = observe_all(LoopEngine(LoopGuardConfig(signature_key=key)), calls)
        digests.append(obs[-1].verdict.signature_digest)
    assert digests[0] == digests[1] != digests[2]
    assert digests[0] == keyed_digest(b"a" * 16, sig({"q": "x"}).key)


def test_normalizer_version_is_on_every_verdict() -> None:
    """Every verdict carries the normalizer version, working or stuck."""
    _, obs = observe_all(ENGINE, [call("search", {"q": "x"}, at=float(i)) for i in range(4)])
    assert {o.verdict.normalizer_version for o in obs} == {NORMALIZER_VERSION}
    assert NORMALIZER_VERSION == "loopguard-norm/1"
    assert {o.verdict.kind for o in obs} == {"working", "stuck"}


def test_evidence_kinds() -> None:
    """Evidence is "failed" for any error, the explicit fingerprint, a result digest, or missing."""
    n = make_normalizer(DEFAULT_VOLATILE_KEYS, 65_536, {})
    assert n.evidence(error="ValueError", progress="p", result="r", result_captured=True) == FAILED
    assert n.evidence(error=None, progress="rows=5", result="r", result_captured=True) == "p:rows=5"
    assert n.evidence(error=None, progress=None, result=None, result_captured=False) is None
    r1 = n.evidence(error=None, progress=None, result='{"b": 1, "a": 2}', result_captured=True)
    assert r1 == n.evidence(error=None, progress=None, result={"a": 2, "b": 1}, result_captured=True)
    assert r1.startswith("r:")
    assert r1 != n.evidence(error=None, progress=None, result={"a": 3, "b": 1}, result_captured=True)


def test_result_volatile_fields_do_not_count_as_progress() -> None:
    """A result that differs only in a request id or timestamp is the same evidence."""
    n = make_normalizer(DEFAULT_VOLATILE_KEYS, 65_536, {})
    a = n.evidence(error=None, progress=None, result={"hits": [1], "request_id": "a", "timestamp": 1}, result_captured=True)
    b = n.evidence(error=None, progress=None, result={"hits": [1], "request_id": "b", "timestamp": 2}, result_captured=True)
    assert a == b


def test_fingerprints_tell_plain_top_level_differences_and_nothing_else() -> None:
    """Different plain values of a kept key differ; volatile keys, 1 vs true and 1.0, and nested values are left open."""
    from otel_loopguard.core.config import DEFAULT_VOLATILE_KEYS
    from otel_loopguard.core.signature import Canonicalizer, argument_fingerprint

    canon = Canonicalizer(DEFAULT_VOLATILE_KEYS)
    kept, dropped = canon.kept(), canon.dropped()

    def differ(a: str, b: str) -> bool:
        fa, fb = argument_fingerprint(a, kept, dropped), argument_fingerprint(b, kept, dropped)
        assert fa is not None and fb is not None
        return fa != fb

    assert differ('{"q": "a", "page": 1}', '{"page": 1, "q": "b"}')
    assert differ('{"q": "a", "page": 1}', '{"q": "a", "page": "1"}')
    assert differ('{"q": "a", "extra": null}', '{"q": "a"}')
    assert not differ('{"q": "a", "request_id": 1}', '{"requestId": 2, "q": "a"}')
    assert not differ('{"q": "a", "n": 1}', '{"q": "a", "n": true}')  # canonical texts tell these apart
    # Numbers compare by value: 1.5 and 2.5 are written differently in canonical form; 1 and 1.0 are both written 1.
    assert differ('{"q": "a", "x": 1.5}', '{"q": "a", "x": 2.5}')
    assert not differ('{"q": "a", "x": 1}', '{"q": "a", "x": 1.0}')
    assert not differ('{"q": "a", "f": {"k": 1}}', '{"q": "a", "f": {"k": 2}}')
    assert argument_fingerprint("[1]", kept, dropped) is None
    assert argument_fingerprint('{"a": NaN}', kept, dropped) is None


def test_fingerprints_never_parse_text_over_the_configured_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """With max_argument_bytes below the lazy limit, comparing calls parses no argument longer than the limit."""
    import otel_loopguard.core.jsontext as jsontext
    import otel_loopguard.core.signature as signature

    parsed: list[int] = []
    real, real_plain = signature._ms_decode, jsontext._msgspec_loads

    def recording(text: str) -> object:
        parsed.append(len(text))
        return real(text)

    def recording_plain(text: str) -> object:
        parsed.append(len(text))
        return real_plain(text)

    # Both decoders: the canonicaliser's, and the one fingerprints share with the step audit (its memo of the last text emptied).
    monkeypatch.setattr(signature, "_ms_decode", recording)
    monkeypatch.setattr(jsontext, "_msgspec_loads", recording_plain)
    jsontext._last = (None, None)

    def parses(config: LoopGuardConfig) -> list[int]:
        parsed.clear()
        engine = LoopEngine(config)
        state = engine.new_state()
        for i in range(4):
            engine.observe(state, ToolCall("search", json.dumps({"q": f"{i}" * 60, "page": 1}), result="r"))
        return list(parsed)

    assert parses(LoopGuardConfig())  # by default these calls are parsed to be compared
    assert parses(LoopGuardConfig(max_argument_bytes=40)) == []
