"""The step audit's reading of arguments, one example per rule (the README: a JSON object's members, else the raw
value under ``input``; only text that starts with ``{`` or ``[`` is read as JSON)."""

from __future__ import annotations

from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.step_audit import MAX_VIOLATIONS, StepAudit, audit_trace, step_args


def test_plain_text_is_the_input() -> None:
    assert step_args(ToolCall("t", "weather in Paris")) == {"input": "weather in Paris"}


def test_json_text_of_an_object_gives_its_members_and_of_an_array_the_array() -> None:
    assert step_args(ToolCall("t", '{"q": "x", "n": 2}')) == {"q": "x", "n": 2}
    assert step_args(ToolCall("t", "[1, 2]")) == {"input": [1, 2]}


def test_only_text_starting_with_a_brace_or_bracket_is_read_as_json() -> None:
    # "42" and a leading space before an object are valid JSON, but the audit reads only text that starts with
    # "{" or "[": both stay text.
    assert step_args(ToolCall("t", "42")) == {"input": "42"}
    assert step_args(ToolCall("t", ' {"a": 1}')) == {"input": ' {"a": 1}'}


def test_text_that_only_looks_like_json_is_the_input() -> None:
    assert step_args(ToolCall("t", "{not json")) == {"input": "{not json"}


def test_no_arguments_are_no_members_and_other_values_the_input() -> None:
    assert step_args(ToolCall("t", None)) == {}
    assert step_args(ToolCall("t", {"a": 1})) == {"a": 1}
    assert step_args(ToolCall("t", [3])) == {"input": [3]}


# -- the incremental audit (StepAudit), fixed examples ----------------------------------------------------------


def _incremental(calls: list[ToolCall], max_steps: int = 100, repeat_limit: int = 3) -> dict[str, object]:
    audit = StepAudit(max_steps, repeat_limit)
    for call in calls:
        audit.add(call)
    return audit.result()


def test_a_tool_named_with_a_bar_repeats_a_call_of_another_tool_whose_signature_collides() -> None:
    # Signatures are `tool|k=v,...`: tool "a" with arguments {"x": "1|"} signs "a|" + "x=1|" = "a|x=1|", and tool
    # "a|x=1" with no arguments signs "a|x=1" + "|" = "a|x=1|": the same text, so the audit takes them for one
    # step. Alternating them (both directions of the change of tool) is one run of 4 identical steps from index 0.
    plain, barred = ToolCall("a", '{"x": "1|"}'), ToolCall("a|x=1", None)
    calls = [plain, barred, plain, barred]
    expected = {"ok": False, "steps_used": 4, "violations": ["repeat_loop:a|x=1|@0"]}
    assert _incremental(calls) == expected
    assert audit_trace([{"tool": "a", "args": {"x": "1|"}}, {"tool": "a|x=1"}] * 2, 100, 3) == expected
    # Starting with the barred tool: the change of tool in the other direction first.
    assert _incremental([barred, plain, barred]) == {"ok": False, "steps_used": 3,
                                                      "violations": ["repeat_loop:a|x=1|@0"]}


def test_equal_arguments_of_different_spelling_are_different_steps() -> None:
    # {"a": 1} == {"a": 1.0} in Python, but the audit renders values with str(): "t|a=1" and "t|a=1.0" differ, so
    # the two calls are not a run of 2 (repeat limit 2): no violation. The same for 1 and 1.0 as the raw input.
    assert _incremental([ToolCall("t", {"a": 1}), ToolCall("t", {"a": 1.0})], repeat_limit=2) == {
        "ok": True, "steps_used": 2, "violations": []}
    assert _incremental([ToolCall("t", 1), ToolCall("t", 1.0)], repeat_limit=2) == {
        "ok": True, "steps_used": 2, "violations": []}
    # Equal dicts of equal spelling (two objects) are one step repeated: a run of 2 from index 0.
    assert _incremental([ToolCall("t", {"a": 1}), ToolCall("t", {"a": 1})], repeat_limit=2)["violations"] == [
        "repeat_loop:t|a=1@0"]


def test_violations_stop_at_the_bound_including_the_run_still_open_at_the_end() -> None:
    # Repeat limit 1: every maximal run is a violation, so 1 001 calls of distinct tools are 1 001 runs. Only
    # MAX_VIOLATIONS (1 000) are kept (the module's documented bound); the 1 001st is the run still open when the
    # result is asked for, and it must not push the list past the bound.
    assert MAX_VIOLATIONS == 1000
    result = _incremental([ToolCall(f"t{i}") for i in range(1001)], max_steps=10_000, repeat_limit=1)
    violations = result["violations"]
    assert isinstance(violations, list) and len(violations) == 1000
    assert result["ok"] is False and result["steps_used"] == 1001
    # The first ones found are kept: t0 at 0 ... t999 at 999, never the last call's run (t1000 at 1000).
    assert "repeat_loop:t0|@0" in violations and "repeat_loop:t999|@999" in violations
    assert "repeat_loop:t1000|@1000" not in violations


# --- the incremental audit's shortcuts: each example's run is found only if a shortcut does not misjudge it ---------
# Signatures are "tool|k=v,..." with the argument names sorted; a run of at least repeat_limit (3 here) identical
# consecutive calls is a violation "repeat_loop:<signature>@<index of its first call>".

def test_calls_with_the_same_signature_in_other_spellings_are_one_run() -> None:
    # Z differs (b=9); then A, A' (the same members in another order), A, A': one run of 4 from index 1, found
    # whether the calls are compared while the stretch is buffered (Z, A, A') or one by one after it.
    z, a, a2 = ToolCall("t", '{"a": 1, "b": 9}'), ToolCall("t", '{"a": 1, "b": 2}'), ToolCall("t", '{"b": 2, "a": 1}')
    assert _incremental([z, a, a2, a, a2])["violations"] == ["repeat_loop:t|a=1,b=2@1"]
    # The same calls, the object given once as a mapping (no text to read its end from): still one run.
    assert _incremental([z, a, a, ToolCall("t", {"a": 1, "b": 2}), a])["violations"] == ["repeat_loop:t|a=1,b=2@1"]


def test_a_last_value_holding_an_equals_sign_says_nothing_about_the_signature() -> None:
    # {"x": "p", "y": "q"} signs "t|x=p,y=q", and so does {"x": "p,y=q"}: one step, though their last values ("q",
    # "p,y=q") differ. Alternated four times: one run of 4 from index 0 (the limit is reached in the buffer, the
    # fourth call is compared after it).
    first, second = ToolCall("t", '{"x": "p", "y": "q"}'), ToolCall("t", '{"x": "p,y=q"}')
    assert _incremental([first, second, first, second])["violations"] == ["repeat_loop:t|x=p,y=q@0"]
    # Both last values holding "=": {"x": "1,y=2=3"} and {"x": "1", "y": "2=3"} both sign "t|x=1,y=2=3".
    third, fourth = ToolCall("t", '{"x": "1,y=2=3"}'), ToolCall("t", '{"x": "1", "y": "2=3"}')
    assert _incremental([third, fourth, third, fourth])["violations"] == ["repeat_loop:t|x=1,y=2=3@0"]


def test_different_arguments_of_one_tool_are_no_run() -> None:
    # Three calls of one tool with q = 1, 2, 3: three different steps, no run.
    calls = [ToolCall("t", f'{{"q": {i}}}') for i in (1, 2, 3)]
    assert _incremental(calls) == {"ok": True, "steps_used": 3, "violations": []}


def test_equal_arguments_of_tools_whose_names_collide_are_different_steps() -> None:
    # Tools "a|x" and "a" (a "|" in a name keeps them in one stretch) with the same arguments sign "a|x|q=1" and
    # "a|q=1": different steps, so alternating them is no run.
    barred, plain = ToolCall("a|x", '{"q": 1}'), ToolCall("a", '{"q": 1}')
    assert _incremental([barred, plain, barred]) == {"ok": True, "steps_used": 3, "violations": []}


def test_a_run_after_a_different_call_starts_after_it() -> None:
    # Z, then A three times: the buffer (Z, A, A) resolves to a run starting at 1; the third A makes it 3 long.
    z, a = ToolCall("t", '{"q": 0}'), ToolCall("t", '{"q": 5}')
    assert _incremental([z, a, a, a])["violations"] == ["repeat_loop:t|q=5@1"]


def test_text_that_is_no_json_object_or_an_empty_one_is_compared_by_signature() -> None:
    # "{bad" is not JSON (the raw text is the input) and "{}" has no members: neither has an end to read, so they
    # are compared by signature. Z, "{}", "{}" written two ways, "{}": a run of 3 from index 1 ("t|"); then
    # "{bad" three times after a different call: a run of 3 from index 5.
    z = ToolCall("t", '{"q": 0}')
    empty, empty2 = ToolCall("t", "{}"), ToolCall("t", "{ }")
    bad = ToolCall("t", "{bad")
    result = _incremental([z, empty, empty2, empty, z, bad, bad, bad])
    assert result["violations"] == ["repeat_loop:t|@1", "repeat_loop:t|input={bad@5"]


def test_exactly_the_step_budget_is_within_it() -> None:
    # max_steps = 3: three calls are within the budget, four exceed it.
    calls = [ToolCall("t", f'{{"q": {i}}}') for i in range(4)]
    assert _incremental(calls[:3], max_steps=3)["ok"] is True
    assert _incremental(calls, max_steps=3)["violations"] == ["step_limit:4"]
