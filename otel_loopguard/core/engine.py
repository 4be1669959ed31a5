"""The verdict engine: the detectors applied in the declared decision order, then the intervention ladder.

After every tool call of a trace, in this order:

1. a valid dependency lease → ``waiting`` (:mod:`.lease`);
2. repetition in the window: the shortest periodic suffix (:mod:`.period`), else one call repeated
   ``frequency_limit`` times (:mod:`.frequency`); none → ``working``;
3. the repeated calls lack complete evidence → ``uncertain``;
4. the retry policy explains the repetition → ``retrying`` (:mod:`.retry`);
5. the evidence changed between the cycles → ``working`` (rule ``progress``);
6. otherwise → ``stuck``.

The :mod:`.ladder` then turns the verdict into what the trace shows (hysteresis), transitions, nudges and stops.
The detectors and the ladder hold no per-trace data: it all lives in :class:`TraceState`, which the caller owns
(the state store), and which is opaque. Calls are kept in a window whose signatures and evidence are computed only
when two calls must be compared (:mod:`.window`). Every call costs O(max_period) plus O(1) amortised for the
frequency rule's counts, whatever the window size. Nothing rescans history.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .cache import BoundedCache
from .config import LoopGuardConfig
from .cost import CostTotal, Usage
from .fastpath import quiet_observation
from .frequency import FrequencyDetector, FrequencyState
from .ladder import Ladder, LadderState
from .lease import LeaseDetector, LeaseState
from .model import (
    INTERVENTIONS,
    RETRYING,
    RULE_EVIDENCE,
    RULE_LEASE,
    RULE_NONE,
    RULE_OUTPUT_REPETITION,
    RULE_PROGRESS,
    RULE_RECOVERED,
    RULE_RETRY,
    STEP_TOOL,
    STUCK,
    UNCERTAIN,
    WAITING,
    WORKING,
    Intervention,
    Lease,
    Observation,
    StepKind,
    ToolCall,
    Verdict,
)
from .period import PeriodDetector, PeriodState
from .retry import RetryDetector, RetryState
from .signature import FAILED, ActionSignature, keyed_digest, make_normalizer
from .window import Call, Repetition, Signatures, ToolRules, Window

__all__ = ["AGENT_ARROW", "LoopEngine", "TraceState"]

#: Joins the agents of a hand-off or sub-agent step into its ``tool`` name: ``"triage → billing"``.
AGENT_ARROW = " → "

# Tools remembered with their settings, and signature digests (tool names and arguments come from spans).
_MAX_TOOLS = 4096
_MAX_DIGESTS = 4096


class TraceState:
    """Everything the engine remembers about one trace; memory is bounded by the window.

    Opaque: read it through the properties below, change it only through :class:`LoopEngine`. Not thread-safe
    by itself: callers that share a state between threads hold a lock around the engine's calls (the state
    store gives each trace one).
    """

    __slots__ = ("_canonical", "_cost", "_frequency", "_index", "_ladder", "_last_digest", "_lease", "_period",
                 "_polled", "_retry", "_window")

    def __init__(self, window: Window, period: PeriodState, frequency: FrequencyState, ladder: LadderState,
                 canonical: Callable[[Call], str]) -> None:
        self._index = -1
        self._window = window
        self._period = period
        self._frequency = frequency
        self._retry = RetryState()
        self._lease = LeaseState()
        # A polled tool's last call and when its run of identical results began (see LoopEngine._polling).
        self._polled: tuple[Call, float] | None = None
        self._ladder = ladder
        self._cost = CostTotal()
        # The last signature digest handed out: (canonical text, tool, digest); a loop asks for the same one.
        self._last_digest: tuple[str, str, str] | None = None
        # For ``counts`` only: a plain function, so the state references no engine or cache.
        self._canonical = canonical

    @property
    def steps(self) -> int:
        """Tool calls observed so far."""
        return self._index + 1

    @property
    def verdict(self) -> Verdict:
        """The trace's current verdict."""
        return self._ladder.verdict

    @property
    def stop(self) -> Intervention | None:
        """The stop decided for the trace, if any (it stays)."""
        return self._ladder.stop

    @property
    def review(self) -> Intervention | None:
        """The review asked for the trace and not resolved yet, if any."""
        return self._ladder.review

    @property
    def last_intervention(self) -> Intervention | None:
        """The nudge or stop decided after the latest call, if any."""
        return self._ladder.last

    @property
    def cost(self) -> CostTotal:
        """The trace's model usage cost so far."""
        return self._cost

    @property
    def transition_count(self) -> int:
        """Changes of verdict kind so far."""
        return self._ladder.transition_count

    @property
    def window_size(self) -> int:
        """Calls in the window now."""
        return len(self._window.calls)

    @property
    def counts(self) -> dict[str, int]:
        """Calls per signature key in the window (computed on demand: it canonicalises every call)."""
        out: dict[str, int] = {}
        canonical = self._canonical
        for call in self._window.calls:
            key = call.tool + "\x1f" + canonical(call)
            out[key] = out.get(key, 0) + 1
        return out


class LoopEngine:
    """Judges tool calls of traces with the detectors in the documented decision order, then the ladder.

    One engine class judges every kind of step: tool calls, and (through :meth:`for_kind`) hand-offs, sub-agent
    invocations and model turns, each kind in a sequence of its own. A step of another kind arrives as a
    :class:`ToolCall` whose ``tool`` names its signature's agents (``"triage → billing"`` for a hand-off, the agent
    for a model turn), whose arguments are its input (or answer) digest and whose result is its evidence.

    Args:
        config: the configuration; the engine is immutable and shared by all traces.
        step_kind: the kind of step this engine judges; stamped on its verdicts.
        review: a review handler is registered: the default ladder is nudge, review, stop.
    """

    #: Take the shortcut for a call that changes nothing (:func:`~.fastpath.quiet_observation`); False in tests,
    #: which check that both paths give the same observations, and in tests/benchmarks/fastpath.py.
    fast = True

    def __init__(self, config: LoopGuardConfig | None = None, step_kind: StepKind = STEP_TOOL, *,
                 review: bool = False) -> None:
        self.config = config or LoopGuardConfig()
        self.step_kind = step_kind
        self._review = review
        # The engines of the other kinds of step, made on first use (:meth:`for_kind`).
        self._kinds: dict[str, LoopEngine] = {step_kind: self}
        cfg = self.config
        self.normalizer = make_normalizer(cfg.volatile_keys, cfg.max_argument_bytes, dict(cfg.tools))
        self.normalizer_version = self.normalizer.version
        self._key = cfg.digest_key
        self._digests: BoundedCache[str, str] = BoundedCache(_MAX_DIGESTS)
        self._tools: BoundedCache[str, ToolRules] = BoundedCache(_MAX_TOOLS)
        self._signatures = signatures = Signatures(self.normalizer, cfg.max_argument_bytes, cfg.is_permanent)
        self._period = PeriodDetector(cfg.max_period, signatures)
        self._period_update = self._period.update
        self._new_call = signatures.call
        self._frequency = FrequencyDetector(signatures)
        self._frequency_add = self._frequency.add
        self._frequency_find = self._frequency.find
        self._retry = RetryDetector()
        self._lease = LeaseDetector(cfg.lease.max_renewals, cfg.lease.max_seconds)
        # The configured rungs, else nudge, review, stop when the caller handles reviews, else nudge, stop.
        rungs = cfg.interventions or (INTERVENTIONS if review else ("nudge", "stop"))
        self._ladder = Ladder(cfg.hysteresis, cfg.stop_after, cfg.max_nudges, cfg.max_steps, rungs)
        self._ladder_conclude = self._ladder.conclude
        self._working_start = Verdict(WORKING, RULE_NONE, -1, normalizer_version=self.normalizer_version,
                                      step_kind=step_kind)
        self._max_steps = cfg.max_steps
        self._window_size = cfg.window

    # -- public API --------------------------------------------------------

    def for_kind(self, step_kind: StepKind) -> LoopEngine:
        """The engine (same configuration and key) that judges steps of ``step_kind``; made once, then shared."""
        engine = self._kinds.get(step_kind)
        if engine is None:
            engine = self._kinds[step_kind] = LoopEngine(self.config, step_kind, review=self._review)
            engine._kinds = self._kinds
        return engine

    def new_state(self) -> TraceState:
        """A fresh state for a new trace."""
        return TraceState(Window(self.config.window), self._period.new_state(), self._frequency.new_state(),
                          self._ladder.new_state(self._working_start), self._signatures.canonical)

    def signature(self, call: ToolCall) -> ActionSignature:
        """The action signature of ``call``."""
        return self.normalizer.signature(call.tool, call.arguments, call.arguments_captured)

    def digest(self, key: str) -> str:
        """The keyed digest of a signature key (cached: loops repeat the same few)."""
        hit = self._digests.get(key)
        if hit is None:
            hit = self._digests.put(key, keyed_digest(self._key, key))
        return hit

    def observe(self, state: TraceState, call: ToolCall, now: float | None = None) -> Observation:
        """Add ``call`` to the trace and judge it.

        Args:
            state: the trace's state (mutated).
            call: the tool call that just ended.
            now: observation time, epoch seconds (lease deadlines are compared with it);
                the call's end (or start) when None.

        Returns:
            The verdict after the call, and the transition and intervention it caused, if any.
        """
        tool = call.tool
        rules = self._tools.get(tool)
        if rules is None:
            rules = self._rules(tool)
        index = state._index = state._index + 1
        entry = self._new_call(index, call, rules)
        window = state._window
        calls = window.calls

        # The detectors' updates, each against the calls before this one.
        period = state._period
        repeats = self._period_update(period, calls, entry)
        retry = state._retry
        if entry.error is not None or retry.on:
            previous = calls[-1] if calls else None
            self._retry.update(
                retry, entry.error, start=entry.start,
                previous_end=None if previous is None else previous.end if previous.end is not None else previous.start,
                same_as_previous=period.repeats_previous(), policy=rules.retry,
            )
        lease = state._lease
        declared = call.lease
        if declared is None and rules.wait is not None:
            declared = self._polling(state, call, entry, rules.wait, rules.wait_until)
        if declared is not None or lease.lease is not None:
            self._lease_update(lease, declared, entry)
        # The window: the oldest call leaves a full one.
        evicted = calls[0] if len(calls) == self._window_size else None
        calls.append(entry)
        if entry.incomplete:
            window.last_incomplete = index
        if not entry.permanent:
            window.last_not_permanent = index
        # No lease and no period: the decision order asks the frequency rule (False: not looked for).
        found = self._frequency_add(state._frequency, entry, evicted, not repeats and lease.lease is None)
        if found is None and self.fast:
            quiet = quiet_observation(state._ladder, index, self._max_steps)  # core/fastpath.py
            if quiet is not None:
                return quiet
        if now is None:
            now = call.end if call.end is not None else call.start
        return self._judge(state, now, repeats, entry, found)  # type: ignore[return-value]  # never None with a call

    def reevaluate(self, state: TraceState, now: float) -> Observation | None:
        """Judge the trace again at ``now`` without a new call (a lease may have expired).

        Returns:
            The observation when anything changed, else None.
        """
        if state._index < 0:
            return None
        return self._judge(state, now, any(state._period.match), None)

    def resolve(self, state: TraceState, approved: bool) -> Observation | None:
        """A reviewer's answer to the trace's pending review: the stop when declined, else None."""
        stop = self._ladder.resolve(state._ladder, approved, state._index)
        if stop is None:
            return None
        return Observation(state._index, state.verdict, None, stop, None)

    def add_usage(self, state: TraceState, model: str | None, usage: Usage) -> Observation | None:
        """Add one model call's usage to the trace's cost; returns a stop when the cost budget is exceeded."""
        config = self.config
        state._cost = cost = state._cost.add(model, usage, config.prices)
        if config.max_cost_usd is None:
            return None
        stop = self._ladder.cost_stop(state._ladder, cost.usd, config.max_cost_usd, state._index)
        if stop is None:
            return None
        return Observation(state._index, state.verdict, None, stop, None)

    # -- the decision order ------------------------------------------------

    def _judge(self, state: TraceState, now: float | None, repeats: bool, entry: Call | None,
               found: Repetition | bool | None = False) -> Observation | None:
        """Decide the verdict after the trace's latest call, then apply the ladder.

        Args:
            now: the observation time.
            repeats: the latest call matched a call up to ``max_period`` places before it (else no period can).
            entry: the call just observed; None when the trace is judged again without one, and then nothing is
                returned unless the verdict kind changed.
            found: the repetition found already (the frequency rule's answer when no lease is held and no period
                can match), or False when not looked for.
        """
        ladder = state._ladder
        previous = ladder.verdict
        index = state._index
        permanent = False
        # 1. A valid lease: waiting.
        if state._lease.lease is not None and self._lease.holds(state._lease, now):
            if previous.rule is RULE_LEASE and previous.step >= 0:
                verdict = previous
            else:
                verdict = Verdict(WAITING, RULE_LEASE, index, normalizer_version=self.normalizer_version,
                                  step_kind=self.step_kind)
        else:
            # 2. Repetition: the shortest periodic suffix, else a frequent call; none: working.
            if isinstance(found, bool):  # not looked for yet
                window = state._window
                calls = window.calls
                repetition = (repeats and self._period.find(state._period, calls, window.last_incomplete,
                                                            window.last_not_permanent)) or self._frequency_find(
                    state._frequency, calls[-1])
            else:
                repetition = found
            if repetition is None:
                # Nothing repeats: the common case, so the verdict object is reused while it holds.
                if previous.rule is RULE_NONE and previous.kind is WORKING and previous.step >= 0:
                    verdict = previous
                else:
                    verdict = Verdict(WORKING, RULE_NONE, index, normalizer_version=self.normalizer_version,
                                      step_kind=self.step_kind)
            else:
                verdict, permanent = self._repetition_verdict(state, repetition, index)
        if previous.kind is STUCK and verdict.kind is WORKING:
            verdict = self._recovery(state, previous, entry)
        if entry is None and verdict.kind == previous.kind:
            # Judged again and nothing new happened: no call continued the loop, so the nudge/stop ladder must not
            # advance (the live processor, which judges only when a span ends, would not advance it either).
            return None
        verdict = self._ladder_conclude(ladder, verdict, index, entry is not None, permanent)
        transition, intervention = ladder.transition, ladder.last
        if transition is None and intervention is None:
            return Observation(index, verdict)
        digest = self.digest(self._signatures.key(entry)) if entry is not None else None
        return Observation(index, verdict, transition, intervention, digest)

    def _repetition_verdict(self, state: TraceState, repetition: Repetition, index: int) -> tuple[Verdict, bool]:
        """Steps 3-6 of the decision order for a repetition: the verdict, and whether it is a permanent failure."""
        permanent = False
        # 3. Incomplete evidence: uncertain. 4. Explained by the retry policy: retrying.
        # 5. The evidence changed: working (progress). 6. Otherwise: stuck.
        if repetition.incomplete:
            kind, rule = UNCERTAIN, RULE_EVIDENCE
        elif repetition.retry_applies and state._retry.on and self._retry.explains(state._retry):
            # (a retry is explained only while a run of retryable failures is on: most loops never call it)
            kind, rule = RETRYING, RULE_RETRY
        elif repetition.evidence_unchanged():
            kind, rule = STUCK, repetition.rule
            permanent = repetition.permanent
        else:
            kind, rule = WORKING, RULE_PROGRESS
        subject = repetition.subject
        verdict = Verdict(kind, rule, index, period=repetition.period, repetitions=repetition.repetitions,
                          cycle_start=repetition.cycle_start, tool=subject.tool,
                          signature_digest=self._signature_digest(state, subject),
                          normalizer_version=self.normalizer_version, step_kind=self.step_kind,
                          agents=() if self.step_kind is STEP_TOOL else self._cycle_agents(state, repetition))
        return verdict, permanent

    def degenerate_output(self, state: TraceState, chunk_length: int, count: int) -> Observation:
        """Judge the trace's latest step (a model turn, just observed) stuck for a degenerate output.

        The output's tail repeats one chunk ``count`` times (at least ``output_repeat_limit``): the model is
        looping inside one answer, which no comparison of steps shows. The verdict goes through the ladder like
        any other (nudge, then stop); the chunk's length and count are kept, never its text.
        """
        index = state._index
        last = state._window.calls[-1]
        verdict = Verdict(STUCK, RULE_OUTPUT_REPETITION, index, period=1, repetitions=count, cycle_start=index,
                          tool=last.tool, signature_digest=self._signature_digest(state, last),
                          normalizer_version=self.normalizer_version, step_kind=self.step_kind,
                          agents=(last.tool,), chunk_length=chunk_length)
        ladder = state._ladder
        verdict = self._ladder_conclude(ladder, verdict, index, False, True)
        return Observation(index, verdict, ladder.transition, ladder.last, verdict.signature_digest)

    def _lease_update(self, lease: LeaseState, declared: Lease | None, entry: Call) -> None:
        """Account for one call in the trace's lease: a call declaring none continues the held one when it has the
        signature of the call that took it."""
        waited = lease.call
        continues = (declared is None and waited is not None and waited.tool == entry.tool
                     and self._signatures.same_signature(waited, entry))
        self._lease.update(lease, declared, continues=continues, call=entry)

    def _polling(self, state: TraceState, call: ToolCall, entry: Call, wait: float,
                 until: re.Pattern[str] | None) -> Lease | None:
        """The lease a polled tool's call holds: from the second of a run of identical calls with identical results,
        the tool is the owner and the deadline ``wait`` seconds after the run's first call. A different result starts
        a new run, and one matching ``until`` (the job is done) ends the wait: both release the tool's lease."""
        polled = state._polled
        signatures = self._signatures
        result = call.result
        done = until is not None and isinstance(result, str) and until.search(result) is not None
        if (not done and polled is not None and polled[0].tool == entry.tool
                and signatures.same_signature(polled[0], entry) and signatures.same_evidence(polled[0], entry)):
            state._polled = (entry, polled[1])
            return Lease(entry.tool, polled[1] + wait)
        self._lease.release(state._lease, entry.tool)
        start = entry.start if entry.start is not None else entry.end
        state._polled = None if done else (entry, start or 0.0)
        return None

    def _recovery(self, state: TraceState, stuck: Verdict, entry: Call | None) -> Verdict:
        """A stuck trace whose repetition ended: ``working`` (rule ``recovered``) on new evidence, else still stuck.

        After an intervention, a changed action proves nothing: an agent told to try something else can move to
        another call that achieves nothing new. The trace recovers only when its latest step brought evidence (a
        progress fingerprint or a result, not a failure) that no other call in the window had.
        """
        if entry is None:
            return stuck
        evidence = self._signatures.evidence
        new = evidence(entry)
        if new is None or new == FAILED:
            return stuck
        for other in state._window.calls:
            if other is not entry and evidence(other) == new:
                return stuck
        return Verdict(WORKING, RULE_RECOVERED, entry.index, tool=entry.tool,
                       normalizer_version=self.normalizer_version, step_kind=self.step_kind)

    # -- per-tool settings and digests ---------------------------------------

    @staticmethod
    def _cycle_agents(state: TraceState, repetition: Repetition) -> tuple[str, ...]:
        # The agents named by the repeated cycle's steps (a hand-off's "from → to", a model turn's agent).
        calls = state._window.calls
        first = calls[0].index
        period = repetition.period or 1
        names: dict[str, None] = {}
        for position in range(repetition.cycle_start - first, repetition.cycle_start - first + period):
            if 0 <= position < len(calls):
                for name in calls[position].tool.split(AGENT_ARROW):
                    names[name] = None
        return tuple(names)

    def _rules(self, tool: str) -> ToolRules:
        cfg = self.config
        settings = cfg.tools.get(tool)
        ignore = self.normalizer.arguments(tool)[1]
        rules = ToolRules(
            settings.exempt if settings else False,
            settings.min_repetitions if settings and settings.min_repetitions else cfg.min_repetitions,
            settings.frequency_limit if settings and settings.frequency_limit else cfg.frequency_limit,
            settings.retry if settings and settings.retry else cfg.retry,
            ignore,
            self.normalizer.key_rules(ignore),
            settings.wait_seconds if settings else None,
            re.compile(settings.wait_until) if settings and settings.wait_until else None,
        )
        return self._tools.put(tool, rules)

    def _signature_digest(self, state: TraceState, call: Call) -> str:
        # A loop asks for the digest of the same signature on every call: the trace remembers the last one,
        # matched by identity of the canonical text (equal raw arguments share the canonicaliser's cached text).
        canon = self._signatures.canonical(call)
        last = state._last_digest
        if last is not None and last[0] is canon and last[1] == call.tool:
            return last[2]
        digest = self.digest(call.tool + "\x1f" + canon)
        state._last_digest = (canon, call.tool, digest)
        return digest
