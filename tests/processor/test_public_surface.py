"""``LoopGuardSpanProcessor`` keeps its public surface while its parts live in sdk/harness_api.py and sdk/host.py.

The expected members and signatures are the processor's as released before the split (written out by hand from
it), plus ``agent_of``, the one question the live assembler now asks its host instead of reading SDK spans itself.
"""

from __future__ import annotations

import inspect
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor
from otel_loopguard.conventions.live import Host, LiveTrace
from tests.processor.conftest import Harness, HarnessFactory

# name -> (how the class holds it, its parameters after ``self``)
_EXPECTED: dict[str, tuple[str, str]] = {
    "add_listener": ("function", "(listener)"),
    "bare_agent": ("function", "(trace_id, span_id)"),
    "agent_of": ("function", "(span)"),
    "check": ("function", "(trace_id=None)"),
    "errors": ("property", ""),
    "events": ("staticmethod", "(span)"),
    "force_flush": ("function", "(timeout_millis=30000)"),
    "learn": ("function", "(trace_id, record)"),
    "on_end": ("function", "(span)"),
    "on_start": ("function", "(span, parent_context=None)"),
    "publish": ("function", "(event, target)"),
    "resolve": ("function", "(trace_id, approved)"),
    "shutdown": ("function", "()"),
    "target": ("function", "(trace_id, record)"),
    "tracked_traces": ("property", ""),
    "verdict": ("function", "(trace_id)"),
}
_CONSTRUCTOR = ("(config=None, *, logger_provider=None, meter_provider=None, deferred=True, max_queue=100000, "
                "review_handler=None)")


def _parameters(function: Any) -> str:
    """A signature without annotations and without ``self``, e.g. ``(trace_id=None)``."""
    parameters = [p.replace(annotation=inspect.Parameter.empty)
                  for p in inspect.signature(function).parameters.values() if p.name != "self"]
    return str(inspect.Signature(parameters))


def test_public_members_and_signatures_are_unchanged() -> None:
    """Every public member is there, held the same way (function, property, staticmethod), with the same parameters."""
    public = {name for name in dir(LoopGuardSpanProcessor) if not name.startswith("_")}
    assert public == set(_EXPECTED)
    for name, (kind, parameters) in _EXPECTED.items():
        held = inspect.getattr_static(LoopGuardSpanProcessor, name)
        assert type(held).__name__ == kind, name
        if kind != "property":
            assert _parameters(getattr(LoopGuardSpanProcessor, name)) == parameters, name
    assert _parameters(LoopGuardSpanProcessor.__init__) == _CONSTRUCTOR


def test_public_members_have_docstrings() -> None:
    """Each public member, wherever it is defined now, still has its docstring (``help()`` and the docs show it)."""
    for name in _EXPECTED:
        doc = inspect.getdoc(getattr(LoopGuardSpanProcessor, name))
        assert doc and len(doc.split()) >= 4, name


def test_the_processor_answers_every_question_of_the_host_protocol() -> None:
    """The assembler's ``Host`` protocol is met by the processor: each of its members is a member here."""
    asked = {name for name in vars(Host) if not name.startswith("_")}
    assert asked == {"late", "events", "learn", "target", "agent_of", "bare_agent", "publish"}
    processor = LoopGuardSpanProcessor(deferred=False)
    try:
        assert all(hasattr(processor, name) for name in asked)
        assert processor.late == {}
    finally:
        processor.shutdown()


def test_agent_of_reads_the_agent_an_open_span_carries_now(make_harness: HarnessFactory) -> None:
    """An open span named like an agent span gets its attributes after start: ``agent_of`` names it from then on."""
    harness: Harness = make_harness(deferred=False)
    processor = harness.processor
    span = harness.start("invoke_agent planner", None)
    assert processor.agent_of(span) is None  # no attributes yet
    span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})
    assert processor.agent_of(span) == "planner"
    assert processor.agent_of(None) is None
    harness.end(span)


def test_agent_of_a_span_that_is_no_agent_span_is_none() -> None:
    """A tool span, and an object that is no SDK span at all, carry no agent name."""
    processor = LoopGuardSpanProcessor(deferred=False)
    provider = TracerProvider()
    try:
        tool = provider.get_tracer("t").start_span("execute_tool search", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})
        assert processor.agent_of(tool) is None
        assert processor.agent_of(object()) is None
        tool.end()
    finally:
        processor.shutdown()
        provider.shutdown()


def test_an_agent_span_opened_on_a_record_holds_later_times() -> None:
    """``LiveTrace.agent_opened``: an open agent span from its start holds every later time, none before it."""
    record = LiveTrace()
    record.agent_opened(7, "planner", 100, None)
    [agent] = record.agents
    assert (agent.span_id, agent.name, agent.start_ns) == (7, "planner", 100)
    assert record.agent_at(10**18) == "planner"
    assert record.agent_at(50) is None
