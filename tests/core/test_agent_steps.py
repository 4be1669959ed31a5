"""Hand-offs, sub-agent invocations and model turns judged by the same engine, each kind in its own sequence.

Default configuration unless a test says otherwise: window 10, max_period 3, min_repetitions 3, frequency_limit 3,
stop_after 1, max_nudges 1, output_repeat_limit 10. So a ping-pong A → B, B → A with unchanged evidence is stuck by
frequency at its fifth step (index 4: A → B seen a third time), nudged there, and stopped at index 5 (where the
period-2 suffix holds three cycles); three identical model answers with nothing new are stuck at index 2.
"""

from __future__ import annotations

import pytest

from otel_loopguard.core.agent_steps import OUTPUT_TAIL_BYTES, tail_repetition, text_digest
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import AGENT_ARROW, LoopEngine
from otel_loopguard.core.judge import Step, TraceJudge
from otel_loopguard.core.model import ToolCall

S = 1_000_000_000
T0 = 1_767_225_600 * S


def step(span_id: int, kind: str, tool: str, args: str, result: str | None, chunk: tuple[int, int] | None = None,
         at: int | None = None) -> Step:
    """A step of ``kind`` starting ``at`` seconds after T0 (default: its span id)."""
    at = span_id if at is None else at
    call = ToolCall(tool=tool, arguments=args, result=result, result_captured=result is not None,
                    start=(T0 + at * S) / S, end=(T0 + at * S + S // 2) / S)
    return Step(span_id=span_id, start_ns=T0 + at * S, end_ns=T0 + at * S + S // 2, call=call, kind=kind,
                chunk=chunk)  # type: ignore[arg-type]


def handoff(span_id: int, source: str, target: str, evidence: str | None = "same") -> Step:
    """A hand-off from ``source`` to ``target`` carrying the same input."""
    return step(span_id, "handoff", source + AGENT_ARROW + target, '{"input": "refund"}', evidence)


def ping_pong(n: int = 6) -> list[Step]:
    """triage → billing, billing → triage, ... ``n`` hand-offs."""
    pairs = [("triage", "billing"), ("billing", "triage")]
    return [handoff(i + 1, *pairs[i % 2]) for i in range(n)]


def judged(steps: list[Step], config: LoopGuardConfig | None = None) -> TraceJudge:
    """A whole-trace judge that was given ``steps``."""
    judge = TraceJudge(LoopEngine(config or LoopGuardConfig()))
    for s in steps:
        judge.add(s)
    judge.finish(None)
    return judge


def test_handoff_ping_pong_is_stuck_at_the_fifth_and_stopped_at_the_sixth() -> None:
    """Six hand-offs A → B → A with the same input and evidence: stuck at index 4 (nudge), stop at index 5."""
    judge = judged(ping_pong())
    assert [(t.step, t.previous, t.verdict.kind, t.verdict.rule) for t in judge.transitions] == [
        (4, "working", "stuck", "frequency")]
    assert [(i.step, i.action) for i in judge.interventions] == [(4, "nudge"), (5, "stop")]
    verdict = judge.verdict
    assert (verdict.kind, verdict.rule, verdict.period, verdict.step_kind) == ("stuck", "period", 2, "handoff")
    assert verdict.agents == ("triage", "billing")
    assert judge.steps == 0  # tool calls only: hand-offs are counted in their own sequence


def test_the_stop_is_answered_by_check() -> None:
    """The trace judge's stop and last intervention (what ``check()`` answers) come from the hand-off sequence."""
    judge = judged(ping_pong())
    assert judge.stop is not None and judge.stop.action == "stop" and judge.stop.rule == "period"
    assert "triage, billing" in judge.stop.message
    assert judge.last_intervention is judge.stop


def test_handoffs_whose_output_changes_stay_working() -> None:
    """A ping-pong whose hand-offs carry a new state each time is progress: working, no intervention."""
    pairs = [("triage", "billing"), ("billing", "triage")]
    judge = judged([handoff(i + 1, *pairs[i % 2], evidence=f"state {i}") for i in range(8)])
    assert judge.verdict.kind == "working"
    assert judge.interventions == []


def test_handoffs_do_not_shift_tool_call_indices() -> None:
    """Tool calls interleaved with hand-offs keep the indices and verdicts they have alone (stuck at index 2)."""
    tools = [step(10 + 2 * i, "tool", "search", '{"q": "x"}', "none") for i in range(3)]
    mixed = tools + [handoff(11 + 2 * i, "a", "b", evidence=f"e{i}") for i in range(3)]
    judge = judged(mixed)
    assert [(t.step, t.verdict.kind, t.verdict.step_kind) for t in judge.transitions] == [(2, "stuck", "tool")]
    assert judge.steps == 3


def test_handoff_steps_can_be_switched_off() -> None:
    """With ``handoff_steps=False`` a ping-pong changes nothing."""
    judge = judged(ping_pong(), LoopGuardConfig(handoff_steps=False))
    assert judge.verdict.kind == "working" and judge.transitions == [] and judge.stop is None


def test_sub_agent_invocations_repeating_are_stuck_as_agent_steps() -> None:
    """The same sub-agent task three times with the same output: stuck at index 2, kind agent, period 1."""
    steps = [step(i + 1, "agent", "planner" + AGENT_ARROW + "coder", '{"task": "fix"}', "same") for i in range(3)]
    judge = judged(steps)
    t = judge.transitions
    assert [(x.step, x.verdict.kind, x.verdict.period, x.verdict.step_kind) for x in t] == [(2, "stuck", 1, "agent")]
    assert t[0].verdict.agents == ("planner", "coder")
    assert judged(steps, LoopGuardConfig(agent_steps=False)).transitions == []


def test_model_turns_repeating_with_nothing_new_are_stuck() -> None:
    """Three identical answers with the same (empty) news: stuck at index 2, kind model, the agent named."""
    answer = text_digest("I cannot help with that.")
    steps = [step(i + 1, "model", "assistant", answer, "nothing new") for i in range(3)]
    judge = judged(steps)
    assert [(t.step, t.verdict.kind, t.verdict.step_kind, t.verdict.agents) for t in judge.transitions] == [
        (2, "stuck", "model", ("assistant",))]
    assert judged(steps, LoopGuardConfig(model_steps=False)).transitions == []


def test_model_turns_with_new_messages_stay_working() -> None:
    """The same answer to three different new user messages is progress (the evidence changed)."""
    answer = text_digest("Done.")
    judge = judged([step(i + 1, "model", "assistant", answer, f"news {i}") for i in range(4)])
    assert judge.verdict.kind == "working"


def test_model_turns_without_input_content_are_uncertain() -> None:
    """Identical answers whose input was not recorded: the repetition is evident, the evidence missing."""
    answer = text_digest("Done.")
    judge = judged([step(i + 1, "model", "assistant", answer, None) for i in range(3)])
    assert [(t.step, t.verdict.kind, t.verdict.rule) for t in judge.transitions] == [(2, "uncertain", "evidence")]


def test_degenerate_output_is_stuck_at_once_with_chunk_length_and_count() -> None:
    """One model turn whose tail repeats a 23-character chunk 12 times is stuck at index 0, nudged."""
    judge = judged([step(1, "model", "assistant", "d1", "news", chunk=(23, 12))])
    (t,) = judge.transitions
    v = t.verdict
    assert (t.step, v.kind, v.rule, v.chunk_length, v.repetitions, v.step_kind) == (
        0, "stuck", "output_repetition", 23, 12, "model")
    assert [(i.step, i.action) for i in judge.interventions] == [(0, "nudge")]
    assert "23-character chunk 12 times" in judge.interventions[0].message


def test_degenerate_output_below_the_limit_is_not_judged() -> None:
    """A chunk repeated 9 times (limit 10) is no finding; the limit is configurable."""
    assert judged([step(1, "model", "a", "d", "n", chunk=(5, 9))]).transitions == []
    assert judged([step(1, "model", "a", "d", "n", chunk=(5, 9))],
                  LoopGuardConfig(output_repeat_limit=9)).verdict.rule == "output_repetition"
    assert judged([step(1, "model", "a", "d", "n", chunk=(5, 30))],
                  LoopGuardConfig(output_repetition=False)).transitions == []


def test_audit_json_names_the_step_kind_and_agents() -> None:
    """The report's JSON adds step_kind and agents for a hand-off verdict, and keeps tool-call JSON as it was."""
    out = judged(ping_pong()).report("f", None).as_dict()
    assert (out["verdict"], out["step_kind"], out["agents"], out["period"]) == (
        "stuck", "handoff", ["triage", "billing"], 2)
    assert out["transitions"][0]["step_kind"] == "handoff"
    tool_out = judged([step(i + 1, "tool", "search", "{}", "r") for i in range(3)]).report("f", None).as_dict()
    assert "step_kind" not in tool_out and "step_kind" not in tool_out["transitions"][0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: " + "I will check the file. " * 12, (23, 12)),  # 23 characters, 12 times
        ("abc" * 10, (3, 10)),
        ("x" * 40, (1, 40)),
        ("The answer is 42.", None),
        ("-" * 80, None),  # layout, no letter or digit
        ("\n\n\n\n", None),
        ("", None),
        ("ab" * 3 + "abc", None),  # the end is not a repeat
    ],
)
def test_tail_repetition_golden(text: str, expected: tuple[int, int] | None) -> None:
    """The chunk repeated most at the end of a text, counted by hand."""
    assert tail_repetition(text) == expected


def test_tail_repetition_reads_only_the_last_16_kib() -> None:
    """A 30 000-character run of one word counts only the repeats within the last 16 384 bytes."""
    text = "loop " * 6000
    assert OUTPUT_TAIL_BYTES == 16384
    assert tail_repetition(text) == (5, 16384 // 5)


def test_text_digest_ignores_case_and_spacing() -> None:
    """Answers that differ in case and white space only have one digest; different words differ."""
    assert text_digest("Hello  World\n") == text_digest("hello world")
    assert text_digest("hello world") != text_digest("hello there")


def test_handoffs_without_state_take_what_happened_since_as_evidence() -> None:
    """Hand-offs with no result: stuck when nothing happens between them, working when tool results change."""
    pairs = [("triage", "billing"), ("billing", "triage")]
    idle = judged([handoff(i + 1, *pairs[i % 2], evidence=None) for i in range(6)])
    assert (idle.verdict.kind, idle.verdict.step_kind, idle.transitions[0].step) == ("stuck", "handoff", 4)
    busy: list[Step] = []
    for i in range(6):
        busy.append(handoff(10 * i + 1, *pairs[i % 2], evidence=None))
        busy.append(step(10 * i + 2, "tool", "lookup", '{"id": 1}', f"invoice {i}"))
    judge = judged(busy)
    assert judge.verdict.kind == "working" and judge.stop is None
