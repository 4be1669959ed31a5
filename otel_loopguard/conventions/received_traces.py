"""The received traces' lifecycle: which traces spans received in requests (``serve``) belong to, and when each ends.

:class:`ReceivedTraces` groups a request's spans by trace and judges each trace's batch under that trace's lock
(:class:`~.received.ReceivedTrace`). A trace is *open*, *being finished*, *finished and remembered* (a late batch
reopens it) or *forgotten*; it is finished when idle, when more than ``max_traces`` are open (evicted, least recently
active first), or on drain. The steps traces keep for re-judging are bounded per trace and in total (finished traces
give theirs up first). Locks: the map lock covers only the maps and the kept bytes; a trace's lock is always taken
before the map lock, never the other way round. The caller (``serve``'s table) keeps the counters and what it makes
of a finished trace. The rules in full: docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..core.engine import LoopEngine
from ..core.judge import TraceJudge
from ..core.store import TraceMap
from .nesting import CONVENTION_NESTING
from .received import ReceivedTrace, RequestReader, RequestTold, SpanBatch, TraceFinish
from .span import SpanRecord

__all__ = ["MAX_PEERS", "HeldReceived", "ReceivedTraces"]

R = TypeVar("R")

# Trace lifecycle (the map lock guards it): open; being finished; finished and remembered; forgotten.
_OPEN, _FINISHING, _DONE, _GONE = "open", "finishing", "done", "gone"

#: Senders remembered per trace, at most.
MAX_PEERS = 8


class HeldReceived(ReceivedTrace):
    """One received trace as :class:`ReceivedTraces` holds it: the received record, plus its lock, its place in the
    lifecycle, its last arrival time, its kept bytes as accounted and its senders."""

    __slots__ = ("kept", "key", "lock", "peers", "seen", "status")

    def __init__(self, trace_id: int, judge: TraceJudge, tenant: str = "") -> None:
        super().__init__(trace_id, judge, tenant)
        # The key is (tenant, trace id) when tokens name tenants.
        self.key: Any = (tenant, trace_id) if tenant else trace_id
        self.lock = threading.Lock()
        self.status = _OPEN
        self.seen = 0.0
        # Bytes of kept steps as last accounted in the total.
        self.kept = 0
        self.peers: list[str] | None = None


class ReceivedTraces:
    """The open and recently finished traces of received requests, judged incrementally.

    Args:
        engine: the engine (and configuration) to judge with; ``max_traces`` bounds the open and the remembered
            finished traces.
        max_trace_bytes: compact steps one trace keeps for re-judging, at most (estimated bytes).
        max_kept_bytes: compact steps all traces keep together, at most (estimated bytes).

    Counts go to the caller's dict under these names: ``spans``, ``late_spans`` (spans for a finished trace),
    ``evicted_traces`` (finished beyond ``max_traces``), ``inexact_traces`` (kept steps given up).
    """

    def __init__(self, engine: LoopEngine, max_trace_bytes: int, max_kept_bytes: int) -> None:
        self.engine = engine
        self._max_trace_bytes = max_trace_bytes
        self._max_kept = max_kept_bytes
        # The configuration's redaction placeholders, user-defined conventions and version keys apply.
        self._reader = RequestReader(engine.config)
        self._extractor = self._reader.extractor
        #: Whether finished traces' reports carry the exact run audit; applies to traces opened from then on.
        self.step_audit = False
        # Open traces, least recently active first, and the finished ones remembered (a late batch reopens them).
        max_open = engine.config.max_traces
        self._traces: TraceMap[Any, HeldReceived, HeldReceived] = TraceMap(max_open, remember=max_open)
        self._lock = threading.Lock()
        self._kept = 0
        # Traces that keep steps, the first to give them up first (finished ones, then least recently active).
        self._keeping: TraceMap[Any, HeldReceived, None] = TraceMap()

    def __len__(self) -> int:
        """Open traces now."""
        with self._lock:
            return len(self._traces)

    @property
    def kept_bytes(self) -> int:
        """Estimated bytes of the steps kept for re-judging now."""
        with self._lock:
            return self._kept

    def take(self, spans: Iterable[SpanRecord], now: float, counts: dict[str, int], peer: str = "",
             tenant: str = "") -> tuple[RequestTold, list[HeldReceived]]:
        """Group one request's spans by trace and judge each trace's batch (see :meth:`ReceivedTrace.take`).

        Returns:
            what the request's batches told, and the traces evicted beyond ``max_traces`` (to :meth:`finish`).
        """
        by_trace: dict[int, SpanBatch] = {}
        count = 0
        sort = self._reader.sort
        for span in spans:
            count += 1
            batch = by_trace.get(span.trace_id)
            if batch is None:
                batch = by_trace[span.trace_id] = SpanBatch()
            sort(batch, span)
        counts["spans"] += count
        told = RequestTold()
        evicted: list[HeldReceived] = []
        for trace_id, batch in by_trace.items():
            trace, reopened = self._open(trace_id, now, evicted, counts, tenant)
            try:
                if reopened:
                    counts["late_spans"] += batch.spans
                _note_peer(trace, peer)
                self._judge(trace, batch, reopened, counts, told)
            finally:
                trace.lock.release()
        return told, evicted

    def pop_idle(self, horizon: float) -> list[HeldReceived]:
        """The traces with no span since ``horizon``, now being finished (to :meth:`finish`)."""
        with self._lock:
            return self._closed(self._traces.pop_idle(horizon))

    def pop_all(self) -> list[HeldReceived]:
        """Every open trace, now being finished (drain)."""
        with self._lock:
            return self._closed(self._traces.pop_all())

    def finish(self, trace: HeldReceived, source: str,
               make: Callable[[HeldReceived, TraceFinish], R]) -> R | None:
        """Finish a trace being finished: judge it exactly and remember it (a late batch reopens it).

        ``make`` turns the finish into the caller's value under the trace's lock. None when a batch reopened the
        trace meanwhile (it goes on) or nothing is new since its last finish (a late batch of duplicates).
        """
        with trace.lock:
            with self._lock:
                if trace.status is not _FINISHING:
                    return None
                trace.status = _DONE
                for _, forgotten in self._traces.remember(trace.key, trace):
                    forgotten.status = _GONE
                    self._kept -= forgotten.kept
                    forgotten.kept = 0
                    self._keeping.pop(forgotten.key)
                if trace.key in self._keeping:
                    # A finished trace gives its kept steps up first when memory runs short. (A trace being given
                    # up by trim_kept is out of this map already, with its bytes still counted until then.)
                    self._keeping.touch(trace.key, last=False)
            done = trace.finish(source, self._extractor)
            return None if done is None else make(trace, done)

    def recent(self, limit: int, view: Callable[[HeldReceived], R]) -> list[R]:
        """``view`` of the ``limit`` most recently active open traces, oldest first, each under its lock (the judge
        builds its state on first use: never from two threads at once)."""
        with self._lock:
            traces = self._traces.values()[-limit:]
        seen = []
        for trace in traces:
            with trace.lock:
                seen.append(view(trace))
        return seen

    def trim_kept(self) -> int:
        """Give up kept steps beyond ``max_kept_bytes`` (finished traces first, then the least recently active);
        returns how many traces gave steps up."""
        inexact = 0
        while True:
            with self._lock:
                if self._kept <= self._max_kept or not self._keeping:
                    return inexact
                _, trace = self._keeping.pop_oldest()
            with trace.lock:
                freed = trace.judge.drop_steps() if trace.judge.keeps_steps else 0
                with self._lock:
                    self._kept -= trace.kept
                    trace.kept = 0
                    inexact += bool(freed)

    def _open(self, trace_id: int, now: float, evicted: list[HeldReceived], counts: dict[str, int],
              tenant: str) -> tuple[HeldReceived, bool]:
        """Find or open the batch's trace (reopening a finished one); returns it with its lock held, and whether it
        was reopened."""
        key: Any = (tenant, trace_id) if tenant else trace_id
        traces = self._traces
        while True:
            with self._lock:
                trace = traces.get(key) or traces.recall(key)
                if trace is None:
                    trace = HeldReceived(trace_id, TraceJudge(self.engine, nesting=CONVENTION_NESTING,
                                                              track_events=True, step_audit=self.step_audit), tenant)
                    evicted += self._evicted(traces.add(key, trace), counts)
            trace.lock.acquire()
            with self._lock:
                if trace.status is _GONE:
                    trace.lock.release()
                    continue  # forgotten meanwhile: look again (a new trace)
                reopened = trace.status is _DONE
                if trace.status is not _OPEN:
                    # Finished (or being finished) while this batch was on its way: it goes on.
                    traces.forget(key)
                    trace.status = _OPEN
                    evicted += self._evicted(traces.add(key, trace), counts)
                else:
                    traces.touch(key)
                trace.seen = now
                if key in self._keeping:
                    self._keeping.touch(key)
            return trace, reopened

    def _judge(self, trace: HeldReceived, batch: SpanBatch, reopened: bool, counts: dict[str, int],
               told: RequestTold) -> None:
        """Judge a batch of one trace (caller holds its lock), then bound the steps it keeps and account their
        bytes."""
        if trace.take(batch, reopened, self._extractor, told):
            judge = trace.judge
            if judge.kept_bytes > self._max_trace_bytes and judge.keeps_steps:
                judge.drop_steps()
                counts["inexact_traces"] += 1
            delta = judge.kept_bytes - trace.kept
            trace.kept = judge.kept_bytes
            if delta:
                with self._lock:
                    self._kept += delta
                    if trace.kept:
                        self._keeping.add(trace.key, trace)
                    else:
                        self._keeping.pop(trace.key)

    def _evicted(self, left: list[tuple[Any, HeldReceived]], counts: dict[str, int]) -> list[HeldReceived]:
        """Traces evicted beyond ``max_traces``, now being finished (caller holds the map lock)."""
        counts["evicted_traces"] += len(left)
        return self._closed(left)

    @staticmethod
    def _closed(left: list[tuple[Any, HeldReceived]]) -> list[HeldReceived]:
        """Traces that left the open ones, now being finished (caller holds the map lock)."""
        for _, trace in left:
            trace.status = _FINISHING
        return [trace for _, trace in left]


def _note_peer(trace: HeldReceived, peer: str) -> None:
    """Remember a sender of the trace, up to :data:`MAX_PEERS` (caller holds its lock)."""
    peers = trace.peers
    if peers is None:
        trace.peers = [peer]
    elif peer not in peers and len(peers) < MAX_PEERS:
        peers.append(peer)
