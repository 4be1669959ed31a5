"""The docs page's recorded block is rendered from a recording, and the committed page holds one."""

from __future__ import annotations

from .render_backends_doc import BEGIN, DOC, END, render


def test_render_shows_each_recorded_value() -> None:
    """A recording's Jaeger events, panel values and Loki names each appear in the rendered block."""
    block = render({
        "jaeger_verdict_events": {"support-bot": [["working", "stuck", "period", "nudge"]]},
        "jaeger_stuck_search": ["ab" * 16],
        "panels": {"Cost per trace / A": {"-": 0.0055000000000000005}, "Processor errors / A": {}},
        "plain_increase_stuck": [],
        "loki_stuck_entry": {"labels": ["service_name"], "metadata": ["trace_id"]},
    })  # fmt: skip
    assert block.startswith(BEGIN) and block.endswith(END)
    assert "| `invoke_agent support-bot` | working → stuck, period, nudge |" in block
    assert "answered 1 traces: `" + "ab" * 16 + "`" in block
    assert "| Cost per trace / A | - → 0.0055 |" in block and "| Processor errors / A | (no series) |" in block
    assert "`service_name`" in block and "`trace_id`" in block


def test_docs_page_has_a_recorded_block_with_every_panel() -> None:
    """docs/backends.md holds a rendered block that names the dashboard's counting panels with values."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for row in ("| Verdict transitions by verdict / A | ", "| Transitions into stuck by rule and agent / A | ",
                "| Traces currently in each state / A | ", "| Tool calls by tool (top 10) / A | "):
        assert row in block
