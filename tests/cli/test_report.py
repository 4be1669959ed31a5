"""``otel-loopguard report``: per-attribute loop, intervention, error and cost rates of stored traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from otel_loopguard.cli import main
from otel_loopguard.sdk.otlp_write import write_otlp_json

T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
S = 10**9
CONFIG = """
[prices."model-a"]
input = 1.0
output = 2.0
"""


class _Writer:
    """Builds traces with explicit times through a real TracerProvider, then writes them as OTLP/JSON."""

    def __init__(self, service_version: str) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "agent",
                                                                 "service.version": service_version}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("report-test")
        self.now = T0
        self.n = 0

    def trace(self, calls: list[tuple[str, str, bool]], prompt: str | None, chats: int = 1) -> None:
        """One agent run: ``chats`` model calls (1000 in, 100 out tokens), then tool calls (tool, query, failed)."""
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot"}
        if prompt is not None:
            attrs["app.prompt.version"] = prompt
        root = self.tracer.start_span("invoke_agent bot", start_time=self.now, attributes=attrs)
        ctx = set_span_in_context(root)
        for _ in range(chats):
            span = self.tracer.start_span("chat model-a", context=ctx, start_time=self._tick(), attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-a",
                "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100})
            span.end(end_time=self._tick())
        for tool, query, failed in calls:
            self.n += 1
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                     "gen_ai.tool.call.arguments": json.dumps({"q": query})}
            if failed:
                attrs["error.type"] = "ToolError"
            else:
                attrs["gen_ai.tool.call.result"] = f"result of {query}"
            span = self.tracer.start_span(f"execute_tool {tool}", context=ctx, start_time=self._tick(),
                                          attributes=attrs)
            if failed:
                span.set_status(Status(StatusCode.ERROR, "ToolError"))
            span.end(end_time=self._tick())
        root.end(end_time=self._tick())

    def _tick(self) -> int:
        self.now += S
        return self.now

    def write(self, path: Path) -> str:
        write_otlp_json(self.exporter.get_finished_spans(), str(path), lines=path.suffix == ".jsonl")
        return str(path)


NORMAL = [("search", "a", False), ("read", "b", False), ("edit", "c", False)]
ONE_FAIL = [("search", "a", False), ("read", "b", True), ("edit", "c", False)]
LOOP = [("search", "same", False)] * 4  # stuck and nudged at call 3, stopped at call 4


@pytest.fixture()
def files(tmp_path: Path) -> tuple[str, str, str]:
    """A baseline file (prompt v1), a canary file that loops more (prompt v2, two traces without a prompt) and a config."""
    base = _Writer("1.4.0")
    for calls in [NORMAL] * 6 + [ONE_FAIL] * 2 + [LOOP] * 2:
        base.trace(calls, "v1")
    canary = _Writer("1.5.0-rc1")
    for calls in [NORMAL] * 4 + [ONE_FAIL] + [LOOP] * 5:
        canary.trace(calls, "v2", chats=2)
    canary.trace(NORMAL, None)
    canary.trace(NORMAL, None)
    config = tmp_path / "prices.toml"
    config.write_text(CONFIG)
    data = tmp_path / "traces"
    data.mkdir()
    return base.write(data / "baseline.json"), canary.write(data / "canary.jsonl"), str(config)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["report", *argv, "--json"]) == 0
    return {d["group"]: d for d in map(json.loads, capsys.readouterr().out.splitlines())}


def test_json_numbers_per_prompt_version_are_exact(files: tuple[str, str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Grouped by a span attribute, every count, share, error rate and cost per trace is exact.

    v1: 8 runs succeed (3 calls each), 2 loops are stopped (4 calls), 1 model call each ($0.0012): success 0.8,
    stop 0.2, one loop verdict per looping run (20 per 100), calls median 3 and p90 4 (position 0.9 x 9 = 8.1 of
    3,3,3,3,3,3,3,3,4,4). v2: 5 succeed, 5 stopped, 2 model calls each ($0.0024): calls median 3.5 (between the
    5th and 6th of five 3s and five 4s), p90 4."""
    base, canary, config = files
    groups = _json(capsys, base, canary, "--by", "app.prompt.version", "--config", config)
    assert list(groups) == ["v1", "v2", "(none)"]
    assert groups["v1"] == {
        "attribute": "app.prompt.version", "group": "v1", "traces": 10, "tool_calls": 32,
        "tool_calls_per_trace": 3.2, "stuck": 2, "stuck_share": 0.2, "nudged": 2, "nudged_share": 0.2,
        "stopped": 2, "stopped_share": 0.2, "failed_calls": 2, "error_rate": 0.0625,
        "cost_usd": 0.012, "cost_per_trace_usd": 0.0012, "unpriced_tokens": 0,
        "success_share": 0.8, "error_share": 0.0, "refused_share": 0.0, "loop_verdicts_per_100": 20.0,
        "turns_median": 1.0, "turns_p90": 1.0, "tool_calls_median": 3.0, "tool_calls_p90": 4.0,
        "cost_median_usd": 0.0012, "cost_p90_usd": 0.0012,
    }
    assert groups["v2"] == {
        "attribute": "app.prompt.version", "group": "v2", "traces": 10, "tool_calls": 35,
        "tool_calls_per_trace": 3.5, "stuck": 5, "stuck_share": 0.5, "nudged": 5, "nudged_share": 0.5,
        "stopped": 5, "stopped_share": 0.5, "failed_calls": 1, "error_rate": round(1 / 35, 6),
        "cost_usd": 0.024, "cost_per_trace_usd": 0.0024, "unpriced_tokens": 0,
        "success_share": 0.5, "error_share": 0.0, "refused_share": 0.0, "loop_verdicts_per_100": 50.0,
        "turns_median": 2.0, "turns_p90": 2.0, "tool_calls_median": 3.5, "tool_calls_p90": 4.0,
        "cost_median_usd": 0.0024, "cost_p90_usd": 0.0024,
    }
    assert (groups["(none)"]["traces"], groups["(none)"]["tool_calls"], groups["(none)"]["stuck"]) == (2, 6, 0)


def test_groups_by_resource_attribute_across_files(files: tuple[str, str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Grouped by a resource attribute each file is one group; without prices there are no cost fields."""
    base, canary, _ = files
    groups = _json(capsys, base, canary, "--by", "service.version")
    assert list(groups) == ["1.4.0", "1.5.0-rc1"]
    assert (groups["1.4.0"]["traces"], groups["1.5.0-rc1"]["traces"]) == (10, 12)
    assert groups["1.5.0-rc1"]["tool_calls"] == 41 and groups["1.5.0-rc1"]["stopped"] == 5
    assert "cost_usd" not in groups["1.4.0"]


def test_readable_table_is_aligned(files: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The default output is a table with one aligned row per group and the shares as percentages."""
    base, canary, config = files
    capsys.readouterr()
    assert main(["report", base, canary, "--by", "app.prompt.version", "--config", config]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["app.prompt.version", "tasks", "success", "error", "refused", "stopped", "stuck",
                                "nudged", "tool", "errors", "turns", "p50", "turns", "p90", "calls", "p50", "calls",
                                "p90", "loops/100", "cost", "p50", "cost", "p90"]
    assert lines[1].split() == ["v1", "10", "80.0%", "0.0%", "0.0%", "20.0%", "20.0%", "20.0%", "6.2%", "1.0", "1.0",
                                "3.0", "4.0", "20.0", "$0.0012", "$0.0012"]
    assert lines[2].split() == ["v2", "10", "50.0%", "0.0%", "0.0%", "50.0%", "50.0%", "50.0%", "2.9%", "2.0", "2.0",
                                "3.5", "4.0", "50.0", "$0.0024", "$0.0024"]
    assert lines[3].split()[:2] == ["(none)", "2"]
    assert len({len(line) for line in lines[:4]}) == 1


def test_directory_and_a_missing_file(files: tuple[str, str, str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A directory is read file by file; a missing file is reported on stderr and the exit status is 2."""
    base, _, _ = files
    capsys.readouterr()
    status = main(["report", str(Path(base).parent), str(tmp_path / "missing.json"), "--by", "service.version",
                   "--json"])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.count("otel-loopguard: error:") == 1 and "missing.json" in captured.err
    assert {json.loads(line)["group"] for line in captured.out.splitlines()} == {"1.4.0", "1.5.0-rc1"}


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """``report --help`` explains --by and shows examples."""
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--by ATTRIBUTE" in out and "otel-loopguard report traces.jsonl --by app.prompt.version" in out
