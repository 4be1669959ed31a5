"""The one escaping function: every string from input that reaches a terminal, a log line or an HTML page.

Span data (tool names, agent names, messages, attribute keys) and file names are chosen by whoever sends or stores
the traces. Printed raw they could drive a terminal (ESC and C1 control sequences clear the screen or rewrite
earlier lines), split a log line (newline, U+2028), or make text read differently from what it is (bidirectional
controls such as U+202E reverse what follows). :func:`escaped` turns each such character into a visible escape
(``\\x1b``, ``\\u202e``), so the text stays one line, shows what was sent, and cannot act on the reader.
"""

from __future__ import annotations

import html as _html
from typing import Final

__all__ = ["ELLIPSIS", "escaped"]

ELLIPSIS: Final = "\u2026"

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
