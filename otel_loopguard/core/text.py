"""The one escaping of strings that reach a terminal, a log line or an HTML page.

Text from span data (tool, agent and service names, messages) or file names is attacker-controlled in ``serve``:
it must neither break a line, drive a terminal (escape sequences), nor inject markup, and it must stay short.
"""

from __future__ import annotations

import html

__all__ = ["for_html", "printable", "shortened"]

# Control characters (C0, DEL, C1) and the Unicode line separators, as escapes: text from span data (tool names,
# messages, arguments in the step audit, attribute values) or file names can neither break a line nor drive the
# terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {0x2028: "\\u2028", 0x2029: "\\u2029"}
_ELLIPSIS = "\u2026"


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``), for one line of a terminal."""
    return text.translate(_CONTROL)


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis when cut), then :func:`printable`."""
    if len(text) > limit:
        text = text[:max(limit - 1, 0)] + _ELLIPSIS
    return printable(text)


def for_html(text: str, limit: int) -> str:
    """``text`` :func:`shortened` to ``limit`` characters and escaped for HTML text and quoted attribute values."""
    return html.escape(shortened(text, limit), quote=True)
