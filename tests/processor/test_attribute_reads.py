"""How the hooks read span attributes: an SDK span's own dict, any other span through the public mapping.

The hooks run for every span of the application, so they read an SDK span's attributes without the public
``span.attributes`` (a Python property, ``__len__`` and ``MappingProxyType`` per call); a span without the SDK's
private fields is read through the public mapping. Both paths must give the same verdicts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, VerdictEvent
from tests.processor.conftest import Harness

ARGS = json.dumps({"query": "weather in Paris"})


def _interventions(events: list[VerdictEvent]) -> list[tuple[str, str]]:
    return [(e.verdict.kind, e.intervention.action if e.intervention else "none") for e in events]


def test_sdk_spans_are_read_without_the_public_mapping(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``ReadableSpan.attributes`` (and so ``Span.attributes``) raising, a loop of four identical calls is still
    judged without a single hook failure: the hooks and the worker never used the public mapping for SDK spans. If a
    future SDK drops the private fields, the hooks fall back to the mapping, this test fails and says so."""

    def refuse(self: ReadableSpan) -> Any:
        raise RuntimeError("public attributes mapping read")

    h = harness
    agent = h.agent()
    monkeypatch.setattr(ReadableSpan, "attributes", property(refuse))
    for _ in range(4):
        h.tool(agent, args=ARGS)
    h.processor.force_flush()
    monkeypatch.undo()
    h.end(agent)
    # Four identical calls with one result: stuck at the third with a nudge, stopped at the fourth (the ladder's
    # defaults: stop_after=1 further stuck call).
    assert _interventions(h.events) == [("stuck", "nudge"), ("stuck", "stop")]
    assert h.processor.errors == 0


def _span(name: str, trace_id: int, span_id: int, parent_id: int, attributes: dict[str, Any], start: int,
          end: int | None) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED)),
        parent=SpanContext(trace_id, parent_id, False, TraceFlags(TraceFlags.SAMPLED)),
        attributes=attributes,  # a plain dict: no SDK BoundedAttributes inside
        start_time=start,
        end_time=end,
    )


@pytest.mark.parametrize("deferred", [True, False])
def test_spans_without_the_sdk_fields_are_read_through_the_public_mapping(deferred: bool) -> None:
    """ReadableSpans built by hand (plain dict attributes, as another pipeline might hand over) go through both hooks
    directly: the same four identical calls give the same nudge and stop, and no hook failure."""
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), deferred=deferred)
    told: list[VerdictEvent] = []
    processor.add_listener(told.append)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
             "gen_ai.tool.call.arguments": ARGS, "gen_ai.tool.call.result": "sunny, 21C"}
    t0 = 1_767_225_600 * 10**9
    for i in range(4):
        start = t0 + 2 * i * 10**9
        processor.on_start(_span("execute_tool search", 7, 100 + i, 1, attrs, start, None))
        processor.on_end(_span("execute_tool search", 7, 100 + i, 1, attrs, start, start + 10**9))
    processor.force_flush()
    assert _interventions(told) == [("stuck", "nudge"), ("stuck", "stop")]
    assert processor.errors == 0
    processor.shutdown()


#: SDK releases whose ``Span._attributes._dict`` the hooks were checked against (the lowest the package accepts,
#: pyproject.toml's ``opentelemetry-sdk>=1.45``, to the one this suite was last run with).
CHECKED_SDK = ((1, 45), (1, 45))


def test_the_private_attribute_read_is_pinned_to_checked_sdk_versions() -> None:
    """The installed SDK is a release the private read was checked with, and its ended span still has a plain dict
    at ``_attributes._dict`` holding exactly the public attributes."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.version import __version__

    release = tuple(int(part) for part in __version__.split(".")[:2])
    assert CHECKED_SDK[0] <= release <= CHECKED_SDK[1], f"check the private read with SDK {__version__}, then pin it"
    span = TracerProvider().get_tracer("pin").start_span("execute_tool search", attributes={"gen_ai.tool.name": "s"})
    span.end()
    private = span._attributes._dict  # type: ignore[attr-defined]
    assert type(private) is dict
    assert private == {"gen_ai.tool.name": "s"} == dict(span.attributes or {})
