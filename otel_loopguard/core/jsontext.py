"""Parsing JSON text: msgspec where it accepts the text, ``json.loads`` for the rest (identical results)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["loads"]

_msgspec_loads = msgspec.json.Decoder().decode
# UnicodeEncodeError: a str holding a lone surrogate, which msgspec must encode to UTF-8 first.
_MSGSPEC_REFUSALS = (msgspec.MsgspecError, RecursionError, UnicodeEncodeError)


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
