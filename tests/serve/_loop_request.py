"""A small OTLP/JSON request by hand: an agent span and N identical tool calls of one trace (stuck at the third)."""

from __future__ import annotations

import json
from typing import Any


def _attrs(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]


def loop_request(trace_id: str, *, calls: int = 6, service: str = "weather-svc", agent: str = "weather_agent",
                 tool: str = "search") -> bytes:
    """OTLP/JSON bytes: ``calls`` identical calls of ``tool`` (same arguments, same result) inside ``agent``."""
    start = 1_700_000_000_000_000_000
    spans = [{
        "traceId": trace_id, "spanId": "a" * 16, "name": f"invoke_agent {agent}", "kind": 1,
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + (calls + 1) * 1_000_000),
        "attributes": _attrs({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}),
    }]
    for i in range(calls):
        spans.append({
            "traceId": trace_id, "spanId": f"{i + 1:016x}", "parentSpanId": "a" * 16, "name": f"execute_tool {tool}",
            "kind": 1, "startTimeUnixNano": str(start + (i + 1) * 1_000_000),
            "endTimeUnixNano": str(start + (i + 1) * 1_000_000 + 500_000),
            "attributes": _attrs({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                  "gen_ai.agent.name": agent, "gen_ai.tool.call.arguments": '{"q": "weather"}',
                                  "gen_ai.tool.call.result": "no results"}),
        })
    doc = {"resourceSpans": [{"resource": {"attributes": _attrs({"service.name": service})},
                              "scopeSpans": [{"scope": {"name": "hand"}, "spans": spans}]}]}
    return json.dumps(doc).encode()
