"""Seed 000: ``audit_trace`` reports the step limit and maximal runs of identical steps, exactly."""

from __future__ import annotations

import pytest

from otel_loopguard.core.step_audit import audit_trace, step_signature


def test_signature_sorts_keys_and_renders_values_with_str() -> None:
    """The signature is ``tool|k=v,...`` with names sorted whatever their insertion order."""
    assert step_signature({"tool": "read", "args": {"path": "a.py", "limit": 10}}) == "read|limit=10,path=a.py"
    assert step_signature({"tool": "read", "args": {"limit": 10, "path": "a.py"}}) == "read|limit=10,path=a.py"
    assert step_signature({"tool": "t", "args": {"b": 1, "a": 2}}) == step_signature({"tool": "t", "args": {"a": 2, "b": 1}})


@pytest.mark.parametrize("step", [{"tool": "ping"}, {"tool": "ping", "args": None}, {"tool": "ping", "args": {}}])
def test_missing_or_none_args_mean_no_arguments(step: dict) -> None:
    """Absent, None and empty arguments all give the bare ``tool|`` signature."""
    assert step_signature(step) == "ping|"


def test_missing_args_run_is_detected_across_spellings() -> None:
    """Steps without args, with None and with {} are the same step, so they form one run."""
    steps = [{"tool": "ping"}, {"tool": "ping", "args": None}, {"tool": "ping", "args": {}}]
    assert audit_trace(steps, max_steps=10, repeat_limit=3) == {
        "ok": False, "steps_used": 3, "violations": ["repeat_loop:ping|@0"],
    }


def test_run_reports_its_start_index() -> None:
    """A run of three identical steps from index 0 is reported @0, not @2 or @3."""
    steps = [{"tool": "a", "args": {"x": 1}}] * 3 + [{"tool": "b"}]
    assert audit_trace(steps, 10, 3)["violations"] == ["repeat_loop:a|x=1@0"]


def test_run_in_the_middle_reports_its_own_start() -> None:
    """A run starting at index 2 is reported @2."""
    steps = [{"tool": "x"}, {"tool": "y"}] + [{"tool": "z", "args": {"k": "v"}}] * 3 + [{"tool": "x"}]
    assert audit_trace(steps, 10, 3)["violations"] == ["repeat_loop:z|k=v@2"]


def test_final_run_is_checked_after_the_loop() -> None:
    """A run that ends the trace is still reported."""
    steps = [{"tool": "x"}, {"tool": "y"}, {"tool": "y"}, {"tool": "y"}]
    assert audit_trace(steps, 10, 3)["violations"] == ["repeat_loop:y|@1"]


def test_key_order_does_not_break_a_run() -> None:
    """Reordered argument names are the same step, so the run continues."""
    steps = [
        {"tool": "read", "args": {"path": "a.py", "limit": 10}},
        {"tool": "read", "args": {"limit": 10, "path": "a.py"}},
        {"tool": "read", "args": {"path": "a.py", "limit": 10}},
    ]
    assert audit_trace(steps, 10, 3)["violations"] == ["repeat_loop:read|limit=10,path=a.py@0"]


def test_ping_pong_is_not_a_run() -> None:
    """Alternating steps never form a run, however long the alternation."""
    steps = [{"tool": "a"}, {"tool": "b"}] * 5
    assert audit_trace(steps, 100, 2) == {"ok": True, "steps_used": 10, "violations": []}


def test_violations_are_sorted_lexicographically() -> None:
    """``repeat_loop:...`` sorts before ``step_limit:...`` and runs sort by their text, not their index."""
    steps = [{"tool": "z"}] * 2 + [{"tool": "a"}] * 2
    result = audit_trace(steps, max_steps=3, repeat_limit=2)
    assert result == {
        "ok": False, "steps_used": 4,
        "violations": ["repeat_loop:a|@2", "repeat_loop:z|@0", "step_limit:4"],
    }


def test_step_limit_boundary() -> None:
    """Exactly max_steps steps is fine; one more is ``step_limit:<n>``."""
    distinct = [{"tool": f"t{i}"} for i in range(6)]
    assert audit_trace(distinct[:5], max_steps=5, repeat_limit=3) == {"ok": True, "steps_used": 5, "violations": []}
    assert audit_trace(distinct, max_steps=5, repeat_limit=3) == {
        "ok": False, "steps_used": 6, "violations": ["step_limit:6"],
    }


def test_repeat_limit_boundary() -> None:
    """A run as long as repeat_limit violates; one shorter does not."""
    run3 = [{"tool": "a"}] * 3 + [{"tool": "b"}]
    assert audit_trace(run3, 10, 3)["violations"] == ["repeat_loop:a|@0"]
    assert audit_trace(run3, 10, 4)["violations"] == []
    assert audit_trace([{"tool": "a"}] * 2, 10, 3)["ok"] is True


def test_repeat_limit_one_flags_every_run() -> None:
    """With repeat_limit=1 every maximal run, even of length one, is a violation."""
    steps = [{"tool": "a"}, {"tool": "b"}, {"tool": "b"}, {"tool": "a"}]
    assert audit_trace(steps, 10, 1)["violations"] == ["repeat_loop:a|@0", "repeat_loop:a|@3", "repeat_loop:b|@1"]


def test_empty_trace_is_ok() -> None:
    """An empty trace uses no steps and has no violations, even with max_steps 0."""
    assert audit_trace([], max_steps=0, repeat_limit=1) == {"ok": True, "steps_used": 0, "violations": []}


def test_values_are_rendered_with_str() -> None:
    """Values are rendered with ``str()``, so 1 and "1" sign the same and None is spelled None."""
    assert step_signature({"tool": "t", "args": {"a": None, "b": True, "c": [1, 2]}}) == "t|a=None,b=True,c=[1, 2]"
    assert step_signature({"tool": "t", "args": {"a": 1}}) == step_signature({"tool": "t", "args": {"a": "1"}})


def test_accepts_a_generator() -> None:
    """The steps may be any iterable, consumed once."""
    result = audit_trace(({"tool": "a"} for _ in range(3)), 2, 3)
    assert result == {"ok": False, "steps_used": 3, "violations": ["repeat_loop:a|@0", "step_limit:3"]}
