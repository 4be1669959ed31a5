"""Token counts are bounded and ``--json`` output is always JSON: no ``Infinity`` or ``NaN`` from any usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_loopguard.cli import main
from otel_loopguard.cli.options import json_line
from otel_loopguard.sdk.otlp_write import write_otlp_json

S = 10**9
T0 = 1_767_225_600 * S


def _strict(text: str) -> Any:
    """Parse JSON refusing the non-standard constants Python would otherwise accept."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def _trace(path: Path, input_tokens: float) -> str:
    """One agent run through a real SDK: a chat span reporting ``input_tokens`` of model-a, then one tool call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("non-finite-test")
    root = tracer.start_span("invoke_agent bot", start_time=T0, attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = set_span_in_context(root)
    tracer.start_span("chat model-a", context=ctx, start_time=T0, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-a",
        "gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": 0}).end(end_time=T0 + S)
    tracer.start_span("execute_tool search", context=ctx, start_time=T0 + 2 * S, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "r"}).end(end_time=T0 + 3 * S)
    root.end(end_time=T0 + 4 * S)
    write_otlp_json(exporter.get_finished_spans(), str(path))
    return str(path)


def _audit(capsys: pytest.CaptureFixture[str], trace: str, config: Path) -> dict[str, Any]:
    capsys.readouterr()
    main(["audit", "--json", "--config", str(config), trace])
    out = capsys.readouterr().out
    doc: dict[str, Any] = _strict(out)
    return doc


def test_a_huge_token_count_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1e308 input tokens count as the bound, 10^12: at $1 per million the cost is exactly $1 000 000."""
    config = tmp_path / "c.toml"
    config.write_text('[prices."model-a"]\ninput = 1.0\noutput = 1.0\n')
    doc = _audit(capsys, _trace(tmp_path / "t.json", 1e308), config)
    assert doc["cost_usd"] == 1_000_000.0
    assert "not_finite" not in doc


def test_an_infinite_cost_is_printed_as_null_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A price of 1e308 per million tokens overflows the cost: --json writes null and names the key."""
    config = tmp_path / "c.toml"
    config.write_text('[prices."model-a"]\ninput = 1e308\noutput = 1.0\n')
    doc = _audit(capsys, _trace(tmp_path / "t.json", 10**12), config)
    assert doc["cost_usd"] is None
    assert doc["not_finite"] == ["cost_usd"]


def test_json_line_replaces_every_non_finite_number() -> None:
    """NaN and both infinities, nested in objects and lists, become null and are listed by path."""
    line = json_line({"a": float("inf"), "b": [1.5, float("nan")], "c": {"d": -float("inf")}, "e": 2})
    assert _strict(line) == {"a": None, "b": [1.5, None], "c": {"d": None}, "e": 2,
                             "not_finite": ["a", "b[1]", "c.d"]}
