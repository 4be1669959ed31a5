"""Recovery on evidence: after an intervention a stuck trace returns to working only when a step brings evidence
that no other call in its window had; a changed action alone proves nothing."""

from __future__ import annotations

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall

from ._helpers import T0


def _search(i: int, **kw: object) -> ToolCall:
    kw.setdefault("result", "no hits")
    kw.setdefault("result_captured", True)
    return ToolCall("search", {"q": "x"}, start=T0 + i, end=T0 + i + 0.5, **kw)  # type: ignore[arg-type]


def _read(i: int, **kw: object) -> ToolCall:
    kw.setdefault("result_captured", True)
    return ToolCall("read", {"doc": i}, start=T0 + i, end=T0 + i + 0.5, **kw)  # type: ignore[arg-type]


def _run(calls: list[ToolCall], **config: object) -> list[tuple[str, str, str | None]]:
    """(kind, rule, intervention action) after each call."""
    engine = LoopEngine(LoopGuardConfig(**config))  # type: ignore[arg-type]
    state = engine.new_state()
    out = []
    for c in calls:
        o = engine.observe(state, c)
        out.append((o.verdict.kind, o.verdict.rule, o.intervention.action if o.intervention else None))
    return out


def test_a_new_result_after_the_nudge_recovers_with_rule_recovered() -> None:
    """Three equal searches (stuck, nudged at call 2), then a read with a result never seen: working, rule recovered."""
    out = _run([_search(0), _search(1), _search(2), _read(3, result="the document")])
    assert out == [("working", "none", None)] * 2 + [("stuck", "period", "nudge"), ("working", "recovered", None)]


def test_another_action_with_a_result_already_in_the_window_stays_stuck_and_stops() -> None:
    """After the nudge the agent reads instead, but gets the same text it got before: still stuck, so the stop comes."""
    out = _run([_search(0), _search(1), _search(2), _read(3, result="no hits")])
    assert out[2] == ("stuck", "period", "nudge")
    assert out[3] == ("stuck", "period", "stop")


def test_a_failed_step_or_a_missing_result_never_proves_recovery() -> None:
    """A different call that fails, or whose result was not recorded, brings no evidence: the trace stays stuck."""
    failed = _run([_search(0), _search(1), _search(2), _read(3, result=None, result_captured=False, error="Timeout")],
                  stop_after=2)
    missing = _run([_search(0), _search(1), _search(2), _read(3, result=None, result_captured=False)], stop_after=2)
    assert failed[3] == missing[3] == ("stuck", "period", None)


def test_a_new_progress_fingerprint_recovers_and_an_old_one_does_not() -> None:
    """With explicit progress fingerprints: a step whose fingerprint is new recovers; one seen earlier does not."""
    loop = [_search(i, progress="rows=50") for i in range(3)]
    assert _run([*loop, _read(3, progress="rows=182")])[3] == ("working", "recovered", None)
    assert _run([*loop, _read(3, progress="rows=50")], stop_after=2)[3] == ("stuck", "period", None)


def test_a_stop_holds_until_new_evidence_then_the_trace_recovers_once() -> None:
    """Stopped at call 3; calls 4 and 5 bring the old result (stuck); call 6 a new one: recovered, one transition."""
    calls = [_search(0), _search(1), _search(2), _search(3), _read(4, result="no hits"), _read(5, result="no hits"),
             _read(6, result="found it")]
    out = _run(calls)
    assert [o[0] for o in out] == ["working", "working", "stuck", "stuck", "stuck", "stuck", "working"]
    assert [o[2] for o in out] == [None, None, "nudge", "stop", None, None, None]
    assert out[6][1] == "recovered"


def test_judging_again_without_a_call_never_recovers() -> None:
    """A re-evaluation at a later time brings no step, hence no evidence: nothing changes."""
    engine = LoopEngine()
    state = engine.new_state()
    for i in range(3):
        engine.observe(state, _search(i))
    assert state.verdict.kind == "stuck"
    assert engine.reevaluate(state, T0 + 3600) is None
    assert state.verdict.kind == "stuck"
