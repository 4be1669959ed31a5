"""Fixed examples of the engine's edges through its public entry points (``LoopEngine.observe``, ``reevaluate``,
``add_usage``, ``signature``, ``Canonicalizer``); each expected value is derived by hand in a comment."""

from __future__ import annotations

import hashlib
import hmac

from otel_loopguard.core.config import LoopGuardConfig, Prices, ToolSettings
from otel_loopguard.core.cost import Usage
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import Lease, ToolCall
from otel_loopguard.core.signature import NUDGE_MARKER, Canonicalizer
from tests.core._helpers import T0


def test_a_trace_of_one_call_is_judged_again_when_its_lease_expires() -> None:
    # One call declaring a lease until T0 + 100: waiting (rule lease). Judged again at T0 + 200, after the deadline,
    # the lease no longer holds and nothing repeats: working, a change of kind at call 0, so an observation.
    engine = LoopEngine()
    state = engine.new_state()
    assert engine.reevaluate(state, T0) is None  # no call yet: nothing to judge
    first = engine.observe(state, ToolCall("approve", {"id": 1}, result="pending", result_captured=True,
                                           start=T0, end=T0 + 1, lease=Lease("approver", deadline=T0 + 100)))
    assert (first.verdict.kind, first.verdict.rule) == ("waiting", "lease")
    assert engine.reevaluate(state, T0 + 50) is None  # the lease still holds: nothing changed
    later = engine.reevaluate(state, T0 + 200)
    assert later is not None
    assert (later.index, later.verdict.kind, later.verdict.rule) == (0, "working", "none")
    assert later.transition is not None and later.transition.previous == "waiting"


def test_the_cost_stop_carries_the_call_index_and_the_verdict_of_the_moment() -> None:
    # Two calls (index 1 is the latest), price 1 USD per million input tokens, budget 0.001 USD: 1001 tokens cost
    # 0.001001 USD, over the budget -> a stop at call 1 whose verdict is the trace's verdict then (working, no rule).
    engine = LoopEngine(LoopGuardConfig(max_cost_usd=0.001, prices={"m": Prices(input=1.0, output=0.0)}))
    state = engine.new_state()
    for i in range(2):
        engine.observe(state, ToolCall("t", {"i": i}, result="r", result_captured=True, start=T0 + i, end=T0 + i))
    obs = engine.add_usage(state, "m", Usage(input_tokens=1001))
    assert obs is not None and obs.intervention is not None
    assert obs.index == 1
    assert obs.verdict is state.verdict and (obs.verdict.kind, obs.verdict.rule) == ("working", "none")
    assert obs.intervention.verdict is state.verdict
    assert (obs.intervention.action, obs.intervention.rule, obs.intervention.step) == ("stop", "cost_limit", 1)


def test_the_signature_of_a_call_without_recorded_arguments_keeps_its_tool() -> None:
    # Arguments not recorded: the unknown signature, whatever the arguments say, but still the call's tool (two
    # tools' unknown calls are different actions).
    engine = LoopEngine()
    a = engine.signature(ToolCall("search", {"q": 1}, arguments_captured=False))
    b = engine.signature(ToolCall("search", {"q": 2}, arguments_captured=False))
    c = engine.signature(ToolCall("fetch", {"q": 1}, arguments_captured=False))
    assert a.tool == "search" and c.tool == "fetch"
    assert a == b and a != c


def test_the_canonicaliser_answers_from_its_cache_only_for_text_it_has_canonicalised() -> None:
    # canonical() sorts the keys and drops the spaces: '{"b": 1, "a": 2}' -> '{"a":2,"b":1}'. cached() gives that
    # text for the same string afterwards, and None for a string never canonicalised.
    canon = Canonicalizer(frozenset())
    text = '{"b": 1, "a": 2}'
    assert canon.cached(text) is None
    assert canon.canonical(text) == '{"a":2,"b":1}'
    assert canon.cached(text) == '{"a":2,"b":1}'
    assert canon.cached('{"c": 3}') is None


def test_the_step_limit_stop_carries_the_verdict_of_the_call_that_exceeded_the_budget() -> None:
    # Budget 3 steps, four different calls: the fourth call (index 3) exceeds it -> a stop with rule step_limit at
    # call 3, whose verdict is that call's verdict (working: nothing repeats).
    engine = LoopEngine(LoopGuardConfig(max_steps=3))
    state = engine.new_state()
    obs = [engine.observe(state, ToolCall("t", {"i": i}, result=f"r{i}", result_captured=True, start=T0 + i,
                                          end=T0 + i)) for i in range(4)]
    assert [o.intervention for o in obs[:3]] == [None, None, None]
    stop = obs[3].intervention
    assert stop is not None and (stop.action, stop.rule, stop.step) == ("stop", "step_limit", 3)
    assert stop.verdict is obs[3].verdict and stop.verdict.kind == "working"


def test_each_stuck_episode_names_its_own_signature() -> None:
    # Three loops in one trace: search {"q": 1}, then search {"q": 2} (same tool, other arguments), then fetch
    # {"q": 2} (same arguments, another tool). Each third call is stuck (period 1, three repetitions) and changes the verdict from working, so the
    # observation carries the digest of that call's signature, which is the signature the verdict names. Three
    # different (tool, arguments) pairs: three different digests.
    engine = LoopEngine()
    state = engine.new_state()
    plan = [("search", '{"q": 1}')] * 3 + [("search", '{"q": 2}')] * 3 + [("fetch", '{"q": 2}')] * 3
    # Each loop has its own result, so the first call of the next loop brings new evidence (the trace recovers).
    obs = [engine.observe(state, ToolCall(tool, args, result=f"same {tool} {args}", result_captured=True,
                                          start=T0 + i, end=T0 + i)) for i, (tool, args) in enumerate(plan)]
    assert [obs[i].verdict.rule for i in (3, 6)] == ["recovered", "recovered"]
    stuck = [obs[i] for i in (2, 5, 8)]
    for o in stuck:
        assert o.verdict.kind == "stuck" and o.transition is not None
        assert o.signature_digest is not None and o.verdict.signature_digest == o.signature_digest
    assert len({o.verdict.signature_digest for o in stuck}) == 3
    assert [o.verdict.tool for o in stuck] == ["search", "search", "fetch"]


def test_evidence_of_results_that_are_not_text() -> None:
    # A captured result 42 (an int) is digested from its canonical text "42": "r:" and the 24-hex-digit blake2b
    # digest of b"42". A text result is cut at the nudge marker first, so "abc" + marker + nudge is "abc".
    normalizer = LoopEngine().normalizer
    evidence = normalizer.evidence(error=None, progress=None, result=42, result_captured=True)
    assert evidence == "r:" + hashlib.blake2b(b"42", digest_size=12).hexdigest()
    nudged = normalizer.evidence(error=None, progress=None, result="abc" + NUDGE_MARKER + "try something else",
                                 result_captured=True)
    assert nudged == normalizer.evidence(error=None, progress=None, result="abc", result_captured=True)


def test_ignored_arguments_of_one_tool_stay_ignored_after_another_tool_used_that_name() -> None:
    # Tool "a" ignores "page", tool "b" does not. b is called three times with pages 1-3 (all different: working).
    # Then a {"q": 1, "page": n} three times, between calls of a third tool: without "page" the three a calls are one
    # signature, so at call 7 the window holds it three times -> stuck by frequency, from call 3.
    engine = LoopEngine(LoopGuardConfig(tools={"a": ToolSettings(ignore_args=("page",))}, max_period=1))
    state = engine.new_state()
    plan = [("b", '{"page": 1}'), ("b", '{"page": 2}'), ("b", '{"page": 3}'), ("a", '{"q": 1, "page": 1}'),
            ("o", '{"n": 1}'), ("a", '{"q": 1, "page": 2}'), ("o", '{"n": 2}'), ("a", '{"q": 1, "page": 3}')]
    out = [engine.observe(state, ToolCall(tool, args, result="same", result_captured=True, start=T0 + i,
                                          end=T0 + i)).verdict for i, (tool, args) in enumerate(plan)]
    assert [v.kind for v in out] == ["working"] * 7 + ["stuck"]
    assert (out[7].rule, out[7].repetitions, out[7].cycle_start, out[7].tool) == ("frequency", 3, 3, "a")


def test_a_lease_turns_a_stuck_trace_to_waiting_and_keeps_the_verdict_of_its_start() -> None:
    # Three identical calls: stuck at call 2. Call 3 declares a lease (owner "approver", deadline ahead): waiting,
    # rule lease, from call 3. Call 4 repeats the call under the same lease: still waiting, and the verdict is the
    # one reached at call 3 (step 3), not a new one. Every verdict names the engine's normalizer version.
    engine = LoopEngine()
    state = engine.new_state()
    lease = Lease("approver", deadline=T0 + 1000)
    calls = [ToolCall("t", {"q": 1}, result="same", result_captured=True, start=T0 + i, end=T0 + i,
                      lease=lease if i >= 3 else None) for i in range(5)]
    out = [engine.observe(state, c).verdict for c in calls]
    assert (out[2].kind, out[2].rule) == ("stuck", "period")
    assert (out[3].kind, out[3].rule, out[3].step) == ("waiting", "lease", 3)
    assert out[4] is out[3]
    assert all(v.normalizer_version == engine.normalizer_version != "" for v in out)
    # A trace that waits from its very first call keeps the verdict of call 0 while the lease holds.
    state = engine.new_state()
    first, second = (engine.observe(state, ToolCall("t", {"q": 1}, result="same", result_captured=True,
                                                    start=T0 + i, end=T0 + i, lease=lease)).verdict for i in (0, 1))
    assert (first.kind, first.step) == ("waiting", 0) and second is first


def _verdicts(engine: LoopEngine, plan: str) -> list[tuple[str, str, int | None, int | None]]:
    state = engine.new_state()
    out = []
    for i, letter in enumerate(plan):
        v = engine.observe(state, ToolCall("t", {"q": letter}, result="same", result_captured=True, start=T0 + i,
                                           end=T0 + i)).verdict
        out.append((v.kind, v.rule, v.period, v.cycle_start))
    return out


def test_hysteresis_counts_stuck_verdicts_of_one_cycle_only() -> None:
    # Hysteresis 2: a stuck verdict shows once the same cycle (rule, period, start) was stuck twice in a row.
    # "ababab": call 5 is stuck by period 2 from call 0 (first time: held, still working). Call 6 (b) breaks the
    # period but b is now 4 times in the window: stuck by frequency from call 1, another cycle (held again). Call 7
    # (b): b b b from call 5, period 1 (another cycle: held). Call 8 (b): the same period-1 cycle from call 5 a
    # second time: stuck shows.
    out = _verdicts(LoopEngine(LoopGuardConfig(hysteresis=2)), "abababbbb")
    assert [o[0] for o in out] == ["working"] * 8 + ["stuck"]
    assert out[8] == ("stuck", "period", 1, 5)


def test_the_stops_after_a_nudge_carry_their_call_and_verdict() -> None:
    # Defaults: one nudge, then a stop. "aaa": stuck at call 2 -> nudge. Call 3 (a again): it went on after the
    # nudge -> stop at call 3, with call 3's verdict.
    engine = LoopEngine()
    state = engine.new_state()
    obs = [engine.observe(state, ToolCall("t", {"q": "a"}, result="same", result_captured=True, start=T0 + i,
                                          end=T0 + i)) for i in range(4)]
    assert obs[2].intervention is not None and obs[2].intervention.action == "nudge"
    stop = obs[3].intervention
    assert stop is not None and (stop.action, stop.step) == ("stop", 3) and stop.verdict is obs[3].verdict
    # "aaaba": the nudge at call 2, then b, with a result not seen before, ends the episode (working); at call 4 the window holds a four times
    # (calls 0, 1, 2, 4): stuck again, by frequency. The one nudge allowed is spent -> stop at call 4 ("again after
    # 1 nudge(s)"), with call 4's verdict.
    state = engine.new_state()
    obs = [engine.observe(state, ToolCall("t", {"q": q}, result=f"same {q}", result_captured=True, start=T0 + i,
                                          end=T0 + i)) for i, q in enumerate("aaaba")]
    assert obs[2].intervention is not None and obs[2].intervention.action == "nudge"
    assert obs[3].intervention is None and obs[3].verdict.kind == "working"
    stop = obs[4].intervention
    assert stop is not None and (stop.action, stop.step) == ("stop", 4) and stop.verdict is obs[4].verdict
    assert stop.message.endswith("again after 1 nudge(s)")


def test_a_new_trace_is_working_at_no_step() -> None:
    # Before any call: working, no rule, at step -1 (no call), under the engine's normalizer version.
    engine = LoopEngine()
    v = engine.new_state().verdict
    assert (v.kind, v.rule, v.step, v.normalizer_version) == ("working", "none", -1, engine.normalizer_version)


def test_the_signature_digest_is_the_keyed_digest_of_tool_and_canonical_arguments() -> None:
    # The emitted signature digest is HMAC-SHA256 (first 32 hex digits) under the configured key of the tool name,
    # the unit separator U+001F and the canonical arguments: here "search" + "\x1f" + '{"q":1}'.
    key = b"k" * 16
    engine = LoopEngine(LoopGuardConfig(signature_key=key))
    state = engine.new_state()
    obs = [engine.observe(state, ToolCall("search", '{"q": 1}', result="same", result_captured=True, start=T0 + i,
                                          end=T0 + i)) for i in range(3)]
    expected = hmac.new(key, b'search\x1f{"q":1}', hashlib.sha256).hexdigest()[:32]
    assert obs[2].signature_digest == expected and obs[2].verdict.signature_digest == expected


def test_a_call_repeated_without_its_lease_keeps_waiting() -> None:
    # Calls 0 and 1 declare the same lease; call 2, the very same call (same argument text) without a lease,
    # continues the wait: still waiting (the lease ends only when the trace moves on to another call).
    engine = LoopEngine()
    state = engine.new_state()
    lease = Lease("approver", deadline=T0 + 1000)
    out = [engine.observe(state, ToolCall("t", '{"q": 1}', result="pending", result_captured=True, start=T0 + i,
                                          end=T0 + i, lease=lease if i < 2 else None)).verdict for i in range(3)]
    assert [v.kind for v in out] == ["waiting"] * 3
    # Another call ends it: working.
    other = engine.observe(state, ToolCall("t", '{"q": 2}', result="x", result_captured=True, start=T0 + 3,
                                           end=T0 + 3))
    assert (other.verdict.kind, other.verdict.rule) == ("working", "none")
