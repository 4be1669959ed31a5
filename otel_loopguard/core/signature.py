"""Action signatures and progress evidence: canonical, volatile-free forms of a call and its effect.

The canonical form of a value is compact JSON with keys sorted at every depth,
volatile keys removed, integral floats folded to ints and non-JSON values
(bytes, sets, objects) given a stable spelling. Two calls compare equal when
their tool and canonical arguments are equal.

One path builds it: text is parsed by msgspec (``json.loads`` takes what msgspec refuses: NaN, lone surrogate
escapes), Python values are converted by one walk, and one encoder writes the result (msgspec with sorted keys;
``json.dumps`` for the strings msgspec will not write). The text is exactly ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` of the cleaned value, floats written as ``float.__repr__``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress, filterfalse
from typing import Any

import msgspec

from .cache import BoundedCache
from .jsontext import parsed

#: Bumped whenever canonicalisation or evidence digests change, so that a new
#: normalizer is never mistaken for a change in agent behaviour (progress-aware verdicts).
NORMALIZER_VERSION = "loopguard-norm/1"

#: Canonical arguments of a call whose arguments were not recorded.
UNKNOWN = "\x00unknown"
#: Evidence of a call that failed: never progress, whatever the error says.
FAILED = "failed"
#: Separates a tool result from a loopguard nudge appended to it; what follows is not task evidence.
NUDGE_MARKER = "\n\n[loopguard] "

_MAX_DEPTH = 64
_CACHE_ENTRIES = 4096
# Only short raw strings are cached so the cache stays small (<= ~8 MiB of keys).
_CACHE_MAX_KEY = 2048


@dataclass(frozen=True, slots=True)
class ActionSignature:
    """What a call did, with noise removed.

    Attributes:
        tool: the tool name.
        canonical: the canonical arguments, or :data:`UNKNOWN` when they were not recorded.
    """

    tool: str
    canonical: str

    @property
    def known(self) -> bool:
        """False when the arguments were not recorded."""
        return self.canonical != UNKNOWN

    @property
    def key(self) -> str:
        """A single string that identifies the signature (tool and arguments)."""
        return self.tool + "\x1f" + self.canonical

    def digest(self, key: bytes) -> str:
        """A keyed digest safe to emit: it reveals nothing about the arguments without ``key``."""
        return keyed_digest(key, self.key)


def keyed_digest(key: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` under ``key``, as 32 hex digits."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class Canonicalizer:
    """Canonical forms of arguments and results, with volatile keys removed.

    Args:
        volatile_keys: folded key names (see ``normalize_key``) removed at any depth.
        max_bytes: strings longer than this are digested whole instead of parsed.

    Instances are safe to share between threads: the caches are :class:`BoundedCache` dicts, whose single-key
    reads, writes and clearing are atomic under the GIL.
    """

    def __init__(self, volatile_keys: frozenset[str], max_bytes: int = 65_536) -> None:
        self._volatile_keys = volatile_keys
        self._max_bytes = max_bytes
        self._cache: BoundedCache[tuple[str, frozenset[str]], str] = BoundedCache(_CACHE_ENTRIES)
        # Per ignore set (one per configured tool list, so a handful).
        self._filters: dict[frozenset[str], Callable[[dict[str, Any]], dict[str, Any]]] = {}
        self._keep: dict[frozenset[str], BoundedCache[str, None]] = {}
        self._drops: dict[frozenset[str], Callable[[str], bool]] = {}
        self._walkers: dict[frozenset[str], tuple[Callable[[dict[str, Any]], None], Callable[[list[Any]], None]]] = {}

    def _filter(self, ignore: frozenset[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The function that drops volatile and ignored keys from one JSON object in place (and returns it)."""
        drop_keys = self._filters.get(ignore)
        if drop_keys is None:
            volatile = self._volatile_keys
            # Verdicts per key spelling.
            drop_cache: BoundedCache[str, bool] = BoundedCache(_CACHE_ENTRIES)

            def drops(key: str) -> bool:
                hit = drop_cache.get(key)
                if hit is None:
                    folded = key.lower().replace("_", "").replace("-", "")
                    hit = drop_cache.put(key, folded in volatile or folded in ignore)
                return hit

            # Key spellings known to stay: one C-level subset test of the key views clears a whole object in the
            # common case.
            keep: BoundedCache[str, None] = BoundedCache(_CACHE_ENTRIES)
            self._keep[ignore] = keep
            kept = keep.keys()

            def drop_keys(obj: dict[str, Any]) -> dict[str, Any]:
                if kept >= obj.keys():
                    return obj
                gone = None
                for key in filterfalse(keep.__contains__, obj):  # the keys not known to stay, told apart in C
                    if drops(key):
                        if gone is None:
                            gone = [key]
                        else:
                            gone.append(key)
                        continue
                    keep.put(key, None)
                if gone is not None:
                    # The dict is the decoder's own fresh object: deleting in place is safe, and cheaper than a copy.
                    for key in gone:
                        del obj[key]
                return obj

            self._filters[ignore] = drop_keys
            self._drops[ignore] = drops
        return drop_keys

    def dropped(self, ignore: frozenset[str] = frozenset()) -> Callable[[str], bool]:
        """Whether canonical forms drop a key spelling (volatile, or in ``ignore``); cached per spelling."""
        drops = self._drops.get(ignore)
        if drops is None:
            self._filter(ignore)
            drops = self._drops[ignore]
        return drops

    def kept(self, ignore: frozenset[str] = frozenset()) -> BoundedCache[str, None]:
        """Key spellings known to stay in canonical forms: a bounded cache that the key filter and fingerprints fill."""
        if ignore not in self._keep:
            self._filter(ignore)
        return self._keep[ignore]

    def _walker(self, ignore: frozenset[str]) -> tuple[Callable[[dict[str, Any]], None], Callable[[list[Any]], None]]:
        """Functions that drop keys from every object inside a value msgspec decoded (objects, then arrays)."""
        walkers = self._walkers.get(ignore)
        if walkers is None:
            drop_keys = self._filter(ignore)

            def walk_object(obj: dict[str, Any]) -> None:
                drop_keys(obj)
                for value in obj.values():
                    cls = value.__class__
                    if cls is dict:
                        walk_object(value)
                    elif cls is list:
                        walk_array(value)

            def walk_array(items: list[Any]) -> None:
                for value in items:
                    cls = value.__class__
                    if cls is dict:
                        walk_object(value)
                    elif cls is list:
                        walk_array(value)

            walkers = self._walkers[ignore] = (walk_object, walk_array)
        return walkers

    def canonical(self, value: Any, ignore: frozenset[str] = frozenset()) -> str:
        """Return the canonical text of ``value`` (a dict, list, scalar or JSON string).

        A string that parses as a JSON object or array is canonicalised as that
        JSON; any other string stands for itself. Never raises.
        """
        if isinstance(value, str):
            if len(value) > _CACHE_MAX_KEY:
                return self._canonical_text(value, ignore)
            cache_key = (value, ignore)
            hit = self._cache.get(cache_key)
            if hit is not None:
                return hit
            return self._cache.put(cache_key, self._canonical_text(value, ignore))
        try:
            return _dump(self._clean(value, ignore, 0))
        except (RecursionError, ValueError, TypeError):
            return "#" + _digest(repr(value)[: self._max_bytes])

    def cached(self, text: str, ignore: frozenset[str] = frozenset()) -> str | None:
        """The canonical text of the string ``text`` if it is in the cache (canonicalised lately), else None."""
        return self._cache.get((text, ignore))

    def _canonical_text(self, text: str, ignore: frozenset[str]) -> str:
        if len(text) > self._max_bytes:
            # Parsing a huge argument costs the host; its digest still compares equal
            # for equal text, which is what loop detection needs.
            return "#" + _digest(text)
        first = text[:1]
        if first != "{" and first != "[":
            first = text.lstrip()[:1]
            if first != "{" and first != "[":
                return _dump(text)
        objects = text.count("{")
        containers = objects + text.count("[")
        if containers <= _MAX_DEPTH:
            # No value can sit deeper than the brackets that open it, so the depth limit cannot trip here and the
            # walk below needs no depth check. msgspec parses (floats folded by the hook), the walk drops keys in
            # place, and msgspec encodes with sorted keys: the text _dump gives.
            try:
                value = _ms_decode(text)
            except _MS_REFUSALS:
                pass
            else:
                if objects:  # without a "{" there is no object, hence no key to drop
                    if objects == 1 and value.__class__ is dict:  # the only object: no other keys to look at
                        (self._filters.get(ignore) or self._filter(ignore))(value)
                    else:
                        walk_object, walk_array = self._walkers.get(ignore) or self._walker(ignore)
                        (walk_object if value.__class__ is dict else walk_array)(value)
                return _ms_encode(value).decode()
            # What msgspec refuses but JSON allows (NaN, lone surrogate escapes) is parsed by json with the same
            # hooks: keys dropped as each object is built, floats folded by the same function.
            try:
                value = json.loads(text, object_hook=self._filters.get(ignore) or self._filter(ignore),
                                   parse_float=_ms_float, parse_constant=_CONSTANTS.__getitem__)
            except (ValueError, RecursionError):
                return _dump(text)
            return _dump(value)
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return _dump(text)
        try:
            return _dump(self._clean(parsed, ignore, 0))
        except (RecursionError, ValueError, TypeError):
            return "#" + _digest(text)

    def _clean(self, value: Any, ignore: frozenset[str], depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ValueError("too deep")
        if isinstance(value, dict):
            volatile = self._volatile_keys
            out = {}
            for k, v in value.items():
                name = k if isinstance(k, str) else repr(k)
                folded = name.lower().replace("_", "").replace("-", "")
                if folded in volatile or folded in ignore:
                    continue
                out[name] = self._clean(v, ignore, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [self._clean(v, ignore, depth + 1) for v in value]
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return _json_float(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return "\x00bytes:" + hashlib.blake2b(bytes(value), digest_size=12).hexdigest()
        if isinstance(value, (set, frozenset)):
            return sorted((self._clean(v, ignore, depth + 1) for v in value), key=_dump)
        return "\x00obj:" + repr(value)[:256]


def _fold_float(value: float) -> Any:
    if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if math.isnan(value):
        return "\x00NaN"
    if math.isinf(value):
        return "\x00Inf" if value > 0 else "\x00-Inf"
    return value


def _json_float(value: float) -> Any:
    """A float as the canonical form holds it: folded, and a non-integral one as the text json writes for it."""
    folded = _fold_float(value)
    if folded.__class__ is float:
        # msgspec spells some floats differently (1e16, 1e-7); json writes float.__repr__, so write that verbatim.
        return msgspec.Raw(float.__repr__(folded).encode())
    return folded


_FOLD_LIMIT = float(2**53)
_isfinite = math.isfinite
_Raw = msgspec.Raw
_float_repr = float.__repr__
# Number tokens seen, with what the decoder hands over for them: parsing and writing a float are the slow part of
# decoding arguments (arguments repeat their few floats: scores, temperatures, limits), and the values are immutable.
_FLOAT_TOKENS: BoundedCache[str, Any] = BoundedCache(_CACHE_ENTRIES)
_FLOAT_TOKEN_MAX = 40


def _ms_float(text: str) -> Any:
    """:func:`_json_float` of a JSON number token: cached, common cases first."""
    hit = _FLOAT_TOKENS.get(text)
    if hit is not None:
        return hit
    value = float(text)
    if value.is_integer():  # finite and integral
        out: Any = int(value) if -_FOLD_LIMIT < value < _FOLD_LIMIT else _Raw(_float_repr(value).encode())
    elif _isfinite(value):
        out = _Raw(_float_repr(value).encode())
    else:
        out = _json_float(value)
    if len(text) <= _FLOAT_TOKEN_MAX:
        _FLOAT_TOKENS.put(text, out)
    return out


_ms_decode = msgspec.json.Decoder(float_hook=_ms_float).decode
_ms_encode = msgspec.json.Encoder(order="sorted").encode
# Refused by msgspec but maybe taken by json (lone surrogates, NaN, huge numbers): left to the json path.
_MS_REFUSALS = (msgspec.MsgspecError, RecursionError, UnicodeEncodeError, ValueError, OverflowError)


# JSON's non-standard constants, spelled as the walk spells the floats they stand for.
_CONSTANTS = {"NaN": "\x00NaN", "Infinity": "\x00Inf", "-Infinity": "\x00-Inf"}


def _raw_float(value: Any) -> Any:
    # json.dumps meets the msgspec.Raw of a folded float only in the fallback below; float.__repr__ round-trips,
    # so it writes the same text again.
    if isinstance(value, msgspec.Raw):
        return float(bytes(value))
    raise TypeError(f"{type(value).__name__} is not JSON")


def _dump(value: Any) -> str:
    """Compact JSON of a cleaned value, keys sorted, non-ASCII written as it is (``json.dumps``'s exact text)."""
    try:
        return _ms_encode(value).decode()
    except (UnicodeEncodeError, TypeError, msgspec.EncodeError):
        # A string holding a lone surrogate (msgspec writes UTF-8 only), or a subclass msgspec does not know.
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_raw_float)


# Decoded values whose inequality implies unequal canonical text: equal canonical texts hold, for a kept key, either
# two such values that Python calls equal (a float that the canonical form folds to an int equals that int) or none.
# Containers are left out (they may differ only in dropped keys).
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})
_is_plain_type = _PLAIN_SCALARS.__contains__


def argument_fingerprint(text: str, kept: BoundedCache[str, None], dropped: Callable[[str], bool]) -> int | None:
    """A number such that two argument texts with different numbers have different canonical texts.

    Built from the top-level members of the JSON object ``text`` holds, without building its canonical text: the
    kept keys whose values are plain (a string, number, boolean or null), with those values. Equal canonical texts
    imply equal such members, hence equal numbers (1, 1.0 and true count as equal here; the canonical texts tell
    1 and true apart); equal numbers only mean "maybe equal". None when ``text`` is not a JSON object msgspec
    accepts. The number depends on the process's string hashing, so it never leaves the process. The text is
    parsed by :func:`~.jsontext.parsed`, whose value the step audit reads too.

    Args:
        text: an argument string.
        kept: keys known to stay (:meth:`Canonicalizer.kept`), learnt here too; a shortcut, never the verdict.
        dropped: whether canonical forms drop a key (:meth:`Canonicalizer.dropped` for the tool's ignore set).
    """
    value = parsed(text)
    if value.__class__ is not dict:
        return None
    # The members are combined by the sum of their hashes (a multiset's, so key order does not matter), in C.
    total = sum(map(hash, compress(value.items(), map(_is_plain_type, map(type, value.values())))))
    for key in filterfalse(kept.__contains__, value):  # the keys not known to stay, told apart in C
        if dropped(key):
            # The value is shared (see parsed): a dropped member is taken out of the sum, not deleted.
            member = value[key]
            if _is_plain_type(type(member)):
                total -= hash((key, member))
        else:
            kept.put(key, None)
    return total


class Normalizer:
    """Turns raw call data into signatures and evidence for the engine.

    Args:
        canonicalizer: the shared canonical-form builder.
        ignore_args: per-tool folded argument names to drop as well.
    """

    version = NORMALIZER_VERSION

    def __init__(self, canonicalizer: Canonicalizer, ignore_args: dict[str, frozenset[str]]) -> None:
        self._canon = canonicalizer
        self._ignore = ignore_args
        self._result_cache: BoundedCache[str, str] = BoundedCache(_CACHE_ENTRIES)

    def signature(self, tool: str, arguments: Any, captured: bool = True) -> ActionSignature:
        """The action signature of a call; ``captured=False`` gives the unknown signature."""
        if not captured:
            return ActionSignature(tool, UNKNOWN)
        if arguments is None:
            arguments = {}
        return ActionSignature(tool, self._canon.canonical(arguments, self._ignore.get(tool, frozenset())))

    def evidence(self, *, error: str | None, progress: str | None, result: Any, result_captured: bool) -> str | None:
        """Progress evidence of a call: ``failed``, the explicit fingerprint, a result digest, or None (missing)."""
        if error is not None:
            return FAILED
        if progress is not None:
            return "p:" + progress
        if not result_captured:
            return None
        if isinstance(result, str) and NUDGE_MARKER in result:
            result = result.split(NUDGE_MARKER, 1)[0]
        return self.result_evidence(result)

    def result_evidence(self, result: Any) -> str:
        """The evidence digest of a captured result (a string already cut at :data:`NUDGE_MARKER`)."""
        if isinstance(result, str) and len(result) <= _CACHE_MAX_KEY:
            hit = self._result_cache.get(result)
            if hit is None:
                hit = self._result_cache.put(result, "r:" + _digest(self._canon.canonical(result)))
            return hit
        return "r:" + _digest(self._canon.canonical(result))

    def key_rules(self, ignore: frozenset[str]) -> tuple[BoundedCache[str, None], Callable[[str], bool]]:
        """Keys known to stay, and whether a key is dropped, for a tool whose ignore set is ``ignore``."""
        return self._canon.kept(ignore), self._canon.dropped(ignore)

    def arguments(self, tool: str) -> tuple[Any, frozenset[str]]:
        """The canonicaliser's ``canonical`` function and ``tool``'s ignore set, for callers that canonicalise later."""
        return self._canon.canonical, self._ignore.get(tool, frozenset())

    def cached_arguments(self) -> Callable[[str, frozenset[str]], str | None]:
        """The canonicaliser's cache look-up: the canonical text of an argument string canonicalised lately, or None."""
        return self._canon.cached


def make_normalizer(volatile_keys: frozenset[str], max_bytes: int, tools: dict[str, Any]) -> Normalizer:
    """Build the :class:`Normalizer` for a configuration's volatile keys and per-tool ignore lists."""
    ignore = {name: t.ignore_args for name, t in tools.items() if t.ignore_args}
    return Normalizer(Canonicalizer(volatile_keys, max_bytes), ignore)


