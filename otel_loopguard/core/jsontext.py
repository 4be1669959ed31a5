"""Parsing JSON text: msgspec where it accepts the text, ``json.loads`` for the rest (identical results)."""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

__all__ = ["REFUSED", "loads", "parsed"]

_msgspec_loads = msgspec.json.Decoder().decode
# UnicodeEncodeError: a str holding a lone surrogate, which msgspec must encode to UTF-8 first.
_MSGSPEC_REFUSALS = (msgspec.MsgspecError, RecursionError, UnicodeEncodeError)

#: What :func:`parsed` gives for text msgspec refuses.
REFUSED: Final = msgspec.UNSET
# The argument text parsed last, with its value: the engine's fingerprint and then the step audit read the same
# call's arguments (the same str object) moments apart. One tuple, replaced whole: atomic under the GIL.
_last: tuple[str | None, Any] = (None, None)


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
    :data:`REFUSED`; the text parsed last is remembered, so two readers of one argument text in a row (the engine's
    fingerprint, then the step audit) parse it once.

    The value may be shared with other callers: it must never be changed.
    """
    global _last
    last = _last
    if last[0] is text:
        return last[1]
    try:
        value = _msgspec_loads(text)
    except _MSGSPEC_REFUSALS + (ValueError, OverflowError):
        value = REFUSED
    _last = (text, value)
    return value
