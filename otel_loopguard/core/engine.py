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

from collections.abc import Callable

from .cache import BoundedCache
from .config import LoopGuardConfig
from .cost import CostTotal, Usage
from .frequency import FrequencyDetector, FrequencyState
from .ladder import Ladder, LadderState
from .lease import LeaseDetector, LeaseState
from .model import (
    RETRYING,
    RULE_EVIDENCE,
    RULE_LEASE,
    RULE_NONE,
    RULE_PROGRESS,
    RULE_RETRY,
    STUCK,
    UNCERTAIN,
    WAITING,
    WORKING,
    Intervention,
    Observation,
    ToolCall,
    Verdict,
)
from .period import PeriodDetector, PeriodState
from .retry import RetryDetector, RetryState
from .signature import ActionSignature, keyed_digest, make_normalizer
from .window import Call, Repetition, Signatures, ToolRules, Window

__all__ = ["LoopEngine", "TraceState"]

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
                 "_retry", "_window")

    def __init__(self, window: Window, period: PeriodState, frequency: FrequencyState, ladder: LadderState,
                 canonical: Callable[[Call], str]) -> None:
        self._index = -1
        self._window = window
        self._period = period
        self._frequency = frequency
        self._retry = RetryState()
        self._lease = LeaseState()
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

    Args:
        config: the configuration; the engine is immutable and shared by all traces.
    """

    #: Take the shortcut for a call that changes nothing (see :meth:`observe`); False only in tests, which check
    #: that both paths give the same observations.
    fast = True

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        self.config = config or LoopGuardConfig()
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
        self._lease = LeaseDetector(cfg.lease.max_renewals)
        self._ladder = Ladder(cfg.hysteresis, cfg.stop_after, cfg.max_nudges, cfg.max_steps)
        self._ladder_conclude = self._ladder.conclude
        self._working_start = Verdict(WORKING, RULE_NONE, -1, normalizer_version=self.normalizer_version)
        self._max_steps = cfg.max_steps
        self._window_size = cfg.window

    # -- public API --------------------------------------------------------

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
        if call.lease is not None or lease.lease is not None:
            waited = lease.call
            continues = (call.lease is None and waited is not None and waited.tool == entry.tool
                         and self._signatures.same_signature(waited, entry))
            self._lease.update(lease, call.lease, continues=continues, call=entry)
        # The window: the oldest call leaves a full one.
        evicted = calls[0] if len(calls) == self._window_size else None
        calls.append(entry)
        if entry.incomplete:
            window.last_incomplete = index
        if not entry.permanent:
            window.last_not_permanent = index
        # No lease and no period: the decision order asks the frequency rule (False: not looked for).
        found = self._frequency_add(state._frequency, entry, evicted, not repeats and lease.lease is None)
        if found is None:
            ladder = state._ladder
            if ladder.quiet and index < self._max_steps and self.fast:
                # The common case: nothing repeats while the trace is working with nothing pending on the ladder
                # (:attr:`LadderState.quiet`). The decision order keeps the working verdict, and the ladder
                # (:meth:`Ladder.conclude` of that same verdict) changes nothing: done here, building nothing.
                # ``fast = False`` takes the general path (tests check that both give the same observations).
                return Observation(index, ladder.verdict)
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

    def _repeated(self, state: TraceState, repetition: Repetition, index: int) -> tuple[Verdict, bool]:
        """The verdict on a repetition (steps 3-6 of the decision order), and whether a stuck one is permanent."""
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
                          normalizer_version=self.normalizer_version)
        return verdict, permanent

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
                verdict = Verdict(WAITING, RULE_LEASE, index, normalizer_version=self.normalizer_version)
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
                    verdict = Verdict(WORKING, RULE_NONE, index, normalizer_version=self.normalizer_version)
            else:
                verdict, permanent = self._repeated(state, repetition, index)
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

    # -- per-tool settings and digests ---------------------------------------

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
