"""A trace's window of recent calls, with signatures and evidence computed only when two calls must be compared.

This is the engine's one optimisation of substance, kept in one place: most calls are never compared with
another call of the same signature, so their arguments are never canonicalised and their results never digested.
A call's arguments stay as the raw text until two calls of one tool must be compared and their one-int
fingerprints (:func:`~.signature.argument_fingerprint`) cannot tell them apart; its result stays raw until two
calls with one signature must be compared. Either the raw or the reduced form is kept, never both, so a window
holds at most ``LAZY_MAX_CHARS`` per call and field.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from msgspec import Struct

from .cache import BoundedCache
from .config import RetryPolicy
from .model import ToolCall
from .signature import FAILED, NUDGE_MARKER, UNKNOWN, Normalizer, argument_fingerprint

__all__ = ["LAZY_MAX_CHARS", "Call", "Repetition", "Signatures", "ToolRules", "Window"]

# Arguments and results up to this many characters are kept raw and canonicalised or digested only when two calls
# must be compared; longer ones are reduced at once.
LAZY_MAX_CHARS = 512
# Evidence of a call whose result is still raw (in ``Call.res``): digested on first comparison.
PENDING = "\x00pending"
# Texts with more brackets than this take the canonicaliser's depth-checked path (signature._MAX_DEPTH).
_MAX_BRACKETS = 64


class ToolRules:
    """One tool's effective settings, resolved once per tool name (a slotted class: read on every call).

    Attributes:
        exempt: the tool's calls are never judged as repetition.
        min_reps: cycles a periodic suffix must hold.
        limit: calls with one signature in the window that count as repetition (the frequency rule).
        retry: the retry policy of the tool.
        ignore: argument names dropped from the tool's signatures.
        kept, dropped: the canonicaliser's key rules for ``ignore`` (fingerprints use them).
        wait, wait_until: the tool's polling wait (seconds) and the result pattern that ends it, if any.
    """

    __slots__ = ("dropped", "exempt", "ignore", "kept", "limit", "min_reps", "retry", "wait", "wait_until")

    def __init__(self, exempt: bool, min_reps: int, limit: int, retry: RetryPolicy, ignore: frozenset[str],
                 key_rules: tuple[BoundedCache[str, None], Callable[[str], bool]], wait: float | None = None,
                 wait_until: re.Pattern[str] | None = None) -> None:
        self.wait = wait
        self.wait_until = wait_until
        self.exempt = exempt
        self.min_reps = min_reps
        self.limit = limit
        self.retry = retry
        self.ignore = ignore
        self.kept, self.dropped = key_rules


class Call(Struct, gc=False):
    """One call in a trace's window (a mutable struct built in C: this is the hot path).

    Not tracked by the garbage collector: nothing it holds refers back to it (the frequency detector's places are
    keys, not objects).

    Attributes:
        index: 0-based index of the call in its trace.
        tool: the tool name.
        rules: the tool's settings.
        raw: short argument text not canonicalised yet, else None.
        canon: the canonical arguments, once computed (at once for anything but a short string).
        res: a short result not digested yet, else None.
        evidence: ``failed``, ``p:<progress>``, ``r:<digest>``, None (missing) or :data:`PENDING` (``res`` holds it).
        incomplete: arguments not captured or no progress evidence.
        error: the error class, when the call failed.
        permanent: the call failed with an error class that retrying cannot fix.
        start, end: the call's times.
        shape: the fingerprint of the arguments (of ``raw``, else of ``canon``): None when not computed yet, False when
            they are not a JSON object.
        bucket, group: where the frequency detector counts the call (by fingerprint, by signature), once it does.
    """

    index: int
    tool: str
    rules: ToolRules
    raw: str | None
    canon: str | None
    res: Any
    evidence: str | None
    incomplete: bool
    error: str | None
    permanent: bool
    start: float | None
    end: float | None
    shape: int | bool | None = None
    bucket: Any = None
    group: Any = None


class Window:
    """The last ``size`` calls of one trace, and where the last incomplete and the last non-permanent call were.

    Per-trace state, held by :class:`~.engine.TraceState`; the engine appends each call (the oldest leaves a full
    window) and hands the one that left to the frequency detector.
    """

    __slots__ = ("calls", "last_incomplete", "last_not_permanent")

    def __init__(self, size: int) -> None:
        self.calls: deque[Call] = deque(maxlen=size)
        # Index of the last call without complete evidence, and of the last call that was not a permanent failure.
        self.last_incomplete = -(10**9)
        self.last_not_permanent = -(10**9)


class Repetition(Struct, gc=False):
    """What a repetition detector found: the repeated calls and what the decision order needs to know of them.

    A struct built in C (one per judged repetition, on every call of a loop). Not tracked by the garbage collector:
    its fields are calls (not tracked either), plain values, or a function that compares the repeated calls' evidence,
    none of which refers back to it.

    Attributes:
        rule: ``period`` or ``frequency``.
        period: the cycle length (None for frequency).
        repetitions: cycles (or calls, for frequency) in the repetition.
        cycle_start: index of the repetition's first call.
        subject: a call with the repeated signature (the cycle's first call), for the tool and the digest.
        incomplete: some repeated call lacks complete evidence.
        retry_applies: the retry policy may explain it (one call repeated).
        permanent: every repeated call failed with an error class that retrying cannot fix.
        _unchanged: the evidence repeated too, or the function that tells it (read :meth:`evidence_unchanged`).
    """

    rule: str
    period: int | None
    repetitions: int
    cycle_start: int
    subject: Call
    incomplete: bool
    retry_applies: bool
    permanent: bool
    _unchanged: bool | Callable[[], bool]

    def evidence_unchanged(self) -> bool:
        """Whether the repeated calls' evidence repeated too (computed on first ask when it costs digests)."""
        unchanged = self._unchanged
        if unchanged is True or unchanged is False:
            return unchanged
        result = self._unchanged = unchanged()
        return result


class Signatures:
    """Signatures and evidence of calls, computed lazily; one per engine, shared by every trace.

    Args:
        normalizer: the canonicaliser and result digester.
        max_parse: argument texts longer than this are never parsed for a fingerprint.
        is_permanent: whether an error class is one that retrying cannot fix.
    """

    __slots__ = ("_cached", "_canonicalize", "_is_permanent", "_max_parse", "_normalizer", "_result_evidence")

    def __init__(self, normalizer: Normalizer, max_parse: int, is_permanent: Callable[[str], bool]) -> None:
        self._normalizer = normalizer
        self._canonicalize = normalizer.arguments("")[0]
        self._cached = normalizer.cached_arguments()
        self._result_evidence = normalizer.result_evidence
        self._is_permanent = is_permanent
        self._max_parse = max_parse

    def canonical(self, call: Call) -> str:
        """The canonical arguments of a call (computed once, then kept instead of the raw text)."""
        canon = call.canon
        if canon is None:
            canon = call.canon = self._canonicalize(call.raw, call.rules.ignore)
            call.raw = None
        return canon

    def shape_of(self, call: Call) -> int | bool:
        """The fingerprint of a call's arguments (:func:`~.signature.argument_fingerprint`), taken once and kept on
        the call; False when there is none (not an object, or too long to parse here).

        Taken from the raw text while the call holds it, else from its canonical text: either is the fingerprint
        of the canonical text when that is an object, so calls compare whichever form they hold.
        """
        shape = call.shape
        if shape is None:
            raw = call.raw
            if raw is not None:
                text, parse = raw, True
            else:
                text = call.canon or ""
                # Only a canonical text starting with "{" holds an object (not a digest, scalar, array or marker).
                parse = text[:1] == "{"
            rules = call.rules
            shape = (argument_fingerprint(text, rules.kept, rules.dropped) if parse and len(text) <= self._max_parse
                     else None)
            shape = call.shape = False if shape is None else shape
        return shape

    def same_signature(self, a: Call, b: Call) -> bool:
        """Whether two calls of one tool have equal canonical arguments (canonicalising only when it must).

        Most pairs are told apart by their fingerprints (:meth:`shape_of`: two calls of one tool usually differ in a
        plain top-level argument), without canonical texts; with one call canonical and one raw, the raw one's
        canonical text is taken only when the canonicaliser's cache holds it (a loop's) or the fingerprints agree
        (a canonical call would else make every later call of its tool canonical too).
        """
        ca, cb = a.canon, b.canon
        if ca is not None and cb is not None:
            return ca == cb
        raw = a.raw
        # Equal raw text is equal canonical text (the tool, hence the ignore set, is the same).
        if raw is not None and raw == b.raw:
            return True
        if ca is not None or cb is not None:
            other = b if ca is not None else a
            # (The one not canonical holds its raw text.)
            text: str = other.raw  # type: ignore[assignment]
            hit = self._cached(text, other.rules.ignore)
            if hit is not None:
                other.canon, other.raw = hit, None
                return hit == (ca if ca is not None else cb)
        sa = a.shape
        if sa is None:
            sa = self.shape_of(a)
        if sa is not False:
            sb = b.shape
            if sb is None:
                sb = self.shape_of(b)
            if sb is not False and sa != sb:
                return False  # different fingerprints: surely different canonical texts
        return self.canonical(a) == self.canonical(b)

    def evidence(self, call: Call) -> str | None:
        """The evidence of a call (a pending result digested once)."""
        value = call.evidence
        if value is PENDING:
            value = call.evidence = self._result_evidence(call.res)
            call.res = None
        return value

    def same_evidence(self, a: Call, b: Call) -> bool:
        """Whether two calls' evidence is equal (equal raw results without digesting them)."""
        if a.evidence is PENDING and b.evidence is PENDING and a.res == b.res:
            return True
        return self.evidence(a) == self.evidence(b)

    def bucket(self, call: Call) -> int | str:
        """A value that equal signatures of one tool share (unequal ones mostly not): the frequency rule's first
        sort, the fingerprint of the canonical arguments when they are a JSON object, else the canonical text.

        The call's shape is that fingerprint (no text is built) when taken from a canonical object, or from a raw
        text the canonicaliser reads with msgspec (at most 64 brackets); else the canonical text is parsed.
        """
        shape = call.shape
        if shape is None:
            shape = self.shape_of(call)
        if shape is not False:
            raw = call.raw
            if raw is None:
                if call.canon[:1] == "{":  # type: ignore[index]
                    return shape
            elif len(raw) <= 2 * _MAX_BRACKETS or raw.count("{") + raw.count("[") <= _MAX_BRACKETS:
                # (a text msgspec read closes every bracket it opens, so one of at most 128 characters nests at
                # most 64 deep: its canonical text is an object, whichever path the canonicaliser takes)
                return shape
        canon = self.canonical(call)
        if canon[:1] == "{":
            rules = call.rules
            fingerprint = argument_fingerprint(canon, rules.kept, rules.dropped)
            if fingerprint is not None:
                return fingerprint
        return canon

    def call(self, index: int, call: ToolCall, rules: ToolRules) -> Call:
        """The window's record of ``call``: short argument and result strings kept raw, the rest reduced now."""
        raw = canon = None
        if not call.arguments_captured:
            canon = UNKNOWN
        else:
            args = call.arguments
            if isinstance(args, str) and len(args) <= LAZY_MAX_CHARS:
                raw = args
            else:
                canon = self._canonicalize({} if args is None else args, rules.ignore)

        # The evidence: "failed", the explicit fingerprint, missing (None), or a result digested when compared.
        res = None
        error = call.error
        permanent = False
        if error is not None:
            evidence: str | None = FAILED
            permanent = self._is_permanent(error)
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
                    evidence = PENDING
                else:
                    evidence, res = self._result_evidence(res), None
            else:
                evidence, res = self._result_evidence(res), None
        return Call(index, call.tool, rules, raw, canon, res, evidence, canon is UNKNOWN or evidence is None, error,
                    permanent, call.start, call.end)

    def one_evidence(self, calls: Iterable[Call]) -> bool:
        """Whether the calls' evidence, failures aside, takes at most one value."""
        raws: set[Any] = set()
        done: set[str | None] = set()
        for c in calls:
            value = c.evidence
            if value is PENDING:
                raws.add(c.res)
            elif value != FAILED:
                done.add(value)
        if len(raws) + len(done) <= 1:
            return True
        evidence = self.evidence
        return len({evidence(c) for c in calls if c.evidence != FAILED}) <= 1

    def key(self, call: Call) -> str:
        """The signature key of a call: tool and canonical arguments."""
        return call.tool + "\x1f" + self.canonical(call)
