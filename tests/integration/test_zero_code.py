"""Zero-code use: ``opentelemetry-instrument`` with LOOPGUARD_ENABLED=true adds the processor by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.external import require_module


@pytest.fixture(autouse=True)
def _auto_instrumentation() -> None:
    """``opentelemetry-instrument`` needs the auto-instrumentation package (a test dependency: CI must have it)."""
    require_module("opentelemetry.instrumentation.auto_instrumentation", "opentelemetry-instrumentation")


_AGENT = textwrap.dedent(
    """
    import json
    from opentelemetry import trace

    tracer = trace.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for i in range(4):
            with tracer.start_as_current_span("execute_tool search", attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": json.dumps({"q": "x"}),
                "gen_ai.tool.call.result": "same",
            }):
                pass
    """
)


def _run(tmp_path: Path, enabled: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "agent.py"
    script.write_text(_AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    env.update({
        "LOOPGUARD_ENABLED": enabled,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "console",
    })
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    return subprocess.run([str(instrument), sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


def _json_objects(text: str) -> list[dict]:
    """The JSON objects the console exporter printed one after another."""
    decoder, objects, pos = json.JSONDecoder(), [], 0
    while (start := text.find("{", pos)) != -1:
        obj, pos = decoder.raw_decode(text, start)
        objects.append(obj)
    return objects


def test_enabled_processor_emits_verdict_events(tmp_path: Path) -> None:
    """With LOOPGUARD_ENABLED=true the loop is detected and the events reach the configured logs exporter."""
    out = _run(tmp_path, "true").stdout
    events = [e for e in _json_objects(out) if e.get("event_name")]
    names = [e.get("event_name") for e in events]
    assert names == ["loopguard.verdict", "loopguard.verdict"], out
    assert [e["attributes"]["loopguard.intervention"] for e in events] == ["nudge", "stop"]


def test_disabled_by_default(tmp_path: Path) -> None:
    """Without LOOPGUARD_ENABLED nothing is added and nothing is emitted."""
    assert "loopguard" not in _run(tmp_path, "false").stdout
