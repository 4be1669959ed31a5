"""The one verdict-event builder: what the processor's and serve's events carry, from hand-made judged steps."""

from __future__ import annotations

import msgspec
import pytest
from opentelemetry.trace import SpanContext, TraceFlags

from otel_loopguard.conventions.model_calls import ORIGIN_DERIVED
from otel_loopguard.conventions.verdicts import LIVE, RECEIVED, VerdictEvent, verdict_event
from otel_loopguard.core.judge import Judged, Step
from otel_loopguard.core.model import Intervention, Observation, ToolCall, Transition, Verdict
from otel_loopguard.sdk.emit import event_attributes

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
TOOL_SPAN = 0x00F067AA0BA902B7
MODEL_SPAN = 0x00F067AA0BA902B8
STUCK = Verdict(kind="stuck", rule="period", step=5, period=2, repetitions=3, cycle_start=0, tool="search",
                signature_digest="d1g35t")
NUDGE = Intervention(action="nudge", message="You called search with the same arguments 3 times.", rule="period",
                     step=5, verdict=STUCK)


def _judged(origin: str = "", step: bool = True, provisional: bool = False) -> Judged:
    call = ToolCall(tool="search", arguments='{"q": "x"}')
    at = Step(span_id=TOOL_SPAN, start_ns=4_000, end_ns=5_000, call=call, origin=origin) if step else None
    observation = Observation(index=5, verdict=STUCK, transition=Transition(step=5, previous="working", verdict=STUCK),
                              intervention=NUDGE, signature_digest="s1g")
    return Judged(observation, at, 6, provisional)


def _context(span_id: int) -> SpanContext:
    return SpanContext(TRACE, span_id, False, TraceFlags(TraceFlags.SAMPLED))


def test_a_live_event_has_the_attributes_worked_out_by_hand() -> None:
    """A stuck transition with a nudge, judged as its tool span ended, gives exactly these event attributes."""
    ended = _context(TOOL_SPAN)
    event = verdict_event(_judged(), TRACE, LIVE, ended=ended, agent="planner", conversation="conv-7")
    assert event.span_context is ended
    assert (event.tool, event.steps, event.timestamp_ns, event.provisional, event.tenant) == ("search", 6, 5_000,
                                                                                            False, None)
    assert event_attributes(event, "n1") == {
        "loopguard.verdict": "stuck",
        "loopguard.verdict.previous": "working",
        "loopguard.rule": "period",
        "loopguard.steps": 6,
        "loopguard.intervention": "nudge",
        "loopguard.normalizer.version": "n1",
        "loopguard.period": 2,
        "loopguard.repetitions": 3,
        "loopguard.cycle.start": 0,
        "loopguard.signature": "d1g35t",
        "loopguard.message": "You called search with the same arguments 3 times.",
        "gen_ai.tool.name": "search",
        "gen_ai.agent.name": "planner",
        "gen_ai.conversation.id": "conv-7",
    }


def test_a_received_event_points_at_its_step_as_a_remote_span() -> None:
    """serve's event names the step's span as remote, and carries its tenant and provisional mark."""
    event = verdict_event(_judged(provisional=True), TRACE, RECEIVED, tenant="acme")
    assert event.span_context == SpanContext(TRACE, TOOL_SPAN, True, TraceFlags(TraceFlags.SAMPLED))
    assert event.span_context is not None and event.span_context.is_remote
    attrs = event_attributes(event, "n1")
    assert (attrs["loopguard.provisional"], attrs["loopguard.tenant"]) == (True, "acme")


def test_a_live_event_decided_by_a_joined_inner_span_points_at_the_outer_one() -> None:
    """When the span that ended is not the step's (an inner span joined into it), the event names the step's span."""
    event = verdict_event(_judged(), TRACE, LIVE, ended=_context(0x1234))
    assert event.span_context == _context(TOOL_SPAN)
    assert event.span_context is not None and not event.span_context.is_remote


@pytest.mark.parametrize(("origin", "ended", "expected"), [
    (LIVE, _context(MODEL_SPAN), _context(MODEL_SPAN)),
    (LIVE, None, None),
    (RECEIVED, None, SpanContext(TRACE, TOOL_SPAN, True, TraceFlags(TraceFlags.SAMPLED))),
])
def test_a_derived_call_points_where_its_origin_says(origin, ended, expected) -> None:
    """A call derived from model spans names the model span that ended (processor) or its own step (serve)."""
    event = verdict_event(_judged(origin=ORIGIN_DERIVED), TRACE, origin, ended=ended)
    assert event.span_context == expected


def test_an_event_without_a_step_points_at_the_last_call_without_naming_a_tool() -> None:
    """A re-evaluation at the finish names the last call's span and time but no tool; without one, no span."""
    last = Step(span_id=MODEL_SPAN, end_ns=9_000, call=ToolCall(tool="read"))
    event = verdict_event(_judged(step=False), TRACE, RECEIVED, last=last, last_end_ns=12_000)
    assert (event.tool, event.timestamp_ns) == (None, 9_000)
    assert event.span_context == SpanContext(TRACE, MODEL_SPAN, True, TraceFlags(TraceFlags.SAMPLED))
    bare = verdict_event(_judged(step=False), TRACE, RECEIVED, last_end_ns=12_000)
    assert (bare.span_context, bare.timestamp_ns) == (None, 12_000)
    assert "gen_ai.tool.name" not in event_attributes(bare, "n1")


def test_the_event_is_a_frozen_value() -> None:
    """Listeners on other threads get a value that cannot change under them."""
    event = verdict_event(_judged(), TRACE, RECEIVED)
    assert isinstance(event, VerdictEvent)
    with pytest.raises(AttributeError):
        event.agent = "other"  # type: ignore[misc]
    assert msgspec.structs.replace(event, agent="other").agent == "other"
