"""The one escaping function: every string from input that reaches a terminal, a log line or an HTML page.

Span data (tool names, agent names, messages, attribute keys) and file names are chosen by whoever sends or stores
the traces. Printed raw they could drive a terminal (ESC and C1 control sequences clear the screen or rewrite
earlier lines), split a log line (newline, U+2028), or make text read differently from what it is (bidirectional
controls such as U+202E reverse what follows). :func:`escaped` turns each such character into a visible escape
(``\\x1b``, ``\\u202e``), so the text stays one line, shows what was sent, and cannot act on the reader.
"""

from __future__ import annotations

import hashlib
import html as _html
from typing import Final

__all__ = ["ELLIPSIS", "MAX_NAME_CHARS", "bounded_name", "escaped"]

ELLIPSIS: Final = "\u2026"
#: The most characters of a name put on emitted telemetry (tool, agent, version values).
MAX_NAME_CHARS: Final = 128
_DIGEST_CHARS = 12  # 48 bits of BLAKE2b: distinct long names collide only by chance, ~1 in 10^14 per pair

# C0 controls, DEL and C1 controls: \xNN.
_CONTROLS = (*range(0x20), *range(0x7F, 0xA0))
# Bidirectional controls (marks, embeddings, overrides, isolates), zero-width characters, line and paragraph
# separators, the byte order mark, and lone surrogates (a JSON "\ud800" escape): \uNNNN.
_FORMATS = (0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x2028, 0x202F), *range(0x2060, 0x2070), 0xFEFF,
            *range(0xD800, 0xE000))
_TABLE: Final = {c: f"\\x{c:02x}" for c in _CONTROLS} | {c: f"\\u{c:04x}" for c in _FORMATS}


def escaped(text: str, limit: int | None = None, *, html: bool = False) -> str:
    """``text`` with control, C1, bidirectional, zero-width and line-separator characters escaped; cut to ``limit``.

    Args:
        text: any string from input (span data, a file name, an exception message quoting either).
        limit: the most characters shown (the last one then an ellipsis); ``None``: no bound.
        html: also escape ``& < > " '`` for an HTML page (after the cut: an entity counts as one character).

    Returns:
        One printable line that shows the text as sent; the same input always gives the same result.
    """
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]  # escaping only lengthens: nothing past the limit could be shown
    out = text.translate(_TABLE)
    if limit is not None and (cut or len(out) > limit):
        out = out[:max(0, limit - 1)] + ELLIPSIS
    if html:
        # After the cut, so that no entity is cut in half (the limit counts the characters shown).
        out = _html.escape(out, quote=True)
    return out


def bounded_name(name: str) -> str:
    """``name`` itself when it has at most 128 characters, all printable; else an escaped prefix, ``~`` and 12 hex
    digits of a digest of the whole name (128 characters at most; the same name always gives the same result)."""
    if len(name) <= MAX_NAME_CHARS and name.isprintable():
        return name
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_CHARS // 2).hexdigest()
    keep = MAX_NAME_CHARS - _DIGEST_CHARS - 1
    return f"{escaped(name[:keep], keep)}~{digest}"
