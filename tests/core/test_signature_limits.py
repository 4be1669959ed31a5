"""Canonical signatures at their limits, one fixed example each, expected texts written out by hand.

The README's rules: keys sorted at every depth, integral floats folded to ints (only where a double still holds
every integer, below 2**53), sets written in a fixed order, arguments longer than ``max_argument_bytes`` digested
whole without parsing, values nested deeper than the depth limit (64) digested. Each test goes through
``LoopEngine.signature`` so that it holds whatever the canonicaliser's internals become.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall


def _canon(args: Any, config: LoopGuardConfig | None = None) -> str:
    return LoopEngine(config).signature(ToolCall("t", args)).canonical


# --- sets ---------------------------------------------------------------------------------------------------------

def test_int_sets_whose_iteration_order_differs_have_one_spelling() -> None:
    # 0 and 8 fall into the same slot of a small set's table, so the set built by inserting 8 first iterates
    # 8, 0 and the one built by inserting 0 first iterates 0, 8 (checked below, so this test cannot pass by
    # accident). The canonical form sorts the members by their JSON text: "0" < "8", hence [0,8] for both.
    first, second = set(), set()
    first.add(0)
    first.add(8)
    second.add(8)
    second.add(0)
    assert list(first) != list(second), "the precondition: two equal sets iterating in different orders"
    assert _canon({"s": first}) == '{"s":[0,8]}'
    assert _canon({"s": second}) == '{"s":[0,8]}'
    assert _canon({"s": frozenset(second)}) == '{"s":[0,8]}'


_SET_SCRIPT = """
import json, sys
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
members = {"delta", "alpha", "echo", "charlie", "bravo", "foxtrot"}
print(json.dumps([list(members), LoopEngine().signature(ToolCall("t", {"s": members})).canonical]))
"""


def test_string_sets_have_one_spelling_across_processes() -> None:
    # String hashes are randomised per process, so a set of six strings iterates in a different order in
    # (almost) every process. Five processes (run side by side): at least two iteration orders must show up (the
    # precondition; all five equal has a probability far below one in a million), and the canonical text is the
    # same sorted list in all of them: the members' JSON texts in code-point order, "alpha" < "bravo" < ... .
    processes = [subprocess.Popen([sys.executable, "-c", _SET_SCRIPT], stdout=subprocess.PIPE, text=True)
                 for _ in range(5)]
    outputs = []
    for process in processes:
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0
        outputs.append(json.loads(out))
    orders = {tuple(order) for order, _ in outputs}
    assert len(orders) >= 2, "the precondition: string sets iterate in different orders in different processes"
    expected = '{"s":["alpha","bravo","charlie","delta","echo","foxtrot"]}'
    assert [canonical for _, canonical in outputs] == [expected] * 5


# --- float folding ------------------------------------------------------------------------------------------------

def test_integral_floats_fold_only_below_two_to_the_53() -> None:
    # 2**53 - 1 = 9007199254740991 is the largest integer below the limit: 9007199254740991.0 folds to the int.
    # 2**53 = 9007199254740992 is not below it: the float stays a float, written as Python writes it ("...992.0"),
    # because beyond 2**53 a double no longer holds every integer (folding would merge distinct values).
    # The same on the negative side; 1.5 never folds.
    assert _canon({"x": 9007199254740991.0}) == '{"x":9007199254740991}'
    assert _canon({"x": 9007199254740992.0}) == '{"x":9007199254740992.0}'
    assert _canon({"x": -9007199254740991.0}) == '{"x":-9007199254740991}'
    assert _canon({"x": -9007199254740992.0}) == '{"x":-9007199254740992.0}'
    assert _canon({"x": 1.5}) == '{"x":1.5}'


def test_integral_floats_in_json_text_fold_the_same_way() -> None:
    # Arguments usually arrive as JSON text: the parsed numbers follow the same rule.
    assert _canon('{"x": 9007199254740991.0, "y": 9007199254740992.0, "z": 2.0}') == (
        '{"x":9007199254740991,"y":9007199254740992.0,"z":2}')


def test_non_finite_floats_have_fixed_spellings() -> None:
    # NaN and the infinities are not JSON: each gets a tagged string, so they compare equal to themselves and differ
    # from one another.
    assert _canon({"a": float("nan"), "b": float("inf"), "c": float("-inf")}) == (
        '{"a":"\\u0000NaN","b":"\\u0000Inf","c":"\\u0000-Inf"}')
    assert _canon('{"a": NaN, "b": Infinity, "c": -Infinity}') == '{"a":"\\u0000NaN","b":"\\u0000Inf","c":"\\u0000-Inf"}'


# --- the argument-length limit ------------------------------------------------------------------------------------

def _text_of_length(length: int) -> str:
    # '{"q": "' (7 characters) + the padding + '"}' (2 characters).
    text = '{"q": "' + "x" * (length - 9) + '"}'
    assert len(text) == length
    return text


@pytest.mark.parametrize("limit", [65_536, 100])
def test_arguments_up_to_the_limit_are_parsed_and_longer_ones_digested(limit: int) -> None:
    # max_argument_bytes (default 65536): text of exactly that length is still canonicalised (the space after
    # the colon goes), one character more is digested whole: "#" and hex digits, no JSON.
    config = None if limit == 65_536 else LoopGuardConfig(max_argument_bytes=limit)
    at_limit = _canon(_text_of_length(limit), config)
    assert at_limit == '{"q":"' + "x" * (limit - 9) + '"}'
    over = _canon(_text_of_length(limit + 1), config)
    assert over.startswith("#") and len(over) == 25  # 12-byte digest, 24 hex digits
    int(over[1:], 16)


def test_digested_arguments_still_compare_equal_when_equal() -> None:
    # A digest of the whole text: equal text, equal signature; one character changed, a different one.
    config = LoopGuardConfig(max_argument_bytes=100)
    text = _text_of_length(150)
    assert _canon(text, config) == _canon(str(text), config)
    assert _canon(text, config) != _canon(text[:-3] + 'y"}', config)


# --- the depth limit ----------------------------------------------------------------------------------------------

def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("as_text", [False, True])
def test_values_nested_64_deep_are_kept_and_65_deep_digested(as_text: bool) -> None:
    # The depth limit is 64: 64 nested lists put the innermost value at depth 64 (the outer list is depth 0), which
    # is allowed, so the canonical text is the value itself; 65 lists put it at depth 65, and the whole value is
    # digested ("#" + 24 hex digits) rather than walked further.
    ok = _nested(64)
    deep = _nested(65)
    ok_in = json.dumps(ok) if as_text else ok
    deep_in = json.dumps(deep) if as_text else deep
    assert _canon(ok_in) == "[" * 64 + "1" + "]" * 64
    digested = _canon(deep_in)
    assert digested.startswith("#") and len(digested) == 25


# --- volatile keys and key order ----------------------------------------------------------------------------------

def test_volatile_keys_go_at_every_depth_and_keys_are_sorted() -> None:
    # requestId, Trace-ID and correlation_id fold to default volatile keys (case, "_" and "-" ignored); "page" and
    # "cursor" are meaningful and stay. Keys come out sorted at every depth.
    args = {"z": 1, "requestId": "r-1", "inner": {"Trace-ID": "abc", "page": 2, "b": [{"correlation_id": 5,
                                                                                          "cursor": "c"}]}}
    assert _canon(args) == '{"inner":{"b":[{"cursor":"c"}],"page":2},"z":1}'


def test_floats_fold_in_text_that_holds_a_json_constant_too() -> None:
    # NaN is not standard JSON, so such text takes the careful parser: its other numbers must fold the same way
    # (2.0 -> 2, 1.5 stays), so these arguments equal the same ones written with 2.
    assert _canon('{"a": NaN, "b": 2.0, "c": 1.5}') == '{"a":"\\u0000NaN","b":2,"c":1.5}'
    assert _canon('{"a": NaN, "b": 2.0, "c": 1.5}') == _canon({"a": float("nan"), "b": 2, "c": 1.5})


# --- Python values: the spelling of what JSON has not -----------------------------------------------------------------

def _nested_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def test_objects_nested_64_deep_are_kept_and_65_deep_digested() -> None:
    # The same limit for objects: the value inside 64 nested objects sits at depth 64 and is kept.
    assert _canon(_nested_dict(64)) == '{"k":' * 64 + "1" + "}" * 64
    assert _canon(_nested_dict(65)).startswith("#")


def test_non_string_keys_none_and_bytes() -> None:
    # A non-string key is written as its repr ("5", "(1, 2)"); None is JSON null; bytes are a tagged digest of
    # their content (BLAKE2b, 12 bytes), so equal bytes compare equal without their content showing.
    import hashlib

    assert _canon({5: "a"}) == '{"5":"a"}'
    assert _canon({(1, 2): "a"}) == '{"(1, 2)":"a"}'
    assert _canon({"a": None, "b": True}) == '{"a":null,"b":true}'
    digest = hashlib.blake2b(b"abc", digest_size=12).hexdigest()
    assert _canon({"b": b"abc"}) == '{"b":"\\u0000bytes:' + digest + '"}'


def test_floats_are_written_as_python_writes_them() -> None:
    # A float kept as a float is written as Python's repr: 1e16 (above 2**53, so not folded) as 1e+16 and 1e-07
    # for 1e-7, whether the arguments came as text or as values.
    assert _canon('{"x": 1e16, "y": 1e-7}') == '{"x":1e+16,"y":1e-07}'
    assert _canon({"x": 1e16, "y": 1e-7}) == '{"x":1e+16,"y":1e-07}'


def test_volatile_keys_go_on_the_careful_parse_path_too() -> None:
    # Text holding NaN takes the careful parser: volatile keys are dropped there as well, at any depth.
    assert _canon('{"a": NaN, "request_id": 1, "b": {"trace_id": 2, "c": 1}}') == '{"a":"\\u0000NaN","b":{"c":1}}'


def test_recorded_arguments_are_the_default() -> None:
    # The normalizer's signature of a call is a known one unless told the arguments were not recorded.
    normalizer = LoopEngine().normalizer
    assert normalizer.signature("t", {"a": 1}).canonical == '{"a":1}'
    assert normalizer.signature("t", {"a": 1}, False).known is False


def test_a_nudge_appended_to_a_result_is_not_evidence() -> None:
    # Everything from the first nudge marker on is loopguard's text, not the tool's: "rows: 0" with one or two
    # nudges appended is the same evidence as "rows: 0" alone, and differs from "rows: 1".
    from otel_loopguard.core.signature import NUDGE_MARKER

    n = LoopEngine().normalizer

    def evidence(result: str) -> str | None:
        return n.evidence(error=None, progress=None, result=result, result_captured=True)

    base = evidence("rows: 0")
    assert evidence("rows: 0" + NUDGE_MARKER + "Try a different approach.") == base
    assert evidence("rows: 0" + NUDGE_MARKER + "first" + NUDGE_MARKER + "second") == base
    assert evidence("rows: 1" + NUDGE_MARKER + "Try a different approach.") != base


def test_volatile_keys_go_inside_arrays_of_objects_in_text() -> None:
    # Several objects, some inside arrays inside objects: the volatile keys go at every level.
    text = '{"a": [{"request_id": 1, "x": 2}, [{"span_id": 3, "y": 4}]], "b": {"c": 1, "nonce": "n"}}'
    assert _canon(text) == '{"a":[{"x":2},[{"y":4}]],"b":{"c":1}}'


def test_results_with_lone_surrogates_have_evidence() -> None:
    # A tool can return text that is not valid UTF-8 (a lone surrogate from a broken decoder): it still has an
    # evidence digest, equal for equal text and different for different text.
    n = LoopEngine().normalizer

    def evidence(result: str) -> str | None:
        return n.evidence(error=None, progress=None, result=result, result_captured=True)

    a = evidence("x\ud800")
    assert a is not None and a.startswith("r:")
    assert a == evidence("x\ud800")
    assert a != evidence("x\ud801")


def test_set_members_are_ordered_by_their_json_text() -> None:
    # Not by value: "10" < "9" as text, so {9, 10} is written [10,9]. This is also what makes a set of mixed types
    # (which Python cannot compare) sortable: the text '"a"' starts with a quote (0x22), which sorts before the
    # digit of '1' (0x31), so ["a",1].
    assert _canon({"s": {9, 10}}) == '{"s":[10,9]}'
    assert _canon({"s": {1, "a"}}) == '{"s":["a",1]}'


def _nested_frozenset(depth: int) -> Any:
    value: Any = frozenset({1})
    for _ in range(depth - 1):
        value = frozenset({value})
    return value


def test_sets_count_towards_the_depth_limit() -> None:
    # 40 nested sets put the innermost member at depth 40 (inside {"s": ...}: 41): kept, as nested lists.
    assert _canon({"s": _nested_frozenset(40)}) == '{"s":' + "[" * 40 + "1" + "]" * 40 + "}"
    # 70 nested sets are deeper than 64: digested.
    assert _canon({"s": _nested_frozenset(70)}).startswith("#")


class _Point:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def test_other_objects_are_spelt_by_their_repr_cut_at_256() -> None:
    # An object JSON cannot hold is written as a tagged string of its repr, at most 256 characters of it.
    assert _canon({"o": _Point("P(1)")}) == '{"o":"\\u0000obj:P(1)"}'
    assert _canon({"o": _Point("x" * 300)}) == '{"o":"\\u0000obj:' + "x" * 256 + '"}'


@pytest.mark.parametrize(("text", "canonical"), [
    ("7", '"7"'),                # a number as text is not an object or array: the string itself
    ("true", '"true"'),
    ("weather in Paris", '"weather in Paris"'),
    ("  [1, 2]", "[1,2]"),       # leading whitespace before JSON is ignored
    ('\n{"a": 1}', '{"a":1}'),
    ("[1] and more", '"[1] and more"'),   # not JSON after all: the string itself
    ("{not json}", '"{not json}"'),
])
def test_only_json_objects_and_arrays_in_text_are_parsed(text: str, canonical: str) -> None:
    # The README: a string that parses as a JSON object or array is canonicalised as that JSON; any other string
    # stands for itself (written as a JSON string).
    assert _canon(text) == canonical


def test_a_dropped_member_whose_value_is_an_object_leaves_the_fingerprint_alone() -> None:
    # The fingerprint sums the hashes of plain members only (strings, numbers, booleans, null): an object or array
    # member never entered the sum, so dropping one (a volatile key such as traceId holding an object) must not
    # subtract anything, and the text with it has the fingerprint of the text without it. The key is spelt in a
    # way this process has not met (a fresh canonicaliser), so the slow path over unknown keys runs.
    from otel_loopguard.core.config import DEFAULT_VOLATILE_KEYS
    from otel_loopguard.core.signature import Canonicalizer, argument_fingerprint

    canon = Canonicalizer(DEFAULT_VOLATILE_KEYS)
    with_object = argument_fingerprint('{"q": "a", "traceId": {"x": 1}, "spanId": [1, 2]}', canon.kept(),
                                       canon.dropped())
    fresh = Canonicalizer(DEFAULT_VOLATILE_KEYS)
    without = argument_fingerprint('{"q": "a"}', fresh.kept(), fresh.dropped())
    assert with_object == without
    # A plain dropped member is taken out of the sum too: same fingerprint as without it.
    plain = argument_fingerprint('{"q": "a", "requestId": "r-17"}', canon.kept(), canon.dropped())
    assert plain == without
