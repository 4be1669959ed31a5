"""The verdict engine: per-trace state, incremental detectors and the seed-004 decision order.

Every call costs O(max_period) plus, only when a signature repeats often enough
to be judged by frequency, one pass over the window. Nothing rescans history.
The engine itself holds no per-trace data: that lives in :class:`TraceState`,
which the caller owns (and locks, when several threads share it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .config import LoopGuardConfig, RetryPolicy
from .cost import CostTotal, Usage
from .model import (
    RETRYING,
    RULE_COST_LIMIT,
    RULE_EVIDENCE,
    RULE_FREQUENCY,
    RULE_LEASE,
    RULE_NONE,
    RULE_PERIOD,
    RULE_PROGRESS,
    RULE_RETRY,
    RULE_STEP_LIMIT,
    STUCK,
    UNCERTAIN,
    WAITING,
    WORKING,
    Intervention,
    Lease,
    Observation,
    ToolCall,
    Transition,
    Verdict,
)
from .signature import (
    FAILED,
    NUDGE_MARKER,
    UNKNOWN,
    ActionSignature,
    argument_fingerprint,
    keyed_digest,
    make_normalizer,
)

# Kept per trace so a flapping trace cannot grow without bound.
MAX_TRANSITIONS = 1000

# Arguments and results up to this many characters are kept raw and canonicalised or digested only when two calls
# must be compared; longer ones are reduced at once, so a window never holds more than this per call and field.
LAZY_MAX_CHARS = 512
# Tools remembered with their settings; tool names come from spans, so the map is cleared when full.
_MAX_TOOLS = 4096
# Evidence of a call whose result is still raw (in ``_Entry.res``): digested on first comparison.
_PENDING = "\x00pending"


class _Tool:
    """One tool's effective settings, resolved once per tool name (a slotted class: read on every call)."""

    __slots__ = ("dropped", "exempt", "ignore", "kept", "limit", "min_reps", "retry")

    def __init__(self, exempt: bool, min_reps: int, limit: int, retry: RetryPolicy, ignore: frozenset[str],
                 key_rules: tuple[set[str], Callable[[str], bool]]) -> None:
        self.exempt = exempt
        self.min_reps = min_reps
        self.limit = limit
        self.retry = retry
        self.ignore = ignore
        self.kept, self.dropped = key_rules


class _Entry:
    """One call in a trace's window (a slotted class: this is the hot path).

    The signature and the evidence are computed lazily: ``raw`` holds short string arguments until ``canon`` is
    needed (two calls of one tool compared and not told apart by ``shape``, the fingerprint of ``raw``), ``res``
    holds a short result until its digest is needed (two calls with one signature compared). Either raw or reduced
    form is kept, never both (the fingerprint is one int), so memory stays bounded.
    """

    __slots__ = ("canon", "end", "evidence", "incomplete", "index", "info", "raw", "res", "shape", "start", "tool")

    def __init__(self, index: int, tool: str, info: _Tool, raw: str | None, canon: str | None, res: Any,
                 evidence: str | None, incomplete: bool, start: float | None, end: float | None) -> None:
        self.index = index
        self.tool = tool
        self.info = info
        self.raw = raw
        # None: not computed yet; False: none (not a JSON object: only canonical texts can compare it).
        self.shape: int | bool | None = None
        self.canon = canon
        self.res = res
        self.evidence = evidence
        self.incomplete = incomplete
        self.start = start
        self.end = end


class TraceState:
    """Everything the engine remembers about one trace; memory is bounded by the window.

    Not thread-safe by itself: callers that share a state between threads hold
    :attr:`lock` (or their own lock) around :meth:`LoopEngine.observe`.
    """

    __slots__ = (
        "_canonical",
        "after_nudge",
        "cost",
        "cost_limit_hit",
        "episode_nudged",
        "ev_match",
        "extra",
        "index",
        "last_digest",
        "last_incomplete",
        "last_intervention",
        "lease",
        "lease_entry",
        "lease_renewals",
        "match",
        "nudges",
        "recent",
        "retry_attempts",
        "retry_ok",
        "retry_on",
        "step_limit_hit",
        "stop",
        "stuck_cycle",
        "stuck_streak",
        "tool_counts",
        "transition_count",
        "transitions",
        "verdict",
    )

    def __init__(self, window: int, max_period: int, normalizer_version: str,
                 canonical: Callable[[_Entry], str] | None = None) -> None:
        self.index = -1
        self.recent: deque[_Entry] = deque(maxlen=window)
        # Calls per tool in the window: a signature cannot repeat more often than its tool.
        self.tool_counts: dict[str, int] = {}
        self.match = [0] * (max_period + 1)
        self.ev_match = [0] * (max_period + 1)
        self.last_incomplete = -(10**9)
        # True when the last call was a retryable failure (its signature heads the retry run).
        self.retry_on = False
        self.retry_attempts = 0
        self.retry_ok = False
        self.lease: Lease | None = None
        self.lease_entry: _Entry | None = None
        self.lease_renewals = 0
        self.verdict = Verdict(WORKING, RULE_NONE, -1, normalizer_version=normalizer_version)
        self.transitions: deque[Transition] = deque(maxlen=MAX_TRANSITIONS)
        self.transition_count = 0
        self.stuck_streak = 0
        self.stuck_cycle: tuple[Any, ...] | None = None
        self.episode_nudged = False
        self.after_nudge = 0
        self.nudges = 0
        self.stop: Intervention | None = None
        self.last_intervention: Intervention | None = None
        self.step_limit_hit = False
        self.cost = CostTotal()
        self.cost_limit_hit = False
        # Room for the shell's bookkeeping (agent names, span contexts), so it needs no second map.
        self.extra: dict[str, Any] = {}
        self.last_digest: tuple[str, str, str] | None = None
        # The engine's canonicaliser (a plain function, so the state references no engine or cache).
        self._canonical = canonical

    @property
    def steps(self) -> int:
        """Tool calls observed so far."""
        return self.index + 1

    @property
    def counts(self) -> dict[str, int]:
        """Calls per signature key in the window (computed on demand: the engine counts per tool)."""
        out: dict[str, int] = {}
        for e in self.recent:
            canon = e.canon
            if canon is None:
                canon = self._canonical(e) if self._canonical is not None else "\x00raw:" + str(e.raw)
            key = e.tool + "\x1f" + canon
            out[key] = out.get(key, 0) + 1
        return out


class LoopEngine:
    """Judges tool calls of traces with the detectors and the seed-004 decision order.

    Args:
        config: the configuration; the engine is immutable and shared by all traces.
    """

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        self.config = config or LoopGuardConfig()
        cfg = self.config
        self.normalizer = make_normalizer(cfg.volatile_keys, cfg.max_argument_bytes, dict(cfg.tools))
        self.normalizer_version = self.normalizer.version
        self._key = cfg.digest_key
        self._digests: dict[str, str] = {}
        self._tools: dict[str, _Tool] = {}
        self._periods = range(1, cfg.max_period + 1)
        self._max_steps = cfg.max_steps
        canonical = self._canonical_args = self.normalizer.arguments("")[0]

        def canonical_of(entry: _Entry) -> str:
            canon = entry.canon
            if canon is None:
                canon = entry.canon = canonical(entry.raw, entry.info.ignore)
                entry.raw = None
            return canon

        max_parse = cfg.max_argument_bytes

        def shape_of(entry: _Entry) -> int | bool:
            shape = entry.shape
            if shape is None:
                raw: str = entry.raw  # type: ignore[assignment]
                # Text over the configured limit is never parsed; its canonical form is a digest of the text.
                info = entry.info
                shape = argument_fingerprint(raw, info.kept, info.dropped) if len(raw) <= max_parse else None
                shape = entry.shape = False if shape is None else shape
            return shape

        def differ(a: _Entry, b: _Entry) -> bool:
            # Surely different signatures, told without canonical texts: two calls of one tool usually differ in a
            # plain top-level argument (a query, an id, a page number), which their fingerprints see.
            sa = shape_of(a)
            if sa is False:
                return False
            sb = shape_of(b)
            return sb is not False and sa != sb

        result_evidence = self.normalizer.result_evidence

        def evidence_of(entry: _Entry) -> str | None:
            evidence = entry.evidence
            if evidence is _PENDING:
                evidence = entry.evidence = result_evidence(entry.res)
                entry.res = None
            return evidence

        self._canonical = canonical_of
        self._differ = differ
        self._evidence = evidence_of

    # -- public API --------------------------------------------------------

    def new_state(self) -> TraceState:
        """A fresh state for a new trace."""
        return TraceState(self.config.window, self.config.max_period, self.normalizer_version, self._canonical)

    def signature(self, call: ToolCall) -> ActionSignature:
        """The action signature of ``call``."""
        return self.normalizer.signature(call.tool, call.arguments, call.arguments_captured)

    def digest(self, key: str) -> str:
        """The keyed digest of a signature key (cached: loops repeat the same few)."""
        hit = self._digests.get(key)
        if hit is None:
            hit = keyed_digest(self._key, key)
            if len(self._digests) >= 4096:
                self._digests.clear()
            self._digests[key] = hit
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
        start, end = call.start, call.end
        if now is None:
            now = end if end is not None else start
        info = self._tools.get(tool)
        if info is None:
            info = self._tool(tool)

        # The signature: short string arguments stay raw until two calls of this tool must be compared.
        raw = canon = None
        if not call.arguments_captured:
            canon = UNKNOWN
        else:
            args = call.arguments
            if isinstance(args, str) and len(args) <= LAZY_MAX_CHARS:
                raw = args
            else:
                canon = self._canonical_args({} if args is None else args, info.ignore)

        # The evidence: "failed", the explicit fingerprint, missing (None), or a result digested when compared.
        res = None
        error = call.error
        if error is not None:
            evidence: str | None = FAILED
        elif call.progress is not None:
            evidence = "p:" + call.progress
        elif not call.result_captured:
            evidence = None
        else:
            res = call.result
            if isinstance(res, str):
                if NUDGE_MARKER in res:
                    res = res.split(NUDGE_MARKER, 1)[0]
                if len(res) <= LAZY_MAX_CHARS:
                    evidence = _PENDING
                else:
                    evidence, res = self.normalizer.result_evidence(res), None
            else:
                evidence, res = self.normalizer.result_evidence(res), None

        index = state.index = state.index + 1
        incomplete = canon is UNKNOWN or evidence is None
        if incomplete:
            state.last_incomplete = index
        entry = _Entry(index, tool, info, raw, canon, res, evidence, incomplete, start, end)

        recent = state.recent
        n = len(recent)
        match, ev_match = state.match, state.ev_match
        same_sig = self._same_signature
        same_prev = matched = False
        # The p-th latest call for each period p (fewer while the trace is short; a period longer than the trace
        # has never matched, so its counters are zero).
        for p, prev in zip(self._periods, reversed(recent)):
            # Different tools never match, whatever the arguments: most calls stop here, uncanonicalised.
            if prev.tool == tool and ((raw is not None and prev.raw == raw) or same_sig(prev, entry)):
                matched = True
                if p == 1:
                    same_prev = True
                match[p] += 1
                # A failure is never progress, so it continues an unchanged-evidence run.
                if evidence is None:
                    ev_match[p] = 0
                elif evidence == FAILED or (
                    (evidence is _PENDING and prev.evidence is _PENDING and prev.res == res)
                    or self._same_evidence(prev, entry)
                ):
                    ev_match[p] += 1
                else:
                    ev_match[p] = 0
                continue
            if match[p]:
                match[p] = ev_match[p] = 0

        if error is not None or state.retry_on:
            self._track_retry(state, entry, error, same_prev, info.retry)
        if call.lease is not None or state.lease is not None:
            self._track_lease(state, call.lease, entry)

        counts = state.tool_counts
        if n == recent.maxlen:
            old = recent[0].tool
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        recent.append(entry)
        count = counts[tool] = counts.get(tool, 0) + 1

        previous = state.verdict
        if (
            not matched
            and state.lease is None
            and previous.rule is RULE_NONE
            and previous.kind is WORKING
            and previous.step >= 0
            and index < self._max_steps
            and (count < info.limit or info.exempt or self._same_calls(state, entry, count) is None)
        ):
            # The common case, decided without _decide/_conclude: nothing repeats (no period matched, no
            # signature is frequent), the verdict stays the same working one, and nothing can be nudged or stopped.
            if state.stuck_cycle is not None:
                state.stuck_streak, state.stuck_cycle = 0, None
            state.last_intervention = None
            if state.stop is None:
                state.episode_nudged = False
                state.after_nudge = 0
            return Observation(index, previous)

        verdict = self._decide(state, now)
        return self._conclude(state, verdict, entry)

    def reevaluate(self, state: TraceState, now: float) -> Observation | None:
        """Judge the trace again at ``now`` without a new call (a lease may have expired).

        Returns:
            The observation when anything changed, else None.
        """
        if state.index < 0:
            return None
        verdict = self._decide(state, now)
        if verdict.kind == state.verdict.kind:
            # Nothing new happened: no call continued the loop, so the nudge/stop ladder must not advance
            # (the live processor, which judges only when a span ends, would not advance it either).
            return None
        return self._conclude(state, verdict, None)

    def add_usage(self, state: TraceState, model: str | None, usage: Usage) -> Observation | None:
        """Add one model call's usage to the trace's cost; returns a stop when the cost budget is exceeded."""
        state.cost = state.cost.add(model, usage, self.config.prices)
        limit = self.config.max_cost_usd
        if limit is None or state.cost_limit_hit or state.cost.usd <= limit:
            return None
        state.cost_limit_hit = True
        stop = Intervention(
            "stop",
            f"loopguard stopped the run: model usage cost ${state.cost.usd:.4f}, over the budget of ${limit:.4f}",
            RULE_COST_LIMIT,
            state.index,
            state.verdict,
        )
        self._stop(state, stop)
        return Observation(state.index, state.verdict, None, stop, None)

    # -- signatures and evidence, computed when first compared ---------------

    def _tool(self, tool: str) -> _Tool:
        cfg = self.config
        settings = cfg.tools.get(tool)
        info = _Tool(
            settings.exempt if settings else False,
            settings.min_repetitions if settings and settings.min_repetitions else cfg.min_repetitions,
            settings.frequency_limit if settings and settings.frequency_limit else cfg.frequency_limit,
            settings.retry if settings and settings.retry else cfg.retry,
            ignore := self.normalizer.arguments(tool)[1],
            self.normalizer.key_rules(ignore),
        )
        if len(self._tools) >= _MAX_TOOLS:
            self._tools.clear()
        self._tools[tool] = info
        return info

    def _same_signature(self, a: _Entry, b: _Entry) -> bool:
        """Whether two calls of one tool have equal canonical arguments."""
        ca, cb = a.canon, b.canon
        if ca is not None and cb is not None:
            return ca == cb
        raw = a.raw
        # Equal raw text is equal canonical text (the tool, hence the ignore set, is the same).
        if raw is not None and raw == b.raw:
            return True
        if ca is None and cb is None and self._differ(a, b):
            return False
        canonical = self._canonical
        return (ca if ca is not None else canonical(a)) == (cb if cb is not None else canonical(b))

    def _same_evidence(self, a: _Entry, b: _Entry) -> bool:
        """Whether two calls' evidence is equal (neither failed nor missing is known by the caller for ``b``)."""
        if a.evidence is _PENDING and b.evidence is _PENDING and a.res == b.res:
            return True
        evidence = self._evidence
        return evidence(a) == evidence(b)

    def _sig_key(self, entry: _Entry) -> str:
        return entry.tool + "\x1f" + self._canonical(entry)

    def _signature_digest(self, state: TraceState, entry: _Entry) -> str:
        # A loop asks for the digest of the same signature on every call: the trace remembers the last one,
        # matched by identity of the canonical text (equal raw arguments share the canonicaliser's cached text).
        canon = self._canonical(entry)
        last = state.last_digest
        if last is not None and last[0] is canon and last[1] == entry.tool:
            return last[2]
        digest = self.digest(entry.tool + "\x1f" + canon)
        state.last_digest = (canon, entry.tool, digest)
        return digest

    # -- detectors ---------------------------------------------------------

    @staticmethod
    def _track_retry(state: TraceState, entry: _Entry, error: str | None, same_prev: bool, policy: RetryPolicy) -> None:
        if error is None or not policy.is_retryable(error):
            state.retry_on = False
            return
        # The retry run continues when the previous call was a retryable failure with this signature.
        if state.retry_on and same_prev:
            state.retry_attempts += 1
            prev = state.recent[-1]
            prev_end = prev.end if prev.end is not None else prev.start
            if prev_end is None or entry.start is None:
                # Without times a backoff cannot be shown, so the exception cannot apply.
                state.retry_ok = False
            elif entry.start - prev_end < policy.min_gap(state.retry_attempts):
                state.retry_ok = False
            if state.retry_attempts > policy.max_attempts:
                state.retry_ok = False
        else:
            state.retry_on = True
            state.retry_attempts = 0
            state.retry_ok = True

    def _track_lease(self, state: TraceState, lease: Lease | None, entry: _Entry) -> None:
        if lease is not None:
            held = state.lease
            if held is not None and held.owner == lease.owner:
                if lease.deadline > held.deadline:
                    state.lease_renewals += 1
                    state.lease = lease
            else:
                state.lease, state.lease_renewals = lease, 0
            state.lease_entry = entry
        elif state.lease is not None:
            waited = state.lease_entry
            if waited is None or waited.tool != entry.tool or not self._same_signature(waited, entry):
                # Other work resumed: the wait is over.
                state.lease = None

    def _decide(self, state: TraceState, now: float | None) -> Verdict:
        cfg = self.config
        index = state.index
        previous = state.verdict
        lease = state.lease
        if (
            lease is not None
            and lease.owner.strip()
            and now is not None
            and lease.deadline > now
            and state.lease_renewals <= cfg.lease.max_renewals
        ):
            if previous.rule is RULE_LEASE and previous.step >= 0:
                return previous
            return Verdict(WAITING, RULE_LEASE, index, normalizer_version=self.normalizer_version)

        recent = state.recent
        current = recent[-1]
        match = state.match
        for p in self._periods:
            m = match[p]
            if m < p:  # not even two cycles: cheap reject before looking at tools
                continue
            if p == 1:
                min_reps, exempt = current.info.min_reps, current.info.exempt
            else:
                min_reps, exempt = 0, True
                for k in range(1, p + 1):
                    cycle_info = recent[-k].info
                    if cycle_info.min_reps > min_reps:
                        min_reps = cycle_info.min_reps
                    exempt = exempt and cycle_info.exempt
            if m < (min_reps - 1) * p or exempt:
                continue
            run = m + p
            first = recent[-p]
            if state.last_incomplete > index - min_reps * p:
                kind, rule = UNCERTAIN, RULE_EVIDENCE
            elif p == 1 and state.retry_on and state.retry_ok:
                kind, rule = RETRYING, RULE_RETRY
            elif state.ev_match[p] >= (min_reps - 1) * p:
                kind, rule = STUCK, RULE_PERIOD
            else:
                kind, rule = WORKING, RULE_PROGRESS
            return Verdict(kind, rule, index, period=p, repetitions=run // p, cycle_start=index - run + 1,
                           tool=first.tool, signature_digest=self._signature_digest(state, first),
                           normalizer_version=self.normalizer_version)

        info = current.info
        tool = current.tool
        limit = info.limit
        if info.exempt or state.tool_counts[tool] < limit:
            return self._working(previous, index)
        # The tool is frequent enough: only now compare signatures, among this tool's calls.
        same = self._same_calls(state, current, state.tool_counts[tool])
        if same is None:
            return self._working(previous, index)
        count = len(same)
        if any(e.incomplete for e in same):
            kind, rule = UNCERTAIN, RULE_EVIDENCE
        elif state.retry_on and state.retry_ok:
            kind, rule = RETRYING, RULE_RETRY
        elif self._one_evidence(same):
            kind, rule = STUCK, RULE_FREQUENCY
        else:
            kind, rule = WORKING, RULE_PROGRESS
        return Verdict(kind, rule, index, repetitions=count, cycle_start=same[0].index, tool=tool,
                       signature_digest=self._signature_digest(state, current),
                       normalizer_version=self.normalizer_version)

    def _same_calls(self, state: TraceState, current: _Entry, possible: int) -> list[_Entry] | None:
        """The window's calls with ``current``'s signature when at least its tool's frequency limit, else None.

        Args:
            possible: calls of ``current``'s tool in the window (an upper bound on the answer's length).
        """
        tool = current.tool
        limit = current.info.limit
        same = []
        raw = current.raw
        canon = current.canon
        differ = self._differ
        for e in state.recent:
            if e.tool == tool:
                if e is current or (raw is not None and e.raw == raw):
                    same.append(e)
                    continue
                other = e.canon
                if other is None and canon is None and differ(current, e):
                    equal = False
                else:
                    if other is None:
                        other = self._canonical(e)
                    if canon is None:
                        canon = self._canonical(current)
                    equal = other == canon
                if equal:
                    same.append(e)
                else:
                    # Stop as soon as too few calls can still share the signature.
                    possible -= 1
                    if possible < limit:
                        return None
        return same if len(same) >= limit else None

    def _working(self, previous: Verdict, index: int) -> Verdict:
        # Nothing repeats: the common case, so the verdict object is reused while it holds.
        if previous.rule is RULE_NONE and previous.kind is WORKING and previous.step >= 0:
            return previous
        return Verdict(WORKING, RULE_NONE, index, normalizer_version=self.normalizer_version)

    def _one_evidence(self, same: list[_Entry]) -> bool:
        """Whether the calls' evidence, failures aside, takes at most one value."""
        raws: set[Any] = set()
        done: set[str | None] = set()
        for e in same:
            evidence = e.evidence
            if evidence is _PENDING:
                raws.add(e.res)
            elif evidence != FAILED:
                done.add(evidence)
        if len(raws) + len(done) <= 1:
            return True
        evidence_of = self._evidence
        return len({evidence_of(e) for e in same if e.evidence != FAILED}) <= 1

    # -- transitions, hysteresis, interventions -----------------------------

    def _conclude(self, state: TraceState, verdict: Verdict, entry: _Entry | None) -> Observation:
        cfg = self.config
        previous = state.verdict
        index = state.index
        kind = verdict.kind
        if kind == STUCK:
            if previous.kind != STUCK and cfg.hysteresis > 1:
                cycle = (verdict.rule, verdict.period, verdict.cycle_start)
                state.stuck_streak = state.stuck_streak + 1 if state.stuck_cycle == cycle else 1
                state.stuck_cycle = cycle
                if state.stuck_streak < cfg.hysteresis:
                    # Not yet: keep the previous verdict until the same cycle has held long enough.
                    verdict, kind = previous, previous.kind
        elif state.stuck_cycle is not None or state.stuck_streak:
            state.stuck_streak, state.stuck_cycle = 0, None

        transition = None
        if kind != previous.kind:
            transition = Transition(index, previous.kind, verdict)
            state.transitions.append(transition)
            state.transition_count += 1
        state.verdict = verdict

        if state.stop is None and (kind == STUCK or state.episode_nudged or index >= cfg.max_steps):
            intervention = self._intervene(state, verdict, entry is not None)
        else:
            # Nothing to nudge or stop: what _intervene would do for a verdict that is not stuck.
            state.last_intervention = None
            intervention = None
            if state.stop is None:
                state.after_nudge = 0
        if transition is None and intervention is None:
            return Observation(index, verdict)
        digest = self.digest(self._sig_key(entry)) if entry is not None else None
        return Observation(index, verdict, transition, intervention, digest)

    def _intervene(self, state: TraceState, verdict: Verdict, new_call: bool) -> Intervention | None:
        cfg = self.config
        state.last_intervention = None
        if state.stop is not None:
            return None
        steps = state.index + 1
        if new_call and steps > cfg.max_steps and not state.step_limit_hit:
            state.step_limit_hit = True
            return self._stop(state, Intervention(
                "stop",
                f"loopguard stopped the run: {steps} tool calls, over the step budget of {cfg.max_steps}",
                RULE_STEP_LIMIT, state.index, verdict,
            ))
        if verdict.kind != STUCK:
            state.episode_nudged, state.after_nudge = False, 0
            return None
        what = _describe(verdict)
        if state.episode_nudged:
            state.after_nudge += 1
            if state.after_nudge < cfg.stop_after:
                return None
            return self._stop(state, Intervention(
                "stop", f"loopguard stopped the run: {what}, and it went on after a nudge",
                verdict.rule, state.index, verdict,
            ))
        if state.nudges >= cfg.max_nudges:
            return self._stop(state, Intervention(
                "stop", f"loopguard stopped the run: {what}, again after {state.nudges} nudge(s)",
                verdict.rule, state.index, verdict,
            ))
        state.nudges += 1
        state.episode_nudged, state.after_nudge = True, 0
        nudge = Intervention(
            "nudge", f"You have {what}. Try a different approach.", verdict.rule, state.index, verdict
        )
        state.last_intervention = nudge
        return nudge

    @staticmethod
    def _stop(state: TraceState, stop: Intervention) -> Intervention:
        state.stop = stop
        state.last_intervention = stop
        return stop


def _describe(verdict: Verdict) -> str:
    times = verdict.repetitions or 0
    if verdict.period and verdict.period > 1:
        return (
            f"repeated the same sequence of {verdict.period} tool calls (starting with {verdict.tool}) "
            f"{times} times with the same results"
        )
    return f"made the same {verdict.tool} call {times} times with the same result"
