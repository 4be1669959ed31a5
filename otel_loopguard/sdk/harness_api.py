"""The in-process decision API of ``LoopGuardSpanProcessor``: what the application asks and is told.

:class:`HarnessAPI` is the processor's base class (over :class:`~.host.SpanHost`): ``verdict``, ``check`` and
``resolve`` answer from the live assembler's judges, and from the memory of finished traces once a trace's root
ended; ``add_listener`` and the review handler are told every verdict event; ``force_flush`` and ``shutdown`` end
the SDK's span-processor interface. Every answer first judges what the processor's worker still holds, so it is
never stale. The processor (sdk/processor.py) sets ``_live`` and ``_deferred`` when it wires them; the callbacks it
gives the worker and the state store are here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider

from ..conventions.extract import Extractor
from ..conventions.live import EndedSpan, LiveAssembler, LiveTrace
from ..conventions.verdicts import VerdictEvent
from ..core.config import LoopGuardConfig
from ..core.model import NO_INTERVENTION, Intervention, ReviewRequest, Verdict, trace_id_of
from ..core.store import StateStore
from .emit import Emitter
from .host import Listener, SpanHost
from .worker import DeferredWork


class _Finished:
    """What :meth:`HarnessAPI.verdict` and :meth:`HarnessAPI.check` answer for a trace whose root has ended."""

    __slots__ = ("stop", "verdict")

    def __init__(self) -> None:
        self.verdict: Verdict | None = None
        self.stop: Intervention | None = None


class HarnessAPI(SpanHost):
    """Answers the harness from the live assembler's judges (see the module's docstring).

    Args:
        config: ``max_traces`` and ``trace_ttl_seconds`` bound the memory of finished traces.
        extractor: the convention table (for :class:`~.host.SpanHost`).
        emitter: where events go (for :class:`~.host.SpanHost`).
        review_handler: told each review asked for, once, as a :class:`ReviewRequest`.
    """

    # Set by the processor when it wires the assembler and the worker.
    _live: LiveAssembler
    _deferred: DeferredWork | None
    _logger_provider: LoggerProvider | None

    def __init__(self, config: LoopGuardConfig, extractor: Extractor, emitter: Emitter,
                 review_handler: Callable[[ReviewRequest], None] | None) -> None:
        SpanHost.__init__(self, extractor, emitter, config.max_traces)
        self._is_shutdown = False
        # Traces whose root ended: what verdict() and check() still answer for them.
        self._finished_traces: StateStore[_Finished] = StateStore(
            _Finished, config.max_traces, config.trace_ttl_seconds
        )
        if review_handler is not None:
            self._listeners.append(self._reviews(review_handler))

    def verdict(self, trace_id: int | str) -> Verdict | None:
        """The current verdict of a trace (an int, or 32 hex digits as trace UIs show it), or None when it is not
        tracked.

        A trace is tracked from its first tool or model span; after its local root ended, its last verdict is
        still answered (the most recent ``max_traces`` finished traces, within ``trace_ttl_seconds``).

        Raises:
            ValueError: ``trace_id`` is neither.
        """
        trace_id = trace_id_of(trace_id)
        self._drain()
        judge = self._live.judge_of(trace_id)
        if judge is not None:
            return judge.verdict
        finished = self._finished_traces.get(trace_id)
        return finished.verdict if finished is not None else None

    def check(self, trace_id: int | str | None = None) -> Intervention:
        """What the harness should do now for a trace (the current span's trace when None; an int, or 32 hex digits
        as trace UIs show it).

        Returns:
            ``stop`` once the trace was stopped (it stays stopped, also after its root ended), ``nudge`` right
            after the call that triggered one, else an intervention whose action is ``none``.
        """
        trace_id = trace.get_current_span().get_span_context().trace_id if trace_id is None else trace_id_of(trace_id)
        self._drain()
        judge = self._live.judge_of(trace_id)
        if judge is None:
            finished = self._finished_traces.get(trace_id)
            return finished.stop if finished is not None and finished.stop is not None else NO_INTERVENTION
        if judge.stop is not None:
            return judge.stop
        return judge.review or judge.last_intervention or NO_INTERVENTION

    def resolve(self, trace_id: int | str, approved: bool) -> Intervention:
        """Answer the review loopguard asked for a trace.

        Args:
            trace_id: the trace, as an int or as hex text (what trace UIs show).
            approved: True lets the run go on (a loop that continues is then stopped); False stops it now.

        Returns:
            The stop when declined; an intervention whose action is ``none`` when approved or when no review is
            pending for the trace.
        """
        trace_id = trace_id_of(trace_id)
        self._drain()
        told = self._live.resolve(trace_id, approved)
        self._drain()  # hands the held event to the SDK
        return told[0].observation.intervention if told else NO_INTERVENTION  # type: ignore[return-value]

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every transition and intervention.

        Deferred (the default), listeners run on the background thread, or on the thread that called
        :meth:`check`, :meth:`verdict` or :meth:`force_flush` when that drained the queue; inline, on the
        thread that ended the span.

        A listener that raises (even ``SystemExit``) is counted as a processor error; it never reaches the
        application and never stops the background thread.
        """
        self._listeners.append(listener)

    @property
    def errors(self) -> int:
        """Failures caught inside the hooks so far (after judging every queued span)."""
        self._drain()
        return self._fail.count

    @property
    def tracked_traces(self) -> int:
        """Traces (and conversations) judged now, not yet released (after judging every queued span)."""
        self._drain()
        return self._live.tracked()

    def _reviews(self, handler: Callable[[ReviewRequest], None]) -> Listener:
        """A listener that hands each review to ``handler``, once, as a :class:`ReviewRequest`."""

        def listen(event: VerdictEvent) -> None:
            review = event.intervention
            if review is None or review.action != "review":
                return
            judge = self._live.judge_of(event.trace_id)
            cost = judge.cost if judge is not None else None
            handler(ReviewRequest(
                trace_id=f"{event.trace_id:032x}", rule=review.rule, period=event.verdict.period,
                signature_digest=event.verdict.signature_digest or event.signature_digest, tool=event.tool,
                agent=event.agent, calls=event.steps,
                cost_usd=cost.usd if cost is not None and not cost.unpriced_tokens else None,
                message=review.message,
            ))

        return listen

    def _root_ended(self, root: EndedSpan) -> None:
        """A local root ended: its trace is released (what verdict() and check() answer for it is kept)."""
        trace_id = root.trace_id
        self._released(trace_id)
        judge = self._live.finished(trace_id, root)
        if judge is not None:
            slot = self._finished_traces.slot(trace_id, time.time())
            if slot is not None:
                slot.state.verdict = judge.verdict
                slot.state.stop = judge.stop

    def _drain(self) -> None:
        """Judge what the worker still holds, on this thread (a no-op inline)."""
        if self._deferred is not None:
            try:
                self._deferred.drain()
            except Exception as exc:  # noqa: BLE001
                self._fail("drain", exc)

    # -- flush and shutdown (the SDK's span-processor interface), and the worker's and the store's callbacks --------

    def shutdown(self) -> None:
        """Release every trace (recording its final metrics); later spans are ignored. Safe to call twice."""
        if self._is_shutdown:
            return
        if self._deferred is not None:
            self._deferred.shutdown()
        self._is_shutdown = True
        self._live.release_all()
        self._emitter.release(self._emit_failed)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Judge every queued span, then flush the logger provider, so pending verdict events leave now.

        Returns False when that did not finish within ``timeout_millis`` (a slow listener, a hung exporter); the
        background thread then finishes the judging later.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        if self._deferred is not None and not self._deferred.flush(timeout_millis / 1000):
            return False
        flush = getattr(self._logger_provider, "force_flush", None)
        if flush is None:
            return True
        try:
            return bool(flush(max(0, int((deadline - time.monotonic()) * 1000))))
        except Exception as exc:  # noqa: BLE001
            self._fail("force_flush", exc)
            return False

    def _drained(self) -> None:
        """At the end of a drain (inline: of each hook call): hand the tool calls counted since to the metric tally
        (once per tool name), and the events and histogram records held meanwhile to the SDK."""
        if self._live.tool_counts:
            self._emitter.count_tool_calls(self._live.take_counts())
        self._emitter.release(self._emit_failed)

    def _evicted(self, key: Hashable, record: LiveTrace, reason: str) -> None:
        """A record left the store early (full, or idle): the assembler records its figures, its root goes."""
        try:
            self._live.evicted(key, record, reason)
            if isinstance(key, int):
                self._roots.pop(key, None)
        except Exception as exc:  # noqa: BLE001
            self._fail("evict", exc)

    def _dropped(self) -> None:
        self._fail.count_only("queue_full")

    def _worker_failed(self, exc: BaseException) -> None:
        self._fail("worker", exc)

    def _emit_failed(self, exc: BaseException) -> None:
        self._fail("emit", exc)
