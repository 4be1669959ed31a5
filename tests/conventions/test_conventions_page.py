"""The documentation's conventions page stays current with the conventions table (``conventions/table.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from otel_loopguard.conventions.table import TOOL_CONVENTIONS
from otel_loopguard.conventions.unread import CONVENTIONS_PAGE

ROOT = Path(__file__).resolve().parents[2]
#: The documentation page of the LLM-observability SDKs' conventions (their rows and versions are listed there).
SDK_PAGE = ROOT / "docs" / "observability-sdks.md"


def _page() -> str:
    # The page the unread notes point users to: its path in parentheses, its title in quotes.
    path = CONVENTIONS_PAGE.rsplit("(", 1)[1].rstrip(")")
    text = (ROOT / path).read_text(encoding="utf-8")
    title = CONVENTIONS_PAGE.split("'")[1]
    assert text.startswith(f"# {title}\n"), path
    return text


def test_every_convention_is_listed_with_the_versions_it_was_recorded_from() -> None:
    """Each tool-span row's recognising attribute value and every package version it was recorded from appear on
    the documentation page the unread notes name (or, for the LLM-observability SDKs, on their own page)."""
    page = _page() + SDK_PAGE.read_text(encoding="utf-8")
    for convention in TOOL_CONVENTIONS:
        for version in re.findall(r"\d+\.\d+\.\d+(?:b\d+)?", convention.recorded_from):
            assert version in page, (convention.name, version)
        for when in convention.when:
            marker = when.equals[0] if when.equals else (when.attribute or when.span_name_prefix.strip())
            assert marker in page, (convention.name, marker)


def test_the_page_says_what_is_reported_when_nothing_can_be_read() -> None:
    """The page names both unread reasons, their counter, the OTLP partial success and the ways out."""
    page = _page()
    for words in ("no_tool_calls", "unknown_attributes", "loopguard.spans.unread", "partial_success",
                  "redacted_values", "SPAN_ONLY", "[conventions."):
        assert words in page, words
