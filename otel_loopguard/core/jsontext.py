"""Parsing JSON text: msgspec where it accepts the text, ``json.loads`` for the rest (identical results)."""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from .cache import BoundedCache

__all__ = ["REFUSED", "loads", "parsed"]

_msgspec_loads = msgspec.json.Decoder().decode
# UnicodeEncodeError: a str holding a lone surrogate, which msgspec must encode to UTF-8 first.
_MSGSPEC_REFUSALS = (msgspec.MsgspecError, RecursionError, UnicodeEncodeError)

#: What :func:`parsed` gives for text msgspec refuses.
REFUSED: Final = msgspec.UNSET
# Argument texts parsed lately, with their values: the engine's fingerprint and the step audit read the same call's
# arguments moments apart. Texts longer than this are not kept.
_PARSED: BoundedCache[str, Any] = BoundedCache(1024)
_PARSED_MAX_CHARS = 4096


def loads(text: bytes | bytearray | str) -> Any:
    """``json.loads``, done by msgspec whenever msgspec accepts the text.

    For the JSON both accept they build the same objects (same numbers, strings, key order, last duplicate key
    wins); msgspec builds them in about half the time, which is most of what reading a large export costs.
    msgspec is the stricter of the two (lone surrogates, NaN, out-of-range numbers, UTF-16 input), so whatever it
    refuses goes to ``json.loads``, which either accepts it as it always did or raises its usual error.
    """
    try:
        return _msgspec_loads(text)
    except _MSGSPEC_REFUSALS:
        return json.loads(text)


def parsed(text: str) -> Any:
    """msgspec's value of the JSON text ``text`` (what :func:`loads` gives when msgspec accepts it), or
    :data:`REFUSED`; remembered for short texts, so two readers of one argument text parse it once.

    The value may be shared with other callers: it must never be changed.
    """
    value = _PARSED.get(text)
    if value is None:
        try:
            value = _msgspec_loads(text)
        except _MSGSPEC_REFUSALS + (ValueError, OverflowError):
            value = REFUSED
        if len(text) <= _PARSED_MAX_CHARS and value is not None:
            _PARSED.put(text, value)
    return value
