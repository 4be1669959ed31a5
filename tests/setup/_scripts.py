"""Scripts run in a child process with a clean environment: global providers can be set once per process only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Six identical calls of one tool with one result, inside an agent span: stuck at the third call (period 1).
LOOP = '''
from opentelemetry import trace
tracer = trace.get_tracer("demo")
agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"}
call = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": "weather"}', "gen_ai.tool.call.result": "no results"}
with tracer.start_as_current_span("invoke_agent weather_agent", attributes=agent):
    for _ in range(6):
        with tracer.start_as_current_span("execute_tool search", attributes=call):
            pass
'''

#: The line of the stuck transition, trace id aside (8 hex digits then an ellipsis).
STUCK_LINE = r"loopguard: trace [0-9a-f]{8}\u2026 agent weather_agent: working -> stuck \(period 1, search x3\) nudge"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: PATH, HOME, and ``extra``; no OTEL_*, LOOPGUARD_* or PYTHON* variables."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra or {})
    return env


def run_script(code: str, env: Mapping[str, str] | None = None, python: str | None = None,
               args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``python`` (this interpreter) from the repository in :func:`clean_env` plus ``env``."""
    command = [python or sys.executable, *args, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, env=clean_env(env))
