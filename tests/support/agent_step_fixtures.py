"""The multi-agent and model-turn fixtures (``tests/fixtures/otlp/agents``) and what each must be judged, by hand.

Derived from the scripts in ``tests/fixtures/generate/agent_handoff_runs.py`` and the default configuration
(window 10, max_period 3, min_repetitions 3, frequency_limit 3, output_repeat_limit 10), never from the product:

* ``handoff_ping_pong``: eight hand-offs triage → billing → triage ... with nothing done in between. A hand-off
  carries no state, so its evidence is what the agents were given since the previous one: for the first, the
  user's question; for every later one, the previous hand-off's result ("{assistant: <agent>}"), the same for the
  same direction. At index 5 the period-2 suffix (0-5) holds three cycles but the first hand-off's evidence differs
  (progress, working); at index 6 the suffix 1-6 holds three cycles with the same evidence: stuck (period 2, the
  period rule comes before the frequency rule), nudged; index 7 stays stuck and is stopped. Final: stuck, period 2.
* ``handoff_healthy``: eight hand-offs (as many as the ping-pong), each after a ``lookup_invoice`` call for a new
  invoice: what the agents did and were given between hand-offs differs every time, so it stays working. Its
  eight tool calls are read under OpenInference; Logfire's function spans are not tool spans to this reader (the
  hand-offs' evidence then comes from the model calls' new input alone, which holds the new invoice too).
* ``chat_repeat``: four model turns with the same answer; the first turn's news is the question, the next three's
  "Please try again.", so turns 1-3 repeat with the same evidence: stuck at index 3, period 1.
* ``degenerate_output``: one streamed answer "Let me check the invoice. " + 40 x "I will look up the invoice
  again. " (34 characters): stuck at index 0, rule output_repetition, chunk 34 characters, count 40.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

AGENT_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "agents"
SOURCES = ("openinference", "logfire")


@dataclass(frozen=True)
class Expected:
    """What one fixture must be judged: final verdict, rule, period, step kind, agents, first stuck index, repeated
    chunk, tool calls."""

    verdict: str
    rule: str
    period: int | None
    step_kind: str | None
    agents: tuple[str, ...] = ()
    stuck_at: int | None = None
    chunk: tuple[int, int] | None = None
    tool_calls: int = 0


EXPECTED = {
    "handoff_ping_pong": Expected("stuck", "period", 2, "handoff", ("triage_agent", "billing_agent"), 6),
    "handoff_healthy": Expected("working", "none", None, None, tool_calls=8),
    "chat_repeat": Expected("stuck", "period", 1, "model", ("model",), 3),
    "degenerate_output": Expected("stuck", "output_repetition", 1, "model", ("model",), 0, (34, 40)),
}


def cases() -> list[tuple[Path, Expected]]:
    """(fixture path, expectation) for every source and scenario."""
    out = []
    for source in SOURCES:
        for scenario, want in EXPECTED.items():
            if source == "logfire" and want.tool_calls:
                want = Expected(want.verdict, want.rule, want.period, want.step_kind, want.agents, want.stuck_at,
                                want.chunk, 0)
            out.append((AGENT_FIXTURES / f"openai_agents_{source}__{scenario}.json", want))
    return out
