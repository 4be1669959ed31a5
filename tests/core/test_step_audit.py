"""The step audit: ``audit_trace`` reports the step limit and maximal runs of identical steps, exactly, and the
incremental ``StepAudit`` the judge uses gives the same answer one call at a time."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.step_audit import MAX_VIOLATIONS, StepAudit, audit_trace, step_args, step_signature


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


_ARGS = st.sampled_from([None, '{"a": 1, "b": 2}', '{"b": 2, "a": 1}', '{"a": 1}', "plain", "{not json", "",
                         '["x"]', '{"input": "x"}', "x",
                         # Equal renderings of the last value under different JSON ('"1"', 1, true/True), values
                         # holding "=" or ",", and members that render as another call's: the signatures' ends are
                         # compared before any signature is built, and must never call equal signatures different.
                         '{"b": "1"}', '{"b": 1}', '{"b": 1.0}', '{"b": true}', '{"b": "True"}', '{"b": "x=1"}',
                         '{"a": "1,b=1"}', '{"a": 1, "b": "1"}', '{"a": "1", "b": 1}', '{"b": "y", "a": "1"}',
                         '{"b": ""}', '{"b": null}', '{"b": "None"}', '{"b": [1]}', '{"b": "[1]"}', '{}'])
_TOOLS = st.sampled_from(["a", "b", "a|b", "a|b=", "b="])


def _incremental(calls: list[ToolCall], max_steps: int, repeat_limit: int) -> dict:
    audit = StepAudit(max_steps, repeat_limit)
    for call in calls:
        audit.add(call)
    return audit.result()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_TOOLS, _ARGS, st.booleans()), max_size=12), st.integers(1, 8), st.integers(1, 4))
def test_incremental_audit_equals_the_reference(steps: list, max_steps: int, repeat_limit: int) -> None:
    """StepAudit gives exactly audit_trace's result for any calls, including key-order and '|' collisions."""
    calls = []
    for tool, args, as_dict in steps:
        value = json.loads(args) if as_dict and args in ('{"a": 1, "b": 2}', '{"a": 1}') else args
        calls.append(ToolCall(tool, value))
    reference = audit_trace([{"tool": c.tool, "args": step_args(c)} for c in calls], max_steps, repeat_limit)
    assert _incremental(calls, max_steps, repeat_limit) == reference


def test_incremental_audit_keeps_one_run_not_every_call() -> None:
    """Fed 10 000 calls, the audit holds only the previous call and the run's signature, not a list of calls."""
    audit = StepAudit(max_steps=20_000, repeat_limit=3)
    for i in range(10_000):
        audit.add(ToolCall("read", f'{{"page": {i // 5}}}'))  # runs of 5 equal calls
    audit.add(ToolCall("done"))  # closes the last run
    # Nothing in the audit grows with the calls but the violations (2000 runs of 5, of which the first 1000 are
    # kept) and a buffer of at most repeat_limit calls.
    sizes = {name: len(value) for name in StepAudit.__slots__ if isinstance(value := getattr(audit, name), list)}
    assert set(sizes) <= {"_violations", "_stretch"} and sizes.get("_stretch", 0) <= 3
    result = audit.result()
    assert result["steps_used"] == 10_001
    assert len(result["violations"]) == MAX_VIOLATIONS and audit.dropped == 1000
    assert result["ok"] is False
    # The first run starts at call 0 and the violation names its signature (a JSON member rendered by str()).
    assert "repeat_loop:read|page=0@0" in result["violations"]
