"""A frequent tool whose signatures differ is judged on the engine's fast path without changing the verdict,
and the frequency rule still fires at the exact call where one signature reaches the limit."""

from __future__ import annotations

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import ToolCall
from otel_loopguard.core.signature import Canonicalizer
from tests.core._helpers import T0


def _call(args: str, at: int, result: str = "same") -> ToolCall:
    return ToolCall("search", args, result=result, result_captured=True, start=T0 + at, end=T0 + at + 0.5)


def test_frequent_tool_with_distinct_arguments_keeps_the_working_verdict_object() -> None:
    """Eight calls of one tool with eight different argument strings keep the call-0 working verdict object."""
    engine = LoopEngine(LoopGuardConfig(signature_key=b"k" * 16))
    state = engine.new_state()
    obs = [engine.observe(state, _call(f'{{"q": {i}, "request_id": "r{i}"}}', i)) for i in range(8)]
    assert all(o.verdict is obs[0].verdict for o in obs)
    assert (obs[-1].verdict.kind, obs[-1].verdict.rule, obs[-1].verdict.step) == ("working", "none", 0)


def test_frequency_rule_fires_when_a_volatile_only_difference_reaches_the_limit() -> None:
    """A/B/A/C/A with A spelled differently each time (reordered keys, new request ids) is stuck by frequency at
    the fifth call, with three repetitions starting at call 0."""
    engine = LoopEngine(LoopGuardConfig(signature_key=b"k" * 16, max_period=1))
    state = engine.new_state()
    args = ['{"q": 1, "request_id": "a"}', '{"q": 2}', '{"request_id": "b", "q": 1.0}', '{"q": 3}',
            '{ "q" : 1 , "requestId": "c" }']
    obs = [engine.observe(state, _call(a, i)) for i, a in enumerate(args)]
    assert [o.verdict.kind for o in obs] == ["working"] * 4 + ["stuck"]
    last = obs[-1].verdict
    assert (last.rule, last.repetitions, last.cycle_start) == ("frequency", 3, 0)


def test_volatile_keys_are_dropped_at_every_depth_and_in_every_position() -> None:
    """Volatile keys first, last, repeated and nested are all removed; the other keys keep their values."""
    canon = Canonicalizer(frozenset({"requestid", "traceid"}))
    text = '{"request_id": 1, "a": {"trace-id": 2, "b": [{"RequestId": 3, "c": 4}], "TraceId": 5}, "z": 6}'
    assert canon.canonical(text) == '{"a":{"b":[{"c":4}]},"z":6}'
