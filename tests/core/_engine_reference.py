"""Test-only reference: the eager verdict engine as it was before lazy signatures and evidence (commit 6c381c0).

Kept as it was (names aside) so the differential test in ``test_engine_lazy.py`` can compare the optimised
engine with the straightforward one call by call. Do not optimise this file. Changes since, each a change of
behaviour made in both engines on purpose:

* hysteresis never delays a stuck cycle in which every call failed with a permanent error class (one that
  retrying cannot fix); the reference keeps every call's flag and looks at the cycles' calls directly;
* signatures and evidence come from its own canonicaliser (``_canonical_reference.py``, the standard library
  only), not from the production normaliser, so a normaliser bug shows up as a difference.
* it imports nothing from ``otel_loopguard`` (``test_reference_independence.py`` checks it): its calls, settings
  (with the documented defaults written out), verdicts and observations are its own dataclasses, so a bug in the
  product's model, configuration or retry arithmetic is not shared; the differential tests compare plain values.
  Model usage and cost are left out (the differential tests never fed them).

Original module docstring: the verdict engine: per-trace state, incremental detectors and the progress-aware decision order.

Every call costs O(max_period) plus, only when a signature repeats often enough
to be judged by frequency, one pass over the window. Nothing rescans history.
The engine itself holds no per-trace data: that lives in :class:`ReferenceState`,
which the caller owns (and locks, when several threads share it).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.core._canonical_reference import FAILED, UNKNOWN, ReferenceCanonicalizer, keyed

# Verdict kinds and rules, as the README names them (plain strings: compared with the product's as values).
WORKING, RETRYING, WAITING, STUCK, UNCERTAIN = "working", "retrying", "waiting", "stuck", "uncertain"
RULE_NONE, RULE_PERIOD, RULE_FREQUENCY, RULE_RETRY, RULE_LEASE = "none", "period", "frequency", "retry", "lease"
RULE_EVIDENCE, RULE_PROGRESS, RULE_STEP_LIMIT = "evidence", "progress", "step_limit"

# The documented defaults (README, Configuration), written out here rather than read from the product.
RETRYABLE_ERRORS = (
    "ratelimit", "rate_limit", "rate limit", "toomanyrequests", "too many requests", "429", "throttl", "timeout",
    "timed out", "deadlineexceeded", "unavailable", "503", "overloaded", "529", "connectionerror", "connection reset",
)
PERMANENT_ERRORS = (
    "permission", "forbidden", "accessdenied", "access denied", "403", "authentication", "unauthenticated",
    "unauthorized", "401", "notfound", "not_found", "not found", "nosuch", "404", "invalidargument",
    "invalid_argument", "invalid argument", "validationerror", "badrequest", "bad request", "unprocessable",
    "valueerror", "typeerror", "400", "422",
)
VOLATILE_KEYS = frozenset({
    "requestid", "seed", "updatedat", "timestamp", "uuid", "messageid", "callid", "checkpointid", "nonce", "ts",
    "currenttime", "toolcallid", "parentspanid", "idempotencykey", "cachebuster", "spanid", "traceid", "requesttime",
    "xrequestid", "correlationid", "checkpointns", "runid", "createdat", "randomseed",
})


@dataclass(frozen=True)
class RetryRules:
    """The retry policy: which error classes are retried, how often, and the backoff between attempts."""

    errors: tuple[str, ...] = RETRYABLE_ERRORS
    max_attempts: int = 3
    interval_seconds: float = 1.0
    backoff_rate: float = 2.0
    tolerance: float = 0.2

    def is_retryable(self, error: str) -> bool:
        return any(pattern.lower() in error.lower() for pattern in self.errors)

    def min_gap(self, retry_number: int) -> float:
        return self.interval_seconds * self.backoff_rate ** (retry_number - 1) * (1.0 - self.tolerance)


@dataclass(frozen=True)
class ToolRules:
    """Per-tool settings; None means "the trace-wide value"."""

    exempt: bool = False
    min_repetitions: int | None = None
    frequency_limit: int | None = None
    ignore_args: frozenset[str] = frozenset()
    retry: RetryRules | None = None


@dataclass(frozen=True)
class ReferenceConfig:
    """The settings the reference engine reads, with the documented defaults."""

    signature_key: bytes
    window: int = 10
    max_period: int = 3
    min_repetitions: int = 3
    frequency_limit: int = 3
    max_steps: int = 200
    hysteresis: int = 1
    stop_after: int = 1
    max_nudges: int = 1
    max_renewals: int = 3
    max_argument_bytes: int = 65_536
    permanent_errors: tuple[str, ...] = PERMANENT_ERRORS
    volatile_keys: frozenset[str] = VOLATILE_KEYS
    retry: RetryRules = RetryRules()
    tools: dict[str, ToolRules] = field(default_factory=dict)

    @property
    def digest_key(self) -> bytes:
        return self.signature_key


def from_plain(settings: dict[str, Any], config: Any = ReferenceConfig, tool: Any = ToolRules,
               retry: Any = RetryRules) -> Any:
    """A configuration from plain settings (``tools``: name -> dict, a tool's ``retry``: a dict).

    The reference's own types by default; the differential tests pass the product's classes to build its
    configuration from the same settings (this module still imports nothing from the product).
    """
    plain = dict(settings)
    tools = {}
    for name, rules in plain.pop("tools", {}).items():
        rules = dict(rules)
        if "retry" in rules:
            rules["retry"] = retry(**rules["retry"])
        tools[name] = tool(**rules)
    return config(tools=tools, **plain)


@dataclass(frozen=True)
class Lease:
    owner: str
    deadline: float


@dataclass(frozen=True)
class Call:
    """One tool call, as plain values (the fields of the README's tool call)."""

    tool: str
    arguments: Any = None
    arguments_captured: bool = True
    result: Any = None
    result_captured: bool = False
    error: str | None = None
    progress: str | None = None
    start: float | None = None
    end: float | None = None
    lease: Lease | None = None


@dataclass(frozen=True)
class Verdict:
    kind: str
    rule: str
    step: int
    period: int | None = None
    repetitions: int | None = None
    cycle_start: int | None = None
    tool: str | None = None
    signature_digest: str | None = None
    normalizer_version: str = ""


@dataclass(frozen=True)
class Transition:
    step: int
    previous: str
    verdict: Verdict


@dataclass(frozen=True)
class Intervention:
    action: str
    message: str
    rule: str
    step: int
    verdict: Verdict


@dataclass(frozen=True)
class Observation:
    index: int
    verdict: Verdict
    transition: Transition | None = None
    intervention: Intervention | None = None
    signature_digest: str | None = None


NORMALIZER_VERSION = "loopguard-norm/1"


class _Signature:
    """A call's tool and canonical arguments (UNKNOWN when not captured)."""

    __slots__ = ("canonical", "tool")

    def __init__(self, tool: str, canonical: str) -> None:
        self.tool = tool
        self.canonical = canonical

    @property
    def known(self) -> bool:
        return self.canonical != UNKNOWN

    @property
    def key(self) -> str:
        return self.tool + "\x1f" + self.canonical

# Kept per trace so a flapping trace cannot grow without bound.
MAX_TRANSITIONS = 1000


class _Entry:
    """One call in a trace's window (a slotted class: this is the hot path)."""

    __slots__ = ("end", "evidence", "exempt", "incomplete", "index", "key", "min_reps", "permanent", "start", "tool")

    def __init__(self, index: int, key: str, tool: str, evidence: str | None, incomplete: bool,
                 exempt: bool, min_reps: int, start: float | None, end: float | None, permanent: bool = False) -> None:
        self.index = index
        self.key = key
        self.tool = tool
        self.evidence = evidence
        self.incomplete = incomplete
        self.exempt = exempt
        self.min_reps = min_reps
        self.start = start
        self.end = end
        self.permanent = permanent


class ReferenceState:
    """Everything the engine remembers about one trace; memory is bounded by the window.

    Not thread-safe by itself: callers that share a state between threads hold
    :attr:`lock` (or their own lock) around :meth:`LoopEngine.observe`.
    """

    __slots__ = (
        "after_nudge",
        "counts",
        "episode_nudged",
        "ev_match",
        "extra",
        "index",
        "last_incomplete",
        "last_intervention",
        "lease",
        "lease_key",
        "lease_renewals",
        "match",
        "nudges",
        "permanent",
        "permanent_cycle",
        "recent",
        "retry_attempts",
        "retry_key",
        "retry_ok",
        "run_length",
        "run_start",
        "step_limit_hit",
        "stop",
        "stuck_cycle",
        "stuck_streak",
        "transition_count",
        "transitions",
        "verdict",
    )

    def __init__(self, window: int, max_period: int, normalizer_version: str) -> None:
        self.index = -1
        self.recent: deque[_Entry] = deque(maxlen=window)
        self.counts: dict[str, int] = {}
        self.match = [0] * (max_period + 1)
        self.ev_match = [0] * (max_period + 1)
        self.last_incomplete = -(10**9)
        self.run_start = 0
        self.run_length = 0
        self.retry_key: str | None = None
        self.retry_attempts = 0
        self.retry_ok = False
        self.lease: Lease | None = None
        self.lease_key: str | None = None
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
        # Room for the shell's bookkeeping (agent names, span contexts), so it needs no second map.
        self.extra: dict[str, Any] = {}
        # Every call's "failed with a permanent error" flag, and whether the last verdict is a cycle of such calls.
        self.permanent: list[bool] = []
        self.permanent_cycle = False

    @property
    def steps(self) -> int:
        """Tool calls observed so far."""
        return self.index + 1


class ReferenceEngine:
    """Judges tool calls of traces with the detectors and the progress-aware decision order.

    Args:
        config: the configuration; the engine is immutable and shared by all traces.
    """

    def __init__(self, config: ReferenceConfig) -> None:
        self.config = config
        cfg = self.config
        self.canonicalizer = ReferenceCanonicalizer(cfg.volatile_keys, cfg.max_argument_bytes)
        self.normalizer_version = NORMALIZER_VERSION
        self._key = cfg.digest_key
        self._digests: dict[str, str] = {}

    # -- public API --------------------------------------------------------

    def new_state(self) -> ReferenceState:
        """A fresh state for a new trace."""
        return ReferenceState(self.config.window, self.config.max_period, self.normalizer_version)

    def signature(self, call: Call) -> _Signature:
        """The action signature of ``call``."""
        if not call.arguments_captured:
            return _Signature(call.tool, UNKNOWN)
        settings = self.config.tools.get(call.tool)
        ignore = settings.ignore_args if settings else frozenset()
        return _Signature(call.tool, self.canonicalizer.canonical({} if call.arguments is None else call.arguments,
                                                                  ignore))

    def digest(self, key: str) -> str:
        """The keyed digest of a signature key (cached: loops repeat the same few)."""
        hit = self._digests.get(key)
        if hit is None:
            hit = keyed(self._key, key)
            if len(self._digests) >= 4096:
                self._digests.clear()
            self._digests[key] = hit
        return hit

    def observe(self, state: ReferenceState, call: Call, now: float | None = None) -> Observation:
        """Add ``call`` to the trace and judge it.

        Args:
            state: the trace's state (mutated).
            call: the tool call that just ended.
            now: observation time, epoch seconds (lease deadlines are compared with it);
                the call's end (or start) when None.

        Returns:
            The verdict after the call, and the transition and intervention it caused, if any.
        """
        cfg = self.config
        if now is None:
            now = call.end if call.end is not None else call.start
        sig = self.signature(call)
        key = sig.key
        evidence = self.canonicalizer.evidence(
            error=call.error, progress=call.progress, result=call.result, result_captured=call.result_captured
        )
        settings = cfg.tools.get(call.tool)
        index = state.index = state.index + 1
        incomplete = not sig.known or evidence is None
        if incomplete:
            state.last_incomplete = index
        permanent = call.error is not None and any(p.lower() in call.error.lower() for p in cfg.permanent_errors)
        state.permanent.append(permanent)
        entry = _Entry(
            index, key, call.tool, evidence, incomplete,
            settings.exempt if settings else False,
            (settings.min_repetitions if settings and settings.min_repetitions else cfg.min_repetitions),
            call.start, call.end, permanent,
        )

        recent = state.recent
        match, ev_match = state.match, state.ev_match
        for p in range(1, cfg.max_period + 1):
            if len(recent) >= p:
                prev = recent[-p]
                if prev.key == key:
                    match[p] += 1
                    # A failure is never progress, so it continues an unchanged-evidence run.
                    same = evidence is not None and (evidence == FAILED or prev.evidence == evidence)
                    ev_match[p] = ev_match[p] + 1 if same else 0
                    continue
            match[p] = ev_match[p] = 0

        if recent and recent[-1].key == key:
            state.run_length += 1
        else:
            state.run_start, state.run_length = index, 1

        self._track_retry(state, entry, call, settings.retry if settings and settings.retry else cfg.retry)
        self._track_lease(state, call.lease, key)

        if len(recent) == recent.maxlen:
            old = recent[0].key
            left = state.counts[old] - 1
            if left:
                state.counts[old] = left
            else:
                del state.counts[old]
        recent.append(entry)
        state.counts[key] = state.counts.get(key, 0) + 1

        verdict = self._decide(state, now)
        if state.verdict.kind == STUCK and verdict.kind == WORKING:
            # A stuck trace recovers only on evidence no other call in the window had (not a failure, not missing).
            seen = [e.evidence for e in recent if e is not entry]
            if evidence is None or evidence == FAILED or evidence in seen:
                verdict = dataclasses.replace(state.verdict, step=index)
            else:
                verdict = Verdict(WORKING, "recovered", index, tool=call.tool,
                                  normalizer_version=self.normalizer_version)
        return self._conclude(state, verdict, sig)

    def reevaluate(self, state: ReferenceState, now: float) -> Observation | None:
        """Judge the trace again at ``now`` without a new call (a lease may have expired).

        Returns:
            The observation when anything changed, else None.
        """
        if state.index < 0:
            return None
        verdict = self._decide(state, now)
        if state.verdict.kind == STUCK and verdict.kind == WORKING:
            return None  # no new call, so no new evidence: still stuck
        if verdict.kind == state.verdict.kind:
            # Nothing new happened: no call continued the loop, so the nudge/stop ladder must not advance
            # (the live processor, which judges only when a span ends, would not advance it either).
            return None
        return self._conclude(state, verdict, None)

    # -- detectors ---------------------------------------------------------

    @staticmethod
    def _track_retry(state: ReferenceState, entry: _Entry, call: Call, policy: RetryRules) -> None:
        if call.error is None or not policy.is_retryable(call.error):
            state.retry_key = None
            return
        recent = state.recent
        if state.retry_key == entry.key and recent and recent[-1].key == entry.key:
            state.retry_attempts += 1
            prev = recent[-1]
            prev_end = prev.end if prev.end is not None else prev.start
            if prev_end is None or call.start is None:
                # Without times a backoff cannot be shown, so the exception cannot apply.
                state.retry_ok = False
            elif call.start - prev_end < policy.min_gap(state.retry_attempts):
                state.retry_ok = False
            if state.retry_attempts > policy.max_attempts:
                state.retry_ok = False
        else:
            state.retry_key = entry.key
            state.retry_attempts = 0
            state.retry_ok = True

    @staticmethod
    def _track_lease(state: ReferenceState, lease: Lease | None, key: str) -> None:
        if lease is not None:
            held = state.lease
            if held is not None and held.owner == lease.owner:
                if lease.deadline > held.deadline:
                    state.lease_renewals += 1
                    state.lease = lease
            else:
                state.lease, state.lease_renewals = lease, 0
            state.lease_key = key
        elif state.lease is not None and key != state.lease_key:
            # Other work resumed: the wait is over.
            state.lease = None

    def _decide(self, state: ReferenceState, now: float | None) -> Verdict:
        state.permanent_cycle = False
        cfg = self.config
        index = state.index
        version = self.normalizer_version
        lease = state.lease
        if (
            lease is not None
            and lease.owner.strip()
            and now is not None
            and lease.deadline > now
            and state.lease_renewals <= cfg.max_renewals
        ):
            return Verdict(WAITING, RULE_LEASE, index, normalizer_version=version)

        recent = state.recent
        current = recent[-1]
        match, ev_match = state.match, state.ev_match
        for p in range(1, cfg.max_period + 1):
            if match[p] < p:  # not even two cycles: cheap reject before looking at tools
                continue
            cycle = [recent[-k] for k in range(1, p + 1)]
            min_reps = max(e.min_reps for e in cycle)
            if match[p] < (min_reps - 1) * p or all(e.exempt for e in cycle):
                continue
            run = match[p] + p
            first = recent[-p]
            base = dict(
                period=p, repetitions=run // p, cycle_start=index - run + 1, tool=first.tool,
                signature_digest=self.digest(first.key), normalizer_version=version,
            )
            if state.last_incomplete > index - min_reps * p:
                return Verdict(UNCERTAIN, RULE_EVIDENCE, index, **base)
            if p == 1 and self._retry_explains(state, current.key):
                return Verdict(RETRYING, RULE_RETRY, index, **base)
            if ev_match[p] >= (min_reps - 1) * p:
                # The cycles the verdict rests on: the last min_reps of them.
                state.permanent_cycle = all(state.permanent[index - min_reps * p + 1:index + 1])
                return Verdict(STUCK, RULE_PERIOD, index, **base)
            return Verdict(WORKING, RULE_PROGRESS, index, **base)

        settings = cfg.tools.get(current.tool)
        limit = settings.frequency_limit if settings and settings.frequency_limit else cfg.frequency_limit
        count = state.counts[current.key]
        if count < limit or current.exempt:
            return Verdict(WORKING, RULE_NONE, index, normalizer_version=version)
        same = [e for e in recent if e.key == current.key]
        base = dict(
            period=None, repetitions=count, cycle_start=same[0].index, tool=current.tool,
            signature_digest=self.digest(current.key), normalizer_version=version,
        )
        if any(e.incomplete for e in same):
            return Verdict(UNCERTAIN, RULE_EVIDENCE, index, **base)
        if self._retry_explains(state, current.key):
            return Verdict(RETRYING, RULE_RETRY, index, **base)
        if len({e.evidence for e in same if e.evidence != FAILED}) <= 1:
            state.permanent_cycle = all(e.permanent for e in same)
            return Verdict(STUCK, RULE_FREQUENCY, index, **base)
        return Verdict(WORKING, RULE_PROGRESS, index, **base)

    @staticmethod
    def _retry_explains(state: ReferenceState, key: str) -> bool:
        return state.retry_key == key and state.retry_ok

    # -- transitions, hysteresis, interventions -----------------------------

    def _conclude(self, state: ReferenceState, verdict: Verdict, sig: _Signature | None) -> Observation:
        cfg = self.config
        previous = state.verdict
        if verdict.kind == STUCK and previous.kind != STUCK and cfg.hysteresis > 1 and not state.permanent_cycle:
            cycle = (verdict.rule, verdict.period, verdict.cycle_start)
            state.stuck_streak = state.stuck_streak + 1 if state.stuck_cycle == cycle else 1
            state.stuck_cycle = cycle
            if state.stuck_streak < cfg.hysteresis:
                # Not yet: keep the previous kind until the same cycle has held long enough.
                verdict = Verdict(
                    previous.kind, previous.rule, verdict.step, previous.period, previous.repetitions,
                    previous.cycle_start, previous.tool, previous.signature_digest, previous.normalizer_version,
                )
        elif verdict.kind != STUCK:
            state.stuck_streak, state.stuck_cycle = 0, None

        transition = None
        if verdict.kind != previous.kind:
            transition = Transition(verdict.step, previous.kind, verdict)
            state.transitions.append(transition)
            state.transition_count += 1
        state.verdict = verdict

        intervention = self._intervene(state, verdict, sig)
        digest = self.digest(sig.key) if sig is not None and (transition or intervention) else None
        return Observation(verdict.step, verdict, transition, intervention, digest)

    def _intervene(self, state: ReferenceState, verdict: Verdict, sig: _Signature | None) -> Intervention | None:
        cfg = self.config
        state.last_intervention = None
        if state.stop is not None:
            return None
        if sig is not None and state.steps > cfg.max_steps and not state.step_limit_hit:
            state.step_limit_hit = True
            return self._stop(state, Intervention(
                "stop",
                f"loopguard stopped the run: {state.steps} tool calls, over the step budget of {cfg.max_steps}",
                RULE_STEP_LIMIT, verdict.step, verdict,
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
                verdict.rule, verdict.step, verdict,
            ))
        if state.nudges >= cfg.max_nudges:
            return self._stop(state, Intervention(
                "stop", f"loopguard stopped the run: {what}, again after {state.nudges} nudge(s)",
                verdict.rule, verdict.step, verdict,
            ))
        state.nudges += 1
        state.episode_nudged, state.after_nudge = True, 0
        nudge = Intervention(
            "nudge", f"You have {what}. Try a different approach.", verdict.rule, verdict.step, verdict
        )
        state.last_intervention = nudge
        return nudge

    @staticmethod
    def _stop(state: ReferenceState, stop: Intervention) -> Intervention:
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
