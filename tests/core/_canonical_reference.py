"""Test-only reference canonicaliser: the canonical form written the plain way, with the standard library alone.

It shares no code with ``otel_loopguard.core.signature`` (no msgspec, no caches, no fast paths, no shortcuts on the
text): parse with ``json.loads``, rebuild the value with volatile keys dropped and floats folded, write it with
``json.dumps``. The property tests compare the production canonicaliser with it, and the reference engine
(``_engine_reference.py``) builds its signatures and evidence with it, so a bug in the production normaliser shows
up as a difference instead of being shared by both sides. Do not optimise this file.

The rules it writes down (normalizer version ``loopguard-norm/1``):

* a string longer than ``max_bytes`` is ``#`` + its digest, unparsed;
* a string whose first non-space character is ``{`` or ``[`` and that ``json.loads`` accepts is that JSON value;
  any other string stands for itself (a JSON string);
* dict keys that are not strings are spelled by ``repr``; a key whose folded spelling (lower case, no ``_`` or
  ``-``) is volatile or ignored is dropped, at any depth;
* a float that is integral and below 2**53 in size becomes an int; NaN and the infinities become marker strings;
* bytes become a digest, sets a sorted list, other objects their bounded ``repr``;
* a value nested deeper than 64 levels makes the whole value ``#`` + a digest;
* the text is ``json.dumps`` with sorted keys, compact separators and non-ASCII characters kept.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from typing import Any

MAX_DEPTH = 64
UNKNOWN = "\x00unknown"
FAILED = "failed"
NUDGE_MARKER = "\n\n[loopguard] "


def blake(text: str) -> str:
    """The short content digest used in canonical forms and evidence (BLAKE2b, 12 bytes, hex)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def keyed(key: bytes, text: str) -> str:
    """The emitted digest: HMAC-SHA256 under ``key``, 32 hex digits."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]


def fold(key: str) -> str:
    """A key as volatile-key lists spell it: lower case, without ``_`` and ``-``."""
    return key.lower().replace("_", "").replace("-", "")


def dumps(value: Any) -> str:
    """The canonical writer."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ReferenceCanonicalizer:
    """Canonical texts of arguments and results, the plain way.

    Args:
        volatile: folded key names dropped at any depth.
        max_bytes: strings longer than this are digested, not parsed.
    """

    def __init__(self, volatile: frozenset[str], max_bytes: int = 65_536) -> None:
        self.volatile = frozenset(fold(k) for k in volatile)
        self.max_bytes = max_bytes

    def canonical(self, value: Any, ignore: frozenset[str] = frozenset()) -> str:
        """The canonical text of ``value`` (``ignore``: more folded key names to drop)."""
        drop = self.volatile | ignore
        if isinstance(value, str):
            if len(value) > self.max_bytes:
                return "#" + blake(value)
            if value.lstrip()[:1] not in ("{", "["):
                return dumps(value)
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                return dumps(value)
            try:
                return dumps(self.clean(parsed, drop, 0))
            except ValueError:
                return "#" + blake(value)
        try:
            return dumps(self.clean(value, drop, 0))
        except (ValueError, RecursionError):
            return "#" + blake(repr(value)[: self.max_bytes])

    def clean(self, value: Any, drop: frozenset[str], depth: int) -> Any:
        """``value`` rebuilt from JSON types, with dropped keys gone and floats folded."""
        if depth > MAX_DEPTH:
            raise ValueError("too deep")
        if isinstance(value, dict):
            out = {}
            for key, member in value.items():
                name = key if isinstance(key, str) else repr(key)
                if fold(name) not in drop:
                    out[name] = self.clean(member, drop, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            return [self.clean(member, drop, depth + 1) for member in value]
        if value is None or isinstance(value, (bool, str, int)):
            return value
        if isinstance(value, float):
            if math.isnan(value):
                return "\x00NaN"
            if math.isinf(value):
                return "\x00Inf" if value > 0 else "\x00-Inf"
            if value.is_integer() and abs(value) < 2**53:
                return int(value)
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return "\x00bytes:" + hashlib.blake2b(bytes(value), digest_size=12).hexdigest()
        if isinstance(value, (set, frozenset)):
            return sorted((self.clean(member, drop, depth + 1) for member in value), key=dumps)
        return "\x00obj:" + repr(value)[:256]

    def evidence(self, *, error: str | None, progress: str | None, result: Any, result_captured: bool) -> str | None:
        """Progress evidence: failed, the explicit fingerprint, a digest of the result before any nudge, or None."""
        if error is not None:
            return FAILED
        if progress is not None:
            return "p:" + progress
        if not result_captured:
            return None
        if isinstance(result, str) and NUDGE_MARKER in result:
            result = result.split(NUDGE_MARKER, 1)[0]
        return "r:" + blake(self.canonical(result))
