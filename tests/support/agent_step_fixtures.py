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
  eight tool calls are read under both sources: OpenInference's TOOL spans, Logfire's ``Function: {name}`` spans
  (convention ``logfire_agents``). A trace with a tool span derives no call from its model spans, so the hand-offs'
  ``transfer_to_<agent>`` function calls in the responses are not counted again: eight calls, not sixteen.
* ``chat_repeat``: four model turns with the same answer; the first turn's news is the question, the next three's
  "Please try again.", so turns 1-3 repeat with the same evidence: stuck at index 3, period 1.
* ``supervisor_bouncing`` (LangGraph ``create_supervisor``, OpenInference): eight ``transfer_to_<worker>`` calls
  alternating researcher / writer, each worker answering the same text every time. The transfer tool spans name no
  calling agent, so the hand-offs are ``(unknown agent) → researcher`` and ``→ writer``. Their evidence is what
  happened since the previous transfer: for the first, the supervisor's question; for every later one, the previous
  worker's answer and the supervisor's hand-back message, the same for each direction. So, as for the Agents SDK
  ping-pong, the hand-offs are stuck at index 6 with period 2. The workers' answers are model turns too (the LLM
  spans name no agent: "model"): researcher, writer, researcher ... each with the same news (the transfer's
  tool message). The researcher's answer is at indices 0, 2 and 4, so at 4 it is stuck by frequency, the first
  stuck transition of the trace. The supervisor's closing answer (index 8) is new: the model sequence works again.
  Final: the hand-offs' stuck verdict.
* ``supervisor_healthy``: as many transfers, every worker answer new: working.
* ``group_repeat`` (AutoGen ``RoundRobinGroupChat`` under OpenInference; tests/fixtures/generate/
  autogen_group_chat_runs.py): writer and critic take eight turns, each answering the same text every time. The LLM
  spans name no agent, so the turns are one model sequence W C W C W C W C ("model"). A turn's news is its input
  after its own last answer: for the writer's first turn the task, later the critic's "Please revise the draft."; for
  the critic's first turn the task and the draft, later the draft alone. The period-2 suffixes ending at turns 5
  (0-5) and 6 (1-6) each compare a first turn with a later one (different news): working; the suffix 2-7 repeats its
  answers and news: stuck at turn 7, period 2.
* ``group_healthy``: each answer names how many messages the agent was given, so no answer repeats: working.
* ``transfer_cycle`` (Google ADK, ``adk_multi_agent_runs.py``, OpenInference): eight ``transfer_to_agent`` calls,
  triage → billing → triage ..., nothing done in between and no model span recorded (this ADK and instrumentation
  record none), so every hand-off's evidence is the same empty news; the fresh ``adk-<uuid>`` in each transfer's
  output is never evidence. triage → billing is at 0, 2 and 4: stuck at index 4 by frequency (the period rule needs
  three cycles, six steps), the period rule at 5. Final: stuck, period 2, agents triage_agent, billing_agent.
* ``transfer_healthy``: as many transfers, each agent calling ``lookup_invoice`` for a new invoice first: the
  news between hand-offs differs every time; eight tool calls, all different: working.
* ``loop_repeat``: a ``LoopAgent`` ``review_loop`` runs ``writer_agent`` then ``critic_agent`` four times; their
  agent spans are children of review_loop's, so eight sub-agent steps review_loop → writer, review_loop → critic,
  no input recorded, each output the same text every round: as for the transfer cycle, stuck at index 4 (frequency),
  period 2 at 5, agents review_loop, writer_agent, critic_agent.
* ``loop_healthy``: the same loop, every output new: working.
* ``redelegation_cycle`` (CrewAI hierarchical crew, ``crewai_delegation_runs.py``, OpenInference): the manager
  delegates eight times, alternating Researcher and Writer, with the same task and context; each coworker answers
  the same text every time, and the answer is the delegation's evidence. The ``Delegate work to coworker`` spans
  name no calling agent: ``(unknown agent) → Researcher`` at 0, 2 and 4 with the same evidence: stuck at index 4
  (frequency), period 2 at 5; no tool call.
* ``delegation_healthy``: eight delegations, each for another section (a new task): working.
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
    #: (step, to, step kind) of every transition, in the order the judge told them, when pinned.
    transitions: tuple[tuple[int, str, str], ...] | None = None


EXPECTED = {
    "handoff_ping_pong": Expected("stuck", "period", 2, "handoff", ("triage_agent", "billing_agent"), 6),
    "handoff_healthy": Expected("working", "none", None, None, tool_calls=8),
    "chat_repeat": Expected("stuck", "period", 1, "model", ("model",), 3),
    "degenerate_output": Expected("stuck", "output_repetition", 1, "model", ("model",), 0, (34, 40)),
}


SUPERVISOR = {
    "supervisor_bouncing": Expected(
        "stuck", "period", 2, "handoff", ("(unknown agent)", "researcher", "writer"), 4,
        transitions=((4, "stuck", "model"), (6, "stuck", "handoff"), (8, "working", "model"))),
    "supervisor_healthy": Expected("working", "none", None, None),
}

AUTOGEN = {
    "group_repeat": Expected("stuck", "period", 2, "model", ("model",), 7),
    "group_healthy": Expected("working", "none", None, None),
}


# Under Logfire the ping-pong has no function-tool span ("Function: {name}", read by the logfire_agents convention:
# a hand-off is a "Handoff: A → B" span, never a function span), so the model's function calls are seen only in its
# responses, without content: its 8 hand-offs are 8 such calls, and the hand-offs' own period-2 verdict is unchanged.
# The healthy run's 8 lookup_invoice function spans are read as tool calls (as under OpenInference): derivation from
# the model spans is then off, and it is judged as the OpenInference fixture is (working, 8 calls).
_LOGFIRE_CALLS = {"handoff_ping_pong": 8}


ADK = {
    "transfer_cycle": Expected("stuck", "period", 2, "handoff", ("triage_agent", "billing_agent"), 4,
                               transitions=((4, "stuck", "handoff"),)),
    "transfer_healthy": Expected("working", "none", None, None, tool_calls=8, transitions=()),
    "loop_repeat": Expected("stuck", "period", 2, "agent", ("review_loop", "writer_agent", "critic_agent"), 4,
                            transitions=((4, "stuck", "agent"),)),
    "loop_healthy": Expected("working", "none", None, None, transitions=()),
}


CREWAI = {
    "redelegation_cycle": Expected("stuck", "period", 2, "handoff", ("(unknown agent)", "Researcher", "Writer"), 4,
                                   transitions=((4, "stuck", "handoff"),)),
    "delegation_healthy": Expected("working", "none", None, None, transitions=()),
}


def _under_logfire(scenario: str, want: Expected) -> Expected:
    calls = _LOGFIRE_CALLS.get(scenario)
    if calls is None:
        return want
    return Expected(want.verdict, want.rule, want.period, want.step_kind, want.agents, want.stuck_at, want.chunk,
                    calls)


def cases() -> list[tuple[Path, Expected]]:
    """(fixture path, expectation) for every source and scenario."""
    out = []
    for source in SOURCES:
        for scenario, want in EXPECTED.items():
            if source == "logfire":
                want = _under_logfire(scenario, want)
            out.append((AGENT_FIXTURES / f"openai_agents_{source}__{scenario}.json", want))
    for scenario, want in SUPERVISOR.items():
        out.append((AGENT_FIXTURES / f"langgraph_supervisor_openinference__{scenario}.json", want))
    for scenario, want in AUTOGEN.items():
        out.append((AGENT_FIXTURES / f"autogen_group_openinference__{scenario}.json", want))
    for scenario, want in ADK.items():
        out.append((AGENT_FIXTURES / f"adk_openinference__{scenario}.json", want))
    for scenario, want in CREWAI.items():
        out.append((AGENT_FIXTURES / f"crewai_openinference__{scenario}.json", want))
    return out
