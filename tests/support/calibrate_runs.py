"""Agent runs with exact times, written as OTLP/JSON through a real SDK ``TracerProvider`` (the calibrate tests).

Each tool call ``k`` of a run (0-based) is a ``chat`` span from ``t + 10k s`` to ``t + 10k + 1 s`` (1 000 input
and 100 output tokens of ``model-a``) followed by an ``execute_tool`` span from ``t + 10k + 2 s`` to
``t + 10k + 5 s``; the ``invoke_agent`` root ends 1 s after the last tool span. So call ``k`` ends at
``t + 10k + 5 s``, and with :data:`PRICES` every chat costs ``1000 * 1.0 / 1e6 + 100 * 2.0 / 1e6 = $0.0012``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from otel_loopguard.sdk.otlp_write import write_otlp_json

T0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
S = 10**9
#: USD per million tokens of the model the runs use.
PRICES = '[prices."model-a"]\ninput = 1.0\noutput = 2.0\n'
CHAT_USD = 0.0012

#: A call: (tool, arguments, result); a result of None is a failed call (error.type ToolError).
Call = tuple[str, dict[str, Any], "str | None"]


def same(tool: str, args: dict[str, Any], result: str, times: int) -> list[Call]:
    """``times`` identical calls with the same result."""
    return [(tool, args, result)] * times


def distinct(count: int, prefix: str = "c") -> list[Call]:
    """``count`` calls that all differ (tools, arguments and results)."""
    return [(f"tool_{i % 3}", {"q": f"{prefix}{i}"}, f"result {prefix}{i}") for i in range(count)]


class RunWriter:
    """Builds runs with explicit times; one file per :meth:`write`.

    Args:
        resource: resource attributes of every span of this writer.
    """

    def __init__(self, resource: dict[str, Any] | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "agent", **(resource or {})}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("calibrate-test")
        self.runs = 0
        self.trace_ids: list[str] = []

    def run(self, calls: Sequence[Call], *, root_attributes: dict[str, Any] | None = None) -> str:
        """One agent run; returns its trace id (32 hex digits)."""
        t = T0 + self.runs * 3600 * S
        self.runs += 1
        root = self.tracer.start_span("invoke_agent bot", start_time=t, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot", **(root_attributes or {})})
        ctx = set_span_in_context(root)
        for k, (tool, args, result) in enumerate(calls):
            base = t + 10 * k * S
            chat = self.tracer.start_span("chat model-a", context=ctx, start_time=base, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "model-a",
                "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100})
            chat.end(end_time=base + 1 * S)
            attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                     "gen_ai.tool.call.arguments": json.dumps(args)}
            if result is None:
                attrs["error.type"] = "ToolError"
            else:
                attrs["gen_ai.tool.call.result"] = result
            span = self.tracer.start_span(f"execute_tool {tool}", context=ctx, start_time=base + 2 * S,
                                          attributes=attrs)
            if result is None:
                span.set_status(Status(StatusCode.ERROR, "ToolError"))
            span.end(end_time=base + 5 * S)
        root.end(end_time=t + 10 * (len(calls) - 1) * S + 6 * S)
        trace_id = f"{root.get_span_context().trace_id:032x}"
        self.trace_ids.append(trace_id)
        return trace_id

    def write(self, path: Path) -> str:
        """Write every run so far to ``path`` (JSON Lines when it ends in .jsonl) and start afresh."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_otlp_json(self.exporter.get_finished_spans(), str(path), lines=path.suffix == ".jsonl")
        self.exporter.clear()
        return str(path)
