"""Human review through the processor: the handler gets one machine-readable request, ``check()`` answers review
until ``resolve()``, a decline stops the run with an event, an approval lets it go on."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from otel_loopguard import LoopGuardConfig
from otel_loopguard.core.model import ReviewRequest
from tests.processor.conftest import HarnessFactory

RESULT = "no hits"


def _loop(make_harness: HarnessFactory, calls: int, **options: Any) -> tuple[Any, Any, list[ReviewRequest]]:
    requests: list[ReviewRequest] = []
    h = make_harness(review_handler=requests.append, **options)
    agent = h.agent()
    with trace.use_span(agent, end_on_exit=False):
        for _ in range(calls):
            h.tool(agent, result=RESULT)
    return h, agent, requests


def test_the_handler_gets_one_request_and_check_keeps_answering_review(make_harness: HarnessFactory) -> None:
    """Six identical searches: nudge at call 2, review at call 3, and calls 4-5 change nothing while it is pending."""
    h, agent, requests = _loop(make_harness, 6)
    trace_id = agent.get_span_context().trace_id
    review = h.processor.check(trace_id)
    assert (review.action, review.step, review.rule) == ("review", 3, "period")
    assert len(requests) == 1
    [request] = requests
    assert request.trace_id == f"{trace_id:032x}" and len(request.trace_id) == 32
    assert (request.rule, request.period, request.tool, request.calls) == ("period", 1, "search", 4)
    assert request.signature_digest and len(request.signature_digest) == 32
    assert request.cost_usd == 0.0  # no model call: nothing unpriced
    assert request.message.startswith("loopguard asks for a review: the agent made the same search call 4 times")
    assert [e.intervention.action for e in h.events if e.intervention] == ["nudge", "review"]
    h.end(agent)


def test_a_declined_review_stops_the_run_and_emits_the_stop(make_harness: HarnessFactory) -> None:
    """resolve(approved=False) returns the stop, check() answers it from then on, and listeners get its event."""
    h, agent, _ = _loop(make_harness, 4)
    trace_id = agent.get_span_context().trace_id
    stop = h.processor.resolve(trace_id, approved=False)
    assert stop.action == "stop" and stop.rule == "period"
    assert h.processor.check(trace_id) == stop
    assert [e.intervention.action for e in h.events if e.intervention] == ["nudge", "review", "stop"]
    records = h.verdict_records()
    assert [r.attributes["loopguard.intervention"] for r in records][-2:] == ["review", "stop"]
    h.end(agent)


def test_an_approved_review_goes_on_until_the_loop_continues(make_harness: HarnessFactory) -> None:
    """Approved after the review at call 3: check() answers none; the next identical call stops the run."""
    h, agent, _ = _loop(make_harness, 4)
    trace_id = agent.get_span_context().trace_id
    assert h.processor.resolve(trace_id, approved=True).action == "none"
    assert h.processor.check(trace_id).action == "none"
    with trace.use_span(agent, end_on_exit=False):
        h.tool(agent, result=RESULT)
    stop = h.processor.check(trace_id)
    assert (stop.action, stop.step) == ("stop", 4)
    assert stop.message.endswith("and it went on after a review")
    h.end(agent)


def test_without_a_handler_there_is_no_review(make_harness: HarnessFactory) -> None:
    """No review handler and no configured rungs: nudge then stop, as before; resolve() has nothing to answer."""
    h = make_harness()
    agent = h.agent()
    with trace.use_span(agent, end_on_exit=False):
        for _ in range(4):
            h.tool(agent, result=RESULT)
    trace_id = agent.get_span_context().trace_id
    assert h.processor.check(trace_id).action == "stop"
    assert h.processor.resolve(trace_id, approved=True).action == "none"
    assert h.processor.resolve(trace_id + 1, approved=False).action == "none"
    h.end(agent)


def test_configured_rungs_win_over_the_handler_default(make_harness: HarnessFactory) -> None:
    """interventions = nudge, stop with a handler registered: no review is asked."""
    h, agent, requests = _loop(make_harness, 4, config=LoopGuardConfig(interventions=("nudge", "stop")))
    assert h.processor.check(agent.get_span_context().trace_id).action == "stop" and requests == []
    h.end(agent)


def test_a_guarded_tool_pauses_on_review_and_runs_after_approval(make_harness: HarnessFactory) -> None:
    """guard_tool raises ReviewPending while the review is unanswered, and runs the tool again once approved."""
    import pytest

    from otel_loopguard import ReviewPending
    from otel_loopguard.harness import guard_tool

    h, agent, _ = _loop(make_harness, 4)
    ran: list[int] = []

    @guard_tool(h.processor)
    def lookup(n: int) -> str:
        ran.append(n)
        return "ok"

    with trace.use_span(agent, end_on_exit=False):
        with pytest.raises(ReviewPending) as raised:
            lookup(1)
        assert raised.value.intervention.action == "review" and ran == []
        h.processor.resolve(agent.get_span_context().trace_id, approved=True)
        assert lookup(2) == "ok" and ran == [2]
    h.end(agent)
