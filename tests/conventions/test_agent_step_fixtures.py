"""``otel-loopguard audit`` on the recorded multi-agent and model-turn fixtures says what the scripts say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard import cli
from tests.support.agent_step_fixtures import Expected, cases


def _audit(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    cli.main(["audit", "--json", str(path)])
    captured = capsys.readouterr()
    assert captured.err == ""
    [report] = [json.loads(line) for line in captured.out.splitlines() if line.strip()]
    return report


@pytest.mark.parametrize(("path", "want"), cases(), ids=lambda c: c.stem if isinstance(c, Path) else "")
def test_audit_judges_each_kind_of_step(path: Path, want: Expected, capsys: pytest.CaptureFixture[str]) -> None:
    """Hand-off ping-pongs and repeated answers are stuck with their kind, period and agents; healthy runs work."""
    report = _audit(path, capsys)
    assert (report["verdict"], report["rule"], report["period"]) == (want.verdict, want.rule, want.period)
    assert report.get("step_kind") == want.step_kind
    assert tuple(report.get("agents", ())) == want.agents
    stuck = [t["step"] for t in report["transitions"] if t["to"] == "stuck"]
    assert stuck[:1] == ([want.stuck_at] if want.stuck_at is not None else [])
    assert report["steps_used"] == want.tool_calls  # tool calls only: the other kinds are counted apart
    if want.chunk is not None:
        assert (report["chunk_length"], report["chunk_count"]) == want.chunk
    if want.transitions is not None:
        assert tuple((t["step"], t["to"], t.get("step_kind", "tool")) for t in report["transitions"]) == (
            want.transitions)
