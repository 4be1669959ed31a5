"""The ``agent_turns_without_content`` cause: only agent turns without message text, nothing else GenAI."""

from __future__ import annotations

from otel_loopguard.conventions.unread import AGENT_TURNS_WITHOUT_CONTENT, NO_TOOL_CALLS, UnreadTrace

_TURN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer", "gen_ai.system": "autogen"}


def _reasons(*spans: dict[str, object]) -> list[tuple[str, int]]:
    trace = UnreadTrace()
    for attrs in spans:
        trace.model(attrs)
    return [(c.reason, c.spans) for c in trace.causes()]


def test_bare_agent_turns_get_their_own_cause() -> None:
    """Two invoke_agent spans with names only: the new cause, for two spans."""
    assert _reasons(_TURN, _TURN) == [(AGENT_TURNS_WITHOUT_CONTENT, 2)]


def test_a_turn_with_messages_or_a_model_span_keeps_the_general_cause() -> None:
    """An agent span recording its output messages, or a model span beside a bare turn, is no bare-turn trace:
    the general no_tool_calls cause, for every GenAI span."""
    assert _reasons({**_TURN, "gen_ai.output.messages": "[]"}) == [(NO_TOOL_CALLS, 1)]
    assert _reasons(_TURN, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) == [(NO_TOOL_CALLS, 2)]


def test_merged_batches_count_bare_turns_too() -> None:
    """A trace read in two batches (serve) keeps the cause: the bare turns are merged with the spans."""
    first, second = UnreadTrace(), UnreadTrace()
    first.model(_TURN)
    second.model(_TURN)
    first.merge(second)
    assert [(c.reason, c.spans) for c in first.causes()] == [(AGENT_TURNS_WITHOUT_CONTENT, 2)]
