"""The verdict event: the one value a judged step becomes, and the one function that makes it.

The processor and ``serve``'s table both turn each :class:`~otel_loopguard.core.judge.Judged` into a
:class:`VerdictEvent` with :func:`verdict_event`. What differs between them is data, an :class:`EventOrigin`: whether
the spans live in another process, and which span a call derived from model spans points at. The emitter
(``sdk/emit.py``) turns the event into its attributes; the fields an event carries are listed here only.
"""

from __future__ import annotations

import msgspec
from opentelemetry.trace import SpanContext, TraceFlags

from ..core.judge import Judged, Step
from ..core.model import Intervention, Transition, Verdict
from .model_calls import ORIGIN_DERIVED

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class VerdictEvent(msgspec.Struct, frozen=True):
    """What listeners receive on every transition or intervention.

    Attributes:
        trace_id: the trace (int).
        span_context: the tool span that caused it (None for budget stops from usage).
        verdict: the verdict after the call.
        transition: the change of verdict kind, if any.
        intervention: the nudge or stop, if any.
        tool: the tool of the call.
        agent: the agent name, when known.
        conversation: the conversation id, when known.
        signature_digest: keyed digest of the call's signature.
        steps: tool calls of the trace so far.
        timestamp_ns: when it happened (the span's end).
        provisional: ``serve`` judged the trace's spans out of start order (a late arrival); the trace is judged
            again, exactly, when it finishes.
        tenant: ``serve`` with tenants: the tenant whose token sent the trace (None without tenants).
        versions: the trace's versions, (name, bounded value) pairs (see conventions/versions.py).
    """

    trace_id: int
    span_context: SpanContext | None
    verdict: Verdict
    transition: Transition | None
    intervention: Intervention | None
    tool: str | None
    agent: str | None
    conversation: str | None
    signature_digest: str | None
    steps: int
    timestamp_ns: int | None
    provisional: bool = False
    tenant: str | None = None
    versions: tuple[tuple[str, str], ...] = ()


class EventOrigin(msgspec.Struct, frozen=True):
    """Where the spans an event points at come from: the only ways the processor's and ``serve``'s events differ.

    Attributes:
        remote: the spans were received from another process (``serve``): the event's span context says so.
        derived_on_ended: a call derived from model spans points at the span whose end judged it (the processor:
            the model span that just ended, none at the trace's end), not at the derived call's own span id.
    """

    remote: bool
    derived_on_ended: bool


#: The processor: spans of this process, judged as each ends.
LIVE = EventOrigin(remote=False, derived_on_ended=True)
#: ``serve``: spans received over OTLP, judged in batches.
RECEIVED = EventOrigin(remote=True, derived_on_ended=False)


def verdict_event(judged: Judged, trace_id: int, origin: EventOrigin, *, ended: SpanContext | None = None,
                  agent: str | None = None, conversation: str | None = None, last: Step | None = None,
                  last_end_ns: int | None = None, tenant: str | None = None,
                  versions: tuple[tuple[str, str], ...] = ()) -> VerdictEvent:
    """The event for one judged step.

    Args:
        judged: what the judge told.
        trace_id: the trace.
        origin: :data:`LIVE` or :data:`RECEIVED`.
        ended: the context of the span whose end judged the step, when there is one (the processor).
        agent: the agent to name, as the adapter attributes it.
        conversation: the conversation id, when known.
        last: the step an event without one (a re-evaluation at the trace's end) points at, if any.
        last_end_ns: the time of such an event when no step is known.
        tenant: the tenant that sent the trace (``serve`` with tenants).
        versions: the trace's versions so far.
    """
    step = judged.step
    place = step if step is not None else last
    call = step.call if step is not None else None
    observation = judged.observation
    return VerdictEvent(
        trace_id=trace_id,
        span_context=_span_context(trace_id, place, origin, ended),
        verdict=observation.verdict,
        transition=observation.transition,
        intervention=observation.intervention,
        tool=call.tool if call is not None else None,
        agent=agent,
        conversation=conversation,
        signature_digest=observation.signature_digest,
        steps=judged.steps,
        timestamp_ns=(place.end_ns or None) if place is not None else last_end_ns,
        provisional=judged.provisional,
        tenant=tenant,
        versions=versions,
    )


def _span_context(trace_id: int, place: Step | None, origin: EventOrigin, ended: SpanContext | None
                  ) -> SpanContext | None:
    """The span an event points at: the span that just ended when it is the step's own (or the step was derived
    from it, or there is no step), else one built from the step's span id."""
    if place is None or (origin.derived_on_ended and place.origin == ORIGIN_DERIVED):
        return ended
    if ended is not None and ended.span_id == place.span_id:
        return ended
    return SpanContext(trace_id, place.span_id, origin.remote, _SAMPLED)
