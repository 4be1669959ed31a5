"""The README's convention table stays current with the conventions table (``conventions/table.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from otel_loopguard.conventions.table import TOOL_CONVENTIONS
from otel_loopguard.conventions.unread import README_SECTION

README = Path(__file__).resolve().parents[2] / "README.md"
#: The documentation page of the LLM-observability SDKs' conventions (their rows and versions are listed there).
SDK_PAGE = Path(__file__).resolve().parents[2] / "docs" / "observability-sdks.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    title = README_SECTION.split("'")[1]  # the section the unread notes point users to
    start = text.index(f"## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_convention_is_listed_with_the_versions_it_was_recorded_from() -> None:
    """Each tool-span row's recognising attribute value and every package version it was recorded from appear in
    the README section the unread notes name (or, for the LLM-observability SDKs, on their documentation page)."""
    section = _section() + SDK_PAGE.read_text(encoding="utf-8")
    for convention in TOOL_CONVENTIONS:
        for version in re.findall(r"\d+\.\d+\.\d+(?:b\d+)?", convention.recorded_from):
            assert version in section, (convention.name, version)
        for when in convention.when:
            marker = when.equals[0] if when.equals else (when.attribute or when.span_name_prefix.strip())
            assert marker in section, (convention.name, marker)


def test_the_section_says_what_is_reported_when_nothing_can_be_read() -> None:
    section = _section()
    for words in ("no_tool_calls", "unknown_attributes", "loopguard.spans.unread", "partial_success",
                  "redacted_values", "SPAN_ONLY", "[conventions."):
        assert words in section, words
