"""``audit --json`` lines are exactly ``json.dumps`` of the report's dict, except that a non-finite cost (not JSON)
is written as null and named under ``not_finite``."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.cli.audit import report_json
from otel_loopguard.core.cost import CostTotal
from otel_loopguard.core.judge import TraceReport
from otel_loopguard.core.model import Intervention, Transition, Verdict

TEXT = st.text() | st.sampled_from(["é", "\ud800", "\x00", '"\\', "😀"])


@settings(max_examples=200, deadline=None)
@given(source=TEXT, message=TEXT, model=TEXT, usd=st.floats(allow_nan=True), tokens=st.integers(0, 10**12),
       period=st.none() | st.integers(1, 5), ok=st.booleans())
def test_report_json_is_json_dumps_of_as_dict(source: str, message: str, model: str, usd: float, tokens: int,
                                              period: int | None, ok: bool) -> None:
    """Any source name, message, model name and finite cost encodes to the same text json.dumps gives; an infinite
    or NaN cost gives null and ``"not_finite": ["cost_usd"]``."""
    verdict = Verdict("stuck", "period", 4, period, 3, 1, "search", "d" * 32)
    report = TraceReport(
        source=source, trace_id="0af7651916cd43dd8448eb211c80319c", verdict=verdict, stuck_period=period, steps_used=5,
        transitions=(Transition(4, "working", verdict),), interventions=(Intervention("nudge", message, "period", 4,
                                                                                       verdict),),
        ok=ok, violations=("repeat_loop:search|q=1@2",), cost=CostTotal(usd, tokens, frozenset({model})),
    )
    line = report_json(report)
    expected = report.as_dict()
    if not math.isfinite(usd):
        expected["cost_usd"] = None
        expected["not_finite"] = ["cost_usd"]
    assert line == json.dumps(expected)
    assert "\n" not in line
