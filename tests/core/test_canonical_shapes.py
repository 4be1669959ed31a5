"""Canonical texts of the less common shapes, fixed examples through the public ``Canonicalizer`` and
``keyed_digest``: the expected texts are written out by hand from the documented form (compact JSON, keys sorted,
non-ASCII written as it is, volatile keys dropped at every depth, integral floats below 2**53 folded to integers).

Each test builds its own ``Canonicalizer``, so its per-instance cache never answers for another test.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from otel_loopguard.core.signature import Canonicalizer, keyed_digest

VOLATILE = frozenset({"requestid", "traceid"})


def test_a_lone_surrogate_is_canonicalised_with_the_exact_json_text() -> None:
    # A lone surrogate cannot be UTF-8, so the compact JSON is written by the standard json module: keys sorted
    # (given b, a, c), separators "," and ":" without spaces, "é" written as it is (not \u00e9), the surrogate as
    # itself, the float 1.5 as "1.5" and the volatile request_id dropped.
    canon = Canonicalizer(VOLATILE)
    value = {"b": "\ud800", "a": "é", "c": 1.5, "request_id": 7}
    assert canon.canonical(value) == '{"a":"é","b":"\ud800","c":1.5}'
    # The same document as JSON text: the same canonical text.
    assert canon.canonical('{"b": "\\ud800", "a": "é", "c": 1.5, "request_id": 7}') == '{"a":"é","b":"\ud800","c":1.5}'


def test_volatile_keys_are_dropped_in_documents_with_one_or_two_objects() -> None:
    # One object inside an array; two objects, one nested in the other; two objects side by side in an array.
    canon = Canonicalizer(VOLATILE)
    assert canon.canonical('[{"request_id": 1, "a": 2}]') == '[{"a":2}]'
    assert canon.canonical('{"x": {"request_id": 1, "b": 2}, "trace_id": 3}') == '{"x":{"b":2}}'
    assert canon.canonical('[{"request_id": 1, "a": 2}, {"b": 3, "TraceId": 4}]') == '[{"a":2},{"b":3}]'


def test_documents_with_more_containers_than_the_depth_limit_are_still_canonical() -> None:
    # 70 sibling objects (more than the 64 containers the fast path takes) but only two levels deep: parsed and
    # cleaned like any other document, volatile keys dropped from each object.
    canon = Canonicalizer(VOLATILE)
    text = "[" + ", ".join(f'{{"request_id": {i}, "n": {i}}}' for i in range(70)) + "]"
    assert canon.canonical(text) == "[" + ",".join(f'{{"n":{i}}}' for i in range(70)) + "]"
    # Text with as many brackets that is not JSON stands for itself: the JSON string of the text.
    broken = "[" * 70 + "x"
    assert canon.canonical(broken) == '"' + broken + '"'


def test_values_too_deep_to_canonicalise_are_told_apart_by_their_repr() -> None:
    # Nesting deeper than the limit (64) cannot be cleaned, so the canonical text is "#" and the 24-hex-digit
    # blake2b digest of the value's repr: two different deep values give two different texts.
    canon = Canonicalizer(VOLATILE)

    def deep(leaf: int) -> object:
        value: object = leaf
        for _ in range(100):
            value = [value]
        return value

    for leaf in (1, 2):
        expected = "#" + hashlib.blake2b(repr(deep(leaf)).encode(), digest_size=12).hexdigest()
        assert canon.canonical(deep(leaf)) == expected


def test_which_key_spellings_a_fresh_canonicaliser_drops() -> None:
    # Folded spellings: request_id, Request-Id and REQUESTID all fold to "requestid" (volatile); "q" stays; an
    # ignored name is dropped only for the ignore set that names it.
    canon = Canonicalizer(VOLATILE)
    dropped = canon.dropped()
    assert [dropped(k) for k in ("request_id", "Request-Id", "REQUESTID", "q")] == [True, True, True, False]
    assert Canonicalizer(VOLATILE).dropped(frozenset({"page"}))("page") is True
    assert Canonicalizer(VOLATILE).dropped()("page") is False


def test_a_keyed_digest_of_text_with_a_lone_surrogate() -> None:
    # The text is encoded as UTF-8 with lone surrogates passed through: "a\ud800" is the bytes 61 ed a0 80, and the
    # digest is the first 32 hex digits of HMAC-SHA256 over them under the key.
    key = b"k" * 16
    expected = hmac.new(key, b"a\xed\xa0\x80", hashlib.sha256).hexdigest()[:32]
    assert keyed_digest(key, "a\ud800") == expected
    assert keyed_digest(key, "plain") == hmac.new(key, b"plain", hashlib.sha256).hexdigest()[:32]


def _spelling(digits: str, exponent: int, pid: int) -> str:
    """A JSON number token for digits * 10**exponent, spelt with extra zeros chosen by ``pid``: the same value in a
    spelling this process has not parsed before (number tokens are cached per process by their text).

    A process forked from one that ran this test (mutation testing runs the tests once, then forks one process per
    mutant) inherits the parent's cache, so the spelling must differ from the parent's too: 19 spellings chosen by
    the pid alone gave the parent's in 1 fork of 19, and the cache then hid the code under test.
    """
    extra = pid % 19 + 1
    # The parent chose its own spelling by this rule: from these two, whichever its parent made it take.
    parents = {os.getppid() % 19 + 1, (os.getppid() % 19 + 1) % 19 + 1}
    while extra in parents:
        extra = extra % 19 + 1
    return f"{digits}{'0' * extra}e{exponent - extra}"


def test_the_float_folding_limit_in_new_spellings() -> None:
    # Integral floats strictly between -2**53 and 2**53 fold to integers (every such integer is exact as a float);
    # from 2**53 on they stay floats, written as Python writes them (repr). Non-integral floats are written as repr.
    # 2**53 = 9007199254740992.
    pid = os.getpid()
    cases = {
        ("9007199254740991", 0): "9007199254740991",  # 2**53 - 1: folded
        ("-9007199254740991", 0): "-9007199254740991",
        ("9007199254740992", 0): "9007199254740992.0",  # 2**53: kept as a float
        ("-9007199254740992", 0): "-9007199254740992.0",
        ("1", 300): "1e+300",  # integral but far above the limit
        ("5", -1): "0.5",  # not integral
        ("3", 0): "3",  # a small integral float
    }
    canon = Canonicalizer(VOLATILE)
    for (digits, exponent), expected in cases.items():
        token = _spelling(digits, exponent, pid)
        assert canon.canonical('{"x": ' + token + "}") == '{"x":' + expected + "}", token
    # A number too large for a float is infinite, spelt like JSON's non-standard Infinity: the string "\x00Inf",
    # written by JSON as "\u0000Inf"; its negative "\x00-Inf".
    assert canon.canonical('{"x": ' + _spelling("1", 400, pid) + "}") == '{"x":"\\u0000Inf"}'
    assert canon.canonical('{"x": -' + _spelling("1", 400, pid) + "}") == '{"x":"\\u0000-Inf"}'
    assert canon.canonical('{"x": Infinity}') == '{"x":"\\u0000Inf"}'


def test_text_up_to_64_kib_is_read_and_longer_text_is_digested() -> None:
    # The default limit is 65 536 characters: a text of exactly that length stands for itself (its JSON string);
    # one character more is replaced by "#" and the 24-hex-digit blake2b digest of the text.
    canon = Canonicalizer(VOLATILE)
    at_limit, over = "x" * 65_536, "x" * 65_537
    assert canon.canonical(at_limit) == '"' + at_limit + '"'
    assert canon.canonical(over) == "#" + hashlib.blake2b(over.encode(), digest_size=12).hexdigest()


def test_nesting_of_64_levels_is_canonical_and_65_is_digested() -> None:
    # 64 nested arrays around 1, plus one empty array beside the innermost but one (65 brackets, so not the fast
    # path): 64 levels is within the limit, so the canonical text is the compact text itself. One level more is
    # too deep: "#" and the digest of the text.
    canon = Canonicalizer(VOLATILE)
    deep64 = "[" * 64 + "1" + "]" * 63 + ",[]]"
    assert canon.canonical(deep64) == deep64
    deep65 = "[" * 65 + "1" + "]" * 64 + ",[]]"
    assert canon.canonical(deep65) == "#" + hashlib.blake2b(deep65.encode(), digest_size=12).hexdigest()
