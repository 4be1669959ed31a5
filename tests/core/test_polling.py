"""Polling as a declared wait: a tool with ``wait_seconds`` is waiting while it returns the same result, until the
deadline from the first identical call, then judged as usual; ``wait_until`` ends the wait when the job is done."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import LoopGuardConfig, ToolSettings
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.errors import ConfigError

from ._helpers import T0


def _poll(at: float, result: str) -> ToolCall:
    return ToolCall("get_job_status", {"job": "j1"}, result=result, result_captured=True, start=T0 + at,
                    end=T0 + at + 0.5)


def _run(results: list[tuple[float, str]], **tool: object) -> list[tuple[str, str]]:
    engine = LoopEngine(LoopGuardConfig(tools={"get_job_status": ToolSettings(**tool)}))  # type: ignore[arg-type]
    state = engine.new_state()
    return [(o.verdict.kind, o.verdict.rule) for o in (engine.observe(state, _poll(at, r)) for at, r in results)]


def test_identical_polls_wait_until_the_deadline_then_are_stuck() -> None:
    """Polls every 100 s with 'running', wait 250 s: calls 1-2 (t=100, 200) wait; call 3 at t=300 is past the
    deadline (first identical call at t=0, + 250) and the four identical calls are stuck."""
    out = _run([(100.0 * i, "running") for i in range(4)], wait_seconds=250)
    assert out == [("working", "none"), ("waiting", "lease"), ("waiting", "lease"), ("stuck", "period")]


def test_without_a_wait_policy_the_same_polls_are_stuck_at_the_third_call() -> None:
    """The same polls with no policy: stuck by period at call 2, as any repeated call."""
    engine = LoopEngine()
    state = engine.new_state()
    kinds = [engine.observe(state, _poll(100.0 * i, "running")).verdict.kind for i in range(3)]
    assert kinds == ["working", "working", "stuck"]


def test_a_new_result_starts_a_new_wait() -> None:
    """'queued' at 0 and 100, then 'running' from 200: the third identical call with a new result is progress
    (working, rule progress) and its own run waits
    from t=200, so t=300 and t=400 still wait with a 250 s wait although the first call was at 0."""
    results = [(0.0, "queued"), (100.0, "queued"), (200.0, "running"), (300.0, "running"), (400.0, "running")]
    out = _run(results, wait_seconds=250)
    assert out == [("working", "none"), ("waiting", "lease"), ("working", "progress"), ("waiting", "lease"),
                   ("waiting", "lease")]


def test_polling_on_after_the_job_is_done_is_judged_as_usual() -> None:
    """wait_until 'done': 'running' twice (waiting), then 'done' three times: the wait ends, and three identical
    calls with the same result are stuck at the third 'done'."""
    results = [(0.0, "running"), (10.0, "running"), (20.0, "status: done"), (30.0, "status: done"),
               (40.0, "status: done")]
    out = _run(results, wait_seconds=600, wait_until=r"\bdone\b")
    assert out[1] == ("waiting", "lease")
    assert [k for k, _ in out[2:]] == ["working", "working", "stuck"]


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("wait_seconds", 0, r"^tools.wait_seconds must be positive, got 0$"),
    ("wait_until", "(", r"^tools.wait_until is not a valid regular expression: "),
    ("wait_until", 5, r"^tools.wait_until must be a regular expression \(text\), got 5$"),
])
def test_bad_wait_settings_are_refused(setting: str, value: object, message: str) -> None:
    """A wait that is not positive, or a pattern that does not compile, is a configuration error naming it."""
    with pytest.raises(ConfigError, match=message):
        ToolSettings(**{setting: value})  # type: ignore[arg-type]
