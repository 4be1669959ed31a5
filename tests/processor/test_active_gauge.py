"""``loopguard.traces.active`` in the processor: every series by verdict (not only their sum) is back to 0 once
every trace has ended, for looping traces released by their root and for stuck traces evicted early."""

from __future__ import annotations

from otel_loopguard import LoopGuardConfig
from otel_loopguard.otlp.read import read_spans
from tests.processor.conftest import Harness, HarnessFactory
from tests.support.recorded_fixtures import PROCESSOR_SOURCES, judged_fixture_files
from tests.support.span_replay import replay_spans

# One looping trace of each convention family whose tool spans the processor reads live.
LOOP_SOURCES = ("langgraph_genai", "openai_agents_genai", "adk_default", "pydantic_ai", "strands_default")
LOOPS = [p for p in judged_fixture_files(PROCESSOR_SOURCES) if p.stem in {f"{s}__same_call_loop" for s in LOOP_SOURCES}]


def _series(h: Harness) -> dict[str, float]:
    """The gauge's value per verdict."""
    return {p["attributes"]["loopguard.verdict"]: p["value"] for p in h.metrics()["loopguard.traces.active"]["points"]}


def test_replayed_looping_traces_leave_every_series_at_zero(harness: Harness) -> None:
    """Every recorded looping trace replayed live: each goes stuck, and afterwards working and stuck are both 0."""
    assert len(LOOPS) == 5
    for path in LOOPS:
        replay_spans(harness.provider, list(read_spans(str(path))), ids=harness.ids)
    stuck = {e.trace_id for e in harness.events if e.verdict.kind == "stuck"}
    assert len(stuck) == 5
    series = _series(harness)
    assert series.get("stuck") == 0 and series.get("working") == 0, series
    assert {kind: value for kind, value in series.items() if value != 0} == {}


def test_stuck_trace_evicted_for_capacity_leaves_every_series_at_zero(make_harness: HarnessFactory) -> None:
    """A stuck trace evicted by a newer one (max_traces=1) is taken off its stuck series: all series end at 0."""
    h = make_harness(LoopGuardConfig(max_traces=1))
    looping = h.agent()
    for _ in range(3):
        h.tool(looping)
    assert _series(h) == {"working": 0, "stuck": 1}
    other = h.agent()
    h.tool(other)
    assert _series(h) == {"working": 1, "stuck": 0}
    h.end(other)
    h.end(looping)
    assert _series(h) == {"working": 0, "stuck": 0}
