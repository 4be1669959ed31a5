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


def test_frequency_work_does_not_grow_with_the_window() -> None:
    """One tool, a new query on every call, window 1000: every call's fingerprint is computed once (the periodicity
    detector compares it with its predecessor), the frequency rule sorts each call by fingerprint at most twice (as
    the call asked about, and once when it is moved down a level), and no canonical text is built. A scan of the
    tool's earlier calls would cost up to 1000 comparisons a call. The step budget is set above the run: its stop
    builds the signature digest of the call that exceeds it, hence that call's canonical text."""
    import otel_loopguard.core.window as window

    engine = LoopEngine(LoopGuardConfig(signature_key=b"k" * 16, window=1000, frequency_limit=3, max_steps=10_000))
    counts = {"bucket": 0, "canonical": 0, "fingerprint": 0}

    def counting(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapper(*args):  # type: ignore[no-untyped-def]
            counts[name] += 1
            return fn(*args)
        return wrapper

    engine._frequency._bucket = counting("bucket", engine._signatures.bucket)
    engine._frequency._canonical = counting("canonical", engine._signatures.canonical)
    real_fingerprint = window.argument_fingerprint
    window.argument_fingerprint = counting("fingerprint", real_fingerprint)
    try:
        state = engine.new_state()
        n = 3000
        for i in range(n):
            engine.observe(state, _call(f'{{"q": "q{i}", "page": 1}}', i, result=f"r{i}"))
    finally:
        window.argument_fingerprint = real_fingerprint
    assert counts["fingerprint"] == n
    assert counts["bucket"] <= 2 * n
    assert counts["canonical"] == 0
    assert state.verdict.kind == "working"


def test_a_frequent_call_among_many_distinct_ones_is_found_in_a_large_window() -> None:
    """Window 1000: 'hot' returns every 50th call among distinct queries; with a limit of 5 the fifth 'hot' call
    (call 200: calls 0, 50, 100, 150, 200) is stuck by frequency, with 5 repetitions starting at call 0."""
    engine = LoopEngine(LoopGuardConfig(signature_key=b"k" * 16, window=1000, frequency_limit=5))
    state = engine.new_state()
    kinds = []
    for i in range(201):
        args = '{"q": "hot"}' if i % 50 == 0 else f'{{"q": "q{i}"}}'
        kinds.append(engine.observe(state, _call(args, i, result="same" if i % 50 == 0 else f"r{i}")).verdict)
    assert [v.kind for v in kinds].index("stuck") == 200
    assert (kinds[200].rule, kinds[200].repetitions, kinds[200].cycle_start) == ("frequency", 5, 0)
