"""Hostile span attributes through a real TracerProvider: the processor never raises, never loses a span for the
exporter after it, counts what it could not handle, and never parses an argument larger than ``max_argument_bytes``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator

import otel_loopguard.conventions.extract as extract_module
import otel_loopguard.core.jsontext as jsontext_module
import otel_loopguard.core.signature as signature_module
from otel_loopguard import LoopGuardConfig
from tests.reliability.conftest import KEY, SECOND, T0, TOOL, Pipeline, build_pipeline, settle

MAX_BYTES = 65_536

# Precomputed once: hypothesis picks among them, so examples stay fast while every shape is exercised.
HUGE_VALUES = [
    "x" * 1_000_001,
    "{" * 200_000,
    "[" * 30_000 + "]" * 30_000,  # valid JSON, far deeper than any parser allows, and over max_argument_bytes
    "[" * 3_000 + "]" * 3_000,  # valid, deep, under the limit: the parser's recursion guard is what saves us
    json.dumps({f"key{i}": i for i in range(4_000)}),  # thousands of keys, under the limit: parsed
    json.dumps({f"key{i}": i for i in range(20_000)}),  # thousands of keys, over the limit: digested
    '{"a": ' + "1," * 10_000,  # invalid JSON
    '{"inputs": {"q": "' + "y" * 100_000 + '"}, "tags": []}',  # framework envelope key, over the limit
    '{"kwargs": {"content": "' + "z" * 100_000 + '", "tool_call_id": "c1"}}',
    "\ud800" * 1_000 + "{",  # lone surrogates (not encodable as UTF-8)
    '{"k": "\ud83d", "NaN": NaN, "inf": Infinity}',  # lone surrogate inside JSON, JSON's non-standard constants
    b"\xff\xfe" * 50_000,
]

surrogates = st.lists(st.integers(0xD800, 0xDFFF).map(chr), min_size=1, max_size=4).map("".join)
scalars = st.one_of(
    st.text(max_size=40),
    st.tuples(st.text(max_size=10), surrogates, st.text(max_size=10)).map("".join),
    st.binary(max_size=40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.booleans(),
    st.none(),
)
json_text = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
).map(json.dumps)
values = st.one_of(
    scalars,
    json_text,
    st.lists(scalars, max_size=6),  # sequences of mixed types (the SDK keeps them as tuples)
    st.lists(st.lists(scalars, max_size=3), max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=4),  # mappings are AnyValue too
    st.sampled_from(HUGE_VALUES),
)
tool_names = st.one_of(
    st.text(max_size=20), surrogates, st.integers(), st.lists(scalars, max_size=3), st.none(), st.binary(max_size=5)
)


@dataclass(frozen=True)
class SpanSpec:
    """One span to create: tool attributes, which earlier span is its parent, and its (possibly skewed) times."""

    attributes: dict[str, Any]
    parent: int | None
    start: int
    end: int


@st.composite
def span_specs(draw: st.DrawFn) -> list[SpanSpec]:
    """A few spans, each a tool span (any convention) or a plain one, with hostile attributes and clock skew."""
    out: list[SpanSpec] = []
    for i in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["genai", "openinference", "traceloop", "plain", "agent", "llm"]))
        attrs: dict[str, Any]
        if kind == "genai":
            attrs = {**TOOL, "gen_ai.tool.name": draw(tool_names),
                     "gen_ai.tool.call.arguments": draw(values), "gen_ai.tool.call.result": draw(values)}
        elif kind == "openinference":
            attrs = {"openinference.span.kind": "TOOL", "tool.name": draw(tool_names),
                     "input.value": draw(values), "output.value": draw(values)}
        elif kind == "traceloop":
            attrs = {"traceloop.span.kind": "tool", "traceloop.entity.name": draw(tool_names),
                     "traceloop.entity.input": draw(values), "traceloop.entity.output": draw(values)}
        elif kind == "agent":
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": draw(tool_names)}
        elif kind == "llm":
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": draw(values),
                     "gen_ai.usage.output_tokens": draw(values), "gen_ai.response.model": draw(tool_names)}
        else:
            attrs = {"gen_ai.operation.name": draw(values)}
        for extra in ("error.type", "loopguard.progress", "loopguard.wait.deadline", "loopguard.wait.owner",
                      "gen_ai.conversation.id", "mcp.method.name"):
            if draw(st.integers(0, 5)) == 0:
                attrs[extra] = draw(values)
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        start = draw(st.integers(0, 10_000)) * SECOND // 1000
        end = start + draw(st.integers(-5_000, 5_000)) * SECOND // 1000  # negative: ends before it starts
        out.append(SpanSpec({k: v for k, v in attrs.items() if v is not None}, parent, start, end))
    return out


class CyclingIds(IdGenerator):
    """Hands out ids from tiny pools, so span ids (and trace ids) repeat across spans and traces."""

    def __init__(self, span_ids: list[int], trace_ids: list[int]) -> None:
        self._spans = itertools.cycle(span_ids)
        self._traces = itertools.cycle(trace_ids)

    def generate_span_id(self) -> int:
        """The next span id of the pool."""
        return next(self._spans)

    def generate_trace_id(self) -> int:
        """The next trace id of the pool."""
        return next(self._traces)


def _run(pipeline: Pipeline, specs: list[SpanSpec], *, end_parents_first: bool) -> int:
    tracer = pipeline.provider.get_tracer("hostile")
    spans = []
    for spec in specs:
        parent = spans[spec.parent] if spec.parent is not None else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        spans.append(tracer.start_span("tool", context=context, attributes=spec.attributes, start_time=T0 + spec.start))
    order = list(range(len(spans)))
    if not end_parents_first:
        order.reverse()
    for i in order:
        spans[i].end(end_time=T0 + specs[i].end)
    return len(spans)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    specs=span_specs(),
    span_ids=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    trace_ids=st.lists(st.integers(1, 2), min_size=1, max_size=2),
    end_parents_first=st.booleans(),
)
def test_hostile_spans_never_raise_and_always_reach_the_exporter(
    specs: list[SpanSpec], span_ids: list[int], trace_ids: list[int], end_parents_first: bool
) -> None:
    """Any attribute value the SDK accepts, any tool-name type, orphan spans, reused ids and skewed clocks: no
    exception reaches the caller, the exporter after the processor gets every span, and no failure goes uncounted."""
    pipeline = build_pipeline(id_generator=CyclingIds(span_ids, trace_ids))
    try:
        ended = _run(pipeline, specs, end_parents_first=end_parents_first)
        settle(pipeline.processor)
        assert len(pipeline.spans.get_finished_spans()) == ended
        # Every failure caught inside the hooks is visible both ways; and with today's code there are none.
        assert pipeline.metric_total("loopguard.processor.errors") == pipeline.processor.errors
        assert pipeline.processor.errors == 0
    finally:
        pipeline.shutdown()


def test_a_failing_listener_is_counted_and_never_reaches_the_application(pipeline: Pipeline) -> None:
    """A listener that raises on every event is counted in ``errors`` and ``loopguard.processor.errors``;
    the application's spans all still reach the exporter."""

    def broken(event: object) -> None:
        raise RuntimeError("listener bug")

    pipeline.processor.add_listener(broken)
    tracer = pipeline.provider.get_tracer("hostile")
    with tracer.start_as_current_span("root"):
        for _ in range(6):
            tracer.start_span("t", attributes={**TOOL, "gen_ai.tool.name": "search",
                                                "gen_ai.tool.call.arguments": "{}",
                                                "gen_ai.tool.call.result": "same"}).end()
    settle(pipeline.processor)
    assert pipeline.events, "the loop should have produced verdict events"
    assert pipeline.processor.errors == len(pipeline.events)
    assert pipeline.metric_total("loopguard.processor.errors", **{"error.type": "RuntimeError"}) == len(pipeline.events)
    assert len(pipeline.spans.get_finished_spans()) == 7


class JsonSpy:
    """Stands in for the ``json`` module inside loopguard modules and records the length of every text parsed."""

    def __init__(self) -> None:
        self.parsed: list[int] = []
        spy = self

        class RecordingDecoder(json.JSONDecoder):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                scan = self.scan_once

                # The canonicaliser calls its decoder's scanner directly (skipping decode's overhead).
                def scan_once(s: str, index: int) -> Any:
                    spy.parsed.append(len(s))
                    return scan(s, index)

                self.scan_once = scan_once

            def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
                spy.parsed.append(len(s))
                return super().decode(s, *args, **kwargs)

            def raw_decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
                spy.parsed.append(len(s))
                return super().raw_decode(s, *args, **kwargs)

        self.JSONDecoder = RecordingDecoder

    def loads(self, s: Any, *args: Any, **kwargs: Any) -> Any:
        """Record, then parse with the real ``json.loads``."""
        self.parsed.append(len(s))
        return json.loads(s, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


@pytest.fixture
def json_spy(monkeypatch: pytest.MonkeyPatch) -> JsonSpy:
    """Every JSON parse done by the signature and extraction modules, with json or with msgspec, recorded."""
    spy = JsonSpy()
    monkeypatch.setattr(signature_module, "json", spy)
    monkeypatch.setattr(extract_module, "json", spy)
    msgspec_decode = signature_module._ms_decode

    def recording_decode(text: Any) -> Any:
        spy.parsed.append(len(text))
        return msgspec_decode(text)

    monkeypatch.setattr(signature_module, "_ms_decode", recording_decode)
    # Argument fingerprints parse with the shared memo's decoder (its memo of the last text emptied).
    plain_decode = jsontext_module._msgspec_loads

    def recording_plain(text: Any) -> Any:
        spy.parsed.append(len(text))
        return plain_decode(text)

    monkeypatch.setattr(jsontext_module, "_msgspec_loads", recording_plain)
    jsontext_module._last = (None, None)
    return spy


def _three_calls(pipeline: Pipeline, arguments: list[str], result: str) -> list[str]:
    tracer = pipeline.provider.get_tracer("huge")
    with tracer.start_as_current_span("root"):
        for argument in arguments:
            tracer.start_span("t", attributes={**TOOL, "gen_ai.tool.name": "fetch",
                                                "gen_ai.tool.call.arguments": argument,
                                                "gen_ai.tool.call.result": result}).end()
    settle(pipeline.processor)
    return [e.verdict.kind for e in pipeline.events]


def test_huge_arguments_are_fingerprinted_without_parsing(json_spy: JsonSpy) -> None:
    """A 1 MB JSON argument (with a framework envelope key) is never handed to a JSON parser; equal huge
    arguments still repeat into ``stuck`` and arguments differing in their last byte do not."""
    big = '{"inputs": {"query": "' + "q" * 1_000_000 + '"}, "tags": []'
    result = '{"kwargs": {"content": "' + "r" * 1_000_000 + '", "tool_call_id": "x"}}'
    assert len(big) > MAX_BYTES * 15

    same = build_pipeline(LoopGuardConfig(signature_key=KEY, max_argument_bytes=MAX_BYTES))
    verdicts_same = _three_calls(same, [big + "}"] * 3, result)
    differ = build_pipeline(LoopGuardConfig(signature_key=KEY, max_argument_bytes=MAX_BYTES))
    verdicts_differ = _three_calls(differ, [big + "}", big + " }", big + "  }"], result)

    assert max(json_spy.parsed, default=0) <= MAX_BYTES, f"parsed {max(json_spy.parsed)} chars"
    assert "stuck" in verdicts_same
    assert "stuck" not in verdicts_differ
    # Positive control: the spy does see parses of small JSON arguments.
    # Different texts of one tool must be compared, so they are parsed (equal texts need no parse at all).
    _three_calls(build_pipeline(), ['{"a": 1}', '{"a":1}', '{ "a": 1}'], "ok")
    assert json_spy.parsed, "the spy recorded no parse at all, so it is not wired in"
    for p in (same, differ):
        p.shutdown()
