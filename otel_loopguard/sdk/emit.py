"""Emission: verdict events (Logs API), span events and metrics, only on transitions and interventions.

Every string that leaves through here is bounded, for the processor and ``serve`` alike: tool, agent and
conversation names longer than :data:`MAX_NAME_CHARS` or holding a non-printable character (control, format,
line-separator characters, lone surrogates) are replaced by :func:`bounded_name` (a printable prefix and a digest of
the whole name, so distinct names stay distinct); event messages and bodies are cut at :data:`MAX_MESSAGE_CHARS`; the
only other strings are fixed words and digests. A span is data from the agent's process or, for ``serve``, from
anyone who can send one: a tool name of megabytes must not make every metric export exceed the 4 MiB gRPC limit nor
get a log batch (holding other traces' events) refused.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, SeverityNumber, get_logger
from opentelemetry.metrics import CallbackOptions, MeterProvider, get_meter
from opentelemetry.metrics import Observation as Measurement
from opentelemetry.trace import INVALID_SPAN, NonRecordingSpan, Span

from .._version import VERSION
from ..conventions import names as n
from ..conventions.verdicts import VerdictEvent
from ..core.escape import bounded_name, escaped
from ..core.model import STUCK
from ..core.outcome import TaskOutcome

_AGENT_TOOL_CALL_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
_STEP_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
_COST_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 25)
_DELAY_BUCKETS = (1, 2, 3, 4, 6, 8, 10, 15, 20, 30)
_DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

MAX_MESSAGE_CHARS = 1024

# The context every metric record is made in: no span. loopguard records a trace's figures after the trace ended,
# on the processor's background thread (or serve's), so the span current at that moment, if any, is an unrelated
# one (the application's span that called check() or force_flush()); with the SDK's default trace-based exemplar
# filter it would get the record as an exemplar, and each such record costs the exemplar reservoir's work
# (tests/benchmarks/emit.py, hist-in-span). A context holding the invalid span makes the filter decline at once and
# spares the SDK's lookup of the current context (an empty Context would not: the SDK treats it as "none given").
_NO_SPAN = trace.set_span_in_context(INVALID_SPAN)


def bounded_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` escaped (:func:`~otel_loopguard.core.escape.escaped`: one line, no control character) and cut to
    ``limit`` characters."""
    return escaped(text, limit)


class CappedNames:
    """Keeps a metric attribute low-cardinality: the first ``limit`` distinct names pass, the rest become ``_OTHER``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()

    def __call__(self, name: str | None) -> str:
        if not name:
            return ""
        name = bounded_name(name)
        if name in self._seen:
            return name
        # Unlocked on purpose: a race can admit a few names past the limit, never an unbounded number.
        if len(self._seen) < self._limit:
            self._seen.add(name)
            return name
        return n.OTHER_TOOL


class _Tally:
    """Counts by attribute values, reported by an observable instrument when the reader collects.

    A synchronous ``Counter.add`` costs the SDK several microseconds (attribute hashing, view matching,
    aggregation locks); tool calls, trace starts and transitions happen on the application's thread, so
    their counts are kept here for a dict update under a lock and handed to the SDK only at collection
    time. Values seen once are reported for good, also at zero, as a cumulative synchronous counter shows.
    """

    def __init__(self, *keys: str, lock: threading.Lock | None = None) -> None:
        self._keys = keys
        self._counts: dict[tuple[str, ...], int] = {}
        self._lock = lock or threading.Lock()

    def add(self, amount: int, *values: str) -> None:
        with self._lock:
            self._counts[values] = self._counts.get(values, 0) + amount

    def add_locked(self, amount: int, values: tuple[str, ...]) -> None:
        """:meth:`add` for a caller that holds this tally's lock (shared by the tallies one event changes)."""
        counts = self._counts
        counts[values] = counts.get(values, 0) + amount

    def observe(self, options: CallbackOptions) -> Iterable[Measurement]:
        with self._lock:
            counts = list(self._counts.items())
        keys = self._keys
        return [Measurement(count, dict(zip(keys, values))) for values, count in counts]


def event_attributes(event: VerdictEvent, normalizer_version: str) -> dict[str, Any]:
    """The attributes of the ``loopguard.verdict`` event and span event (no raw arguments or results)."""
    verdict = event.verdict
    previous = event.transition.previous if event.transition else verdict.kind
    attrs: dict[str, Any] = {
        n.LOOPGUARD_VERDICT: verdict.kind,
        n.LOOPGUARD_VERDICT_PREVIOUS: previous,
        n.LOOPGUARD_RULE: event.intervention.rule if event.intervention else verdict.rule,
        n.LOOPGUARD_STEPS: event.steps,
        n.LOOPGUARD_INTERVENTION: event.intervention.action if event.intervention else "none",
        n.LOOPGUARD_NORMALIZER_VERSION: normalizer_version,
    }
    if verdict.period is not None and verdict.kind == STUCK:
        # A period describes a stuck cycle only (as in audit's reports); a repetition judged uncertain or
        # retrying has its repetitions and cycle start, not a period to report.
        attrs[n.LOOPGUARD_PERIOD] = verdict.period
    if verdict.repetitions is not None:
        attrs[n.LOOPGUARD_REPETITIONS] = verdict.repetitions
    if verdict.cycle_start is not None:
        attrs[n.LOOPGUARD_CYCLE_START] = verdict.cycle_start
    digest = verdict.signature_digest or event.signature_digest
    if digest:
        attrs[n.LOOPGUARD_SIGNATURE] = digest
    if event.intervention is not None and event.intervention.message:
        attrs[n.LOOPGUARD_MESSAGE] = event_message(event)
    if verdict.step_kind != "tool":
        _add_step_kind(attrs, verdict)
    elif event.tool:
        attrs[n.GEN_AI_TOOL_NAME] = bounded_name(event.tool)
    if event.agent:
        attrs[n.GEN_AI_AGENT_NAME] = bounded_name(event.agent)
    if event.conversation:
        attrs[n.GEN_AI_CONVERSATION_ID] = bounded_name(event.conversation)
    if event.provisional:
        attrs[n.LOOPGUARD_PROVISIONAL] = True
    if event.tenant:
        attrs[n.LOOPGUARD_TENANT] = event.tenant
    # The trace's versions (conventions/versions.py: fixed names, values bounded and escaped there).
    attrs.update(event.versions)
    return attrs


#: Agent names of a cycle put on an event, at most.
MAX_EVENT_AGENTS = 8


def _add_step_kind(attrs: dict[str, Any], verdict: Any) -> None:
    """A hand-off, sub-agent or model-turn verdict: its kind, the cycle's agents (bounded), a degenerate output's
    chunk length and count (never its text). Tool-call events keep the attributes they always had."""
    attrs[n.LOOPGUARD_STEP_KIND] = verdict.step_kind
    if verdict.agents:
        attrs[n.LOOPGUARD_AGENTS] = tuple(bounded_name(a) for a in verdict.agents[:MAX_EVENT_AGENTS])
    if verdict.chunk_length is not None:
        attrs[n.LOOPGUARD_OUTPUT_CHUNK_LENGTH] = verdict.chunk_length
        attrs[n.LOOPGUARD_OUTPUT_CHUNK_COUNT] = verdict.repetitions


def event_message(event: VerdictEvent) -> str:
    """The event's text, bounded: the intervention's message with the tool's bounded name in place of its name,
    cut at :data:`MAX_MESSAGE_CHARS`; or ``trace is <verdict> (rule <rule>)``."""
    if event.intervention is None:
        return f"trace is {event.verdict.kind} (rule {event.verdict.rule})"
    message = event.intervention.message
    tool = event.tool
    if tool and tool in message and bounded_name(tool) != tool:
        message = message.replace(tool, bounded_name(tool))
    return bounded_text(message)


class Emitter:
    """Owns the logger and the instruments; every emission goes through the providers' own (batching) pipeline.

    Args:
        logger_provider: where events go; the global one when None.
        meter_provider: where metrics go; the global one when None.
        max_names: distinct tool and agent names used as metric attributes before ``_OTHER``.
        normalizer_version: stamped on every event.
    """

    def __init__(
        self,
        logger_provider: LoggerProvider | None,
        meter_provider: MeterProvider | None,
        max_names: int,
        normalizer_version: str,
    ) -> None:
        self._logger = get_logger(n.INSTRUMENTATION_SCOPE, VERSION, logger_provider=logger_provider)
        meter = get_meter(n.INSTRUMENTATION_SCOPE, VERSION, meter_provider=meter_provider)
        self._version = normalizer_version
        self.tool_names = CappedNames(max_names)
        self.agent_names = CappedNames(max_names)
        # Per version attribute: its distinct values, capped as tool names are (a metric attribute each).
        self._max_names = max_names
        self._versions: dict[str, CappedNames] = {}
        # Observable counters: these change on the application's thread per tool span, trace or transition. The
        # three an event changes share one lock, taken once per event.
        self._event_lock = threading.Lock()
        # Both event counters carry the step kind (tool, handoff, agent, model: four values at most).
        self._verdicts = _Tally(
            n.LOOPGUARD_VERDICT, n.LOOPGUARD_VERDICT_PREVIOUS, n.LOOPGUARD_RULE, n.GEN_AI_AGENT_NAME,
            n.LOOPGUARD_STEP_KIND, lock=self._event_lock,
        )
        self.verdicts = meter.create_observable_counter(
            n.METRIC_VERDICTS, [self._verdicts.observe], n.UNIT_TRANSITION, "Verdict transitions of traces"
        )
        self._interventions = _Tally(n.LOOPGUARD_INTERVENTION, n.LOOPGUARD_RULE, n.LOOPGUARD_STEP_KIND,
                                     lock=self._event_lock)
        self.interventions = meter.create_observable_counter(
            n.METRIC_INTERVENTIONS, [self._interventions.observe], n.UNIT_INTERVENTION,
            "Nudges and stops decided by loopguard",
        )
        self._active = _Tally(n.LOOPGUARD_VERDICT, lock=self._event_lock)
        self.active = meter.create_observable_up_down_counter(
            n.METRIC_TRACES_ACTIVE, [self._active.observe], n.UNIT_TRACE, "Traces tracked now, by current verdict"
        )
        self._tool_calls = _Tally(n.GEN_AI_TOOL_NAME)
        self.tool_calls = meter.create_observable_counter(
            n.METRIC_TOOL_CALLS, [self._tool_calls.observe], n.UNIT_TOOL_CALL, "Tool calls observed"
        )
        self.detection_delay = meter.create_histogram(
            n.METRIC_DETECTION_DELAY, n.UNIT_STEP, "Calls from a cycle's start to its stuck verdict",
            explicit_bucket_boundaries_advisory=_DELAY_BUCKETS,
        )
        self.agent_tool_calls = meter.create_histogram(
            n.METRIC_AGENT_TOOL_CALLS, n.UNIT_TOOL_CALL, "Tool calls per finished agent invocation",
            explicit_bucket_boundaries_advisory=_AGENT_TOOL_CALL_BUCKETS,
        )
        self.evicted = meter.create_counter(
            n.METRIC_TRACES_EVICTED, n.UNIT_TRACE, "Trace states evicted before their end"
        )
        self.errors = meter.create_counter(n.METRIC_PROCESSOR_ERRORS, n.UNIT_ERROR, "Failures inside loopguard's hooks")
        self.spans_unread = meter.create_counter(
            n.METRIC_SPANS_UNREAD, n.UNIT_SPAN, "GenAI spans that could not be read as tool calls, by reason"
        )
        self._finish_instruments(meter)
        # Emissions held for release(), when hold() was called: a deque, so that a thread appending while another
        # releases loses nothing (append and popleft are atomic).
        self._held: deque[tuple[Callable[..., None], tuple[Any, ...]]] | None = None
        self._attribute_sets: dict[tuple[str, str], dict[str, str]] = {}

    def hold(self) -> None:
        """From now on, keep events and histogram records until :meth:`release` instead of handing each to the SDK
        at once.

        The processor's background thread releases them at the end of every drain: the SDK's logger and histogram
        code then runs a batch at a time, with its code and data still in the CPU caches, instead of once between
        every few spans (measured in tests/benchmarks/README.md). Nothing is held longer than one drain, which
        ``check()``, ``verdict()`` and ``force_flush()`` end before they answer.
        """
        if self._held is None:
            self._held = deque()

    def release(self, on_error: Callable[[Exception], None] | None = None) -> None:
        """Hand every held event and histogram record to the SDK, in the order they happened; one that fails is
        reported to ``on_error`` (raised when None) and the others still go."""
        held = self._held
        if held:
            popleft = held.popleft
            while held:
                try:
                    action, args = popleft()
                except IndexError:
                    break
                try:
                    action(*args)
                except Exception as exc:
                    if on_error is None:
                        raise
                    on_error(exc)

    def _hold_or_run(self, action: Callable[..., None], *args: Any) -> None:
        held = self._held
        if held is None:
            action(*args)
        else:
            held.append((action, args))

    def count_tool_calls(self, counts: dict[str, int]) -> None:
        """Count tool calls by tool name (a batch counted by the caller)."""
        names = self.tool_names
        tally = self._tool_calls
        for tool, count in counts.items():
            tally.add(count, names(tool))

    def emit(self, event: VerdictEvent, target: Span | None) -> None:
        """Send the event, the span event on ``target`` (the agent or root span) and the metrics.

        The counts change at once; after :meth:`hold`, the log record, the span event and the histogram record wait
        for :meth:`release`.
        """
        attrs = event_attributes(event, self._version)
        t = event.transition
        intervention = event.intervention
        if t is not None or intervention is not None:
            agent = self.agent_names(event.agent) if t is not None else ""
            kind = event.verdict.step_kind
            with self._event_lock:
                if t is not None:
                    self._verdicts.add_locked(1, (t.verdict.kind, t.previous, t.verdict.rule, agent, kind))
                    self._active.add_locked(-1, (t.previous,))
                    self._active.add_locked(1, (t.verdict.kind,))
                if intervention is not None:
                    self._interventions.add_locked(1, (intervention.action, intervention.rule, kind))
        if t is not None and t.verdict.kind == STUCK and t.verdict.cycle_start is not None:
            self._hold_or_run(self.detection_delay.record, t.verdict.step - t.verdict.cycle_start + 1, None, _NO_SPAN)
        self._hold_or_run(self._send, event, attrs, target)

    def _send(self, event: VerdictEvent, attrs: dict[str, Any], target: Span | None) -> None:
        """The event's log record and span event."""
        stuck_or_stop = event.verdict.kind == STUCK or (
            event.intervention is not None and event.intervention.action == "stop"
        )
        context = None
        if event.span_context is not None:
            context = trace.set_span_in_context(NonRecordingSpan(event.span_context))
        body = attrs.get(n.LOOPGUARD_MESSAGE) or event_message(event)
        self._logger.emit(
            timestamp=event.timestamp_ns,
            context=context,
            severity_number=SeverityNumber.WARN if stuck_or_stop else SeverityNumber.INFO,
            severity_text="WARN" if stuck_or_stop else "INFO",
            body=body,
            attributes=attrs,
            event_name=n.EVENT_VERDICT,
        )
        if target is not None and target.is_recording():
            target.add_event(n.EVENT_VERDICT, attrs, event.timestamp_ns)

    def trace_started(self, verdict: str = "working") -> None:
        """A trace is tracked: a new one (working) or one resumed by late spans (its current verdict)."""
        self._active.add(1, verdict)

    def trace_finished(self, verdict: str, steps: int, cost: float | None, evicted: str | None = None) -> None:
        """A trace was released (its root ended) or evicted; record its final figures."""
        self._active.add(-1, verdict)
        if steps:
            self._hold_or_run(self.trace_steps.record, steps, None, _NO_SPAN)
        if cost is not None:
            self._hold_or_run(self.trace_cost.record, cost, None, _NO_SPAN)
        if evicted is not None:
            self.evicted.add(1, self._attributes(n.LOOPGUARD_EVICTION_REASON, evicted), _NO_SPAN)

    def _finish_instruments(self, meter: Any) -> None:
        """The instruments recorded once per finished trace: its steps and cost, its task outcome and figures."""
        def histogram(name: str, unit: str, description: str, buckets: tuple[float, ...]) -> Any:
            return meter.create_histogram(name, unit, description, explicit_bucket_boundaries_advisory=buckets)

        self.trace_steps = histogram(n.METRIC_TRACE_STEPS, n.UNIT_STEP, "Tool calls per finished trace", _STEP_BUCKETS)
        self.trace_cost = histogram(n.METRIC_TRACE_COST, n.UNIT_USD, "Model usage cost per finished trace",
                                    _COST_BUCKETS)
        self.task_outcomes = meter.create_counter(n.METRIC_TASK_OUTCOMES, n.UNIT_TASK, "Finished tasks, by outcome")
        self.task_turns = histogram(n.METRIC_TASK_TURNS, n.UNIT_TURN, "Model calls per finished task", _STEP_BUCKETS)
        self.task_tool_calls = histogram(n.METRIC_TASK_TOOL_CALLS, n.UNIT_TOOL_CALL, "Tool calls per finished task",
                                         _STEP_BUCKETS)
        self.task_tool_errors = histogram(n.METRIC_TASK_TOOL_ERRORS, n.UNIT_TOOL_CALL,
                                          "Failed tool calls per finished task", _STEP_BUCKETS)
        self.task_cost = histogram(n.METRIC_TASK_COST, n.UNIT_USD,
                                   "Model cost per finished task (every model call priced)", _COST_BUCKETS)
        self.task_duration = histogram(n.METRIC_TASK_DURATION, n.UNIT_SECOND, "Seconds per finished task",
                                       _DURATION_BUCKETS)

    def task_finished(self, task: TaskOutcome) -> None:
        """A task (trace) ended: count its outcome and record its figures, with the outcome, the agent's capped
        name and the trace's versions as attributes (all low-cardinality: version values bounded and capped)."""
        attrs: dict[str, str] = {n.LOOPGUARD_OUTCOME: task.outcome}
        agent = self.agent_names(task.agent)
        if agent:
            attrs[n.GEN_AI_AGENT_NAME] = agent
        for key, value in task.versions.items():
            attrs[key] = self._version_values(key)(bounded_name(value))
        self.task_outcomes.add(1, attrs, _NO_SPAN)
        run = self._hold_or_run
        run(self.task_turns.record, task.turns, attrs, _NO_SPAN)
        run(self.task_tool_calls.record, task.tool_calls, attrs, _NO_SPAN)
        run(self.task_tool_errors.record, task.tool_errors, attrs, _NO_SPAN)
        if task.cost_usd is not None:
            run(self.task_cost.record, task.cost_usd, attrs, _NO_SPAN)
        if task.duration_s is not None:
            run(self.task_duration.record, task.duration_s, attrs, _NO_SPAN)

    def _version_values(self, key: str) -> CappedNames:
        """The capped values of one version attribute (the names are few: fixed and configured, at most 15)."""
        capped = self._versions.get(key)
        if capped is None:
            capped = self._versions[key] = CappedNames(self._max_names)
        return capped

    def agent_finished(self, agent: str | None, tool_calls: int) -> None:
        """An agent invocation ended after ``tool_calls`` tool calls."""
        self._hold_or_run(self.agent_tool_calls.record, tool_calls,
                          self._attributes(n.GEN_AI_AGENT_NAME, self.agent_names(agent)), _NO_SPAN)

    def unread(self, reason: str, spans: int) -> None:
        """Count spans that could not be read as tool calls (reason: a constant of conventions/unread.py)."""
        self.spans_unread.add(spans, self._attributes(n.LOOPGUARD_UNREAD_REASON, bounded_name(reason)), _NO_SPAN)

    def error(self, error_type: str) -> None:
        """Count a failure inside a hook."""
        self.errors.add(1, self._attributes(n.ERROR_TYPE, bounded_name(error_type)), _NO_SPAN)

    def _attributes(self, key: str, value: str) -> dict[str, str]:
        """The one-attribute set ``{key: value}`` of a metric record, built once per distinct pair and reused (the
        SDK copies the attributes it keeps, so sharing one dict between records is safe). Every value here is
        low-cardinality already (capped names, fixed reasons, exception type names), so the cache stays small."""
        attributes = self._attribute_sets.get((key, value))
        if attributes is None:
            attributes = self._attribute_sets[(key, value)] = {key: value}
        return attributes
