"""Replay decoded spans (:class:`~otel_loopguard.conventions.span.SpanRecord`) through a real SDK ``TracerProvider``.

Recorded OTLP traces become live SDK spans with the same names, attributes, parent/child structure, timestamps,
status and events: spans start in start-time order with an explicit ``start_time`` and their parent's context, and
end in end-time order with an explicit ``end_time``. So every span processor on the provider sees the ``on_start`` /
``on_end`` sequence the instrumentation produced, only compressed in wall time.

With a :class:`ReplayIdGenerator` on the provider the live spans also keep the recorded trace and span ids, so
emitted telemetry can be compared with the file by id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Span, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from otel_loopguard.conventions.span import SpanRecord

__all__ = ["ReplayIdGenerator", "ReplayResult", "replay_spans", "sdk_attribute_value"]


class ReplayIdGenerator(IdGenerator):
    """Hands out the ids the replayer asks for next, and random ids otherwise.

    The replayer is single-threaded per provider: it sets :attr:`next_span_id` / :attr:`next_trace_id` right before
    each ``start_span``, and the SDK consumes them inside that call.
    """

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.next_span_id: int | None = None
        self.next_trace_id: int | None = None

    def generate_span_id(self) -> int:
        """The requested span id once, else a random one."""
        value, self.next_span_id = self.next_span_id, None
        return value if value else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        """The requested trace id once, else a random one."""
        value, self.next_trace_id = self.next_trace_id, None
        return value if value else self._random.generate_trace_id()


@lru_cache(maxsize=1)
def _sdk_keeps_mappings() -> bool:
    # Older SDKs drop (with a warning) kvlist values that newer ones keep as dicts; probe once.
    from opentelemetry.attributes import BoundedAttributes

    return isinstance(BoundedAttributes(attributes={"probe": {"k": "v"}}).get("probe"), Mapping)


def sdk_attribute_value(value: Any) -> Any:
    """A value the SDK keeps as an attribute: kvlists (dicts) become JSON text when the SDK would reject them."""
    if isinstance(value, Mapping) and not _sdk_keeps_mappings():
        return json.dumps(value, sort_keys=False, default=repr)
    if isinstance(value, tuple) and any(isinstance(v, Mapping) for v in value) and not _sdk_keeps_mappings():
        return json.dumps(value, default=repr)
    return value


def _attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: sdk_attribute_value(v) for k, v in attrs.items()}


@dataclass(frozen=True)
class ReplayResult:
    """What a replay produced.

    Attributes:
        spans: recorded span id → the live SDK span that replayed it.
        trace_ids: recorded trace id → live trace id (equal with a :class:`ReplayIdGenerator`).
    """

    spans: dict[int, Span]
    trace_ids: dict[int, int]

    def live_span_id(self, recorded_span_id: int) -> int:
        """The live span id of a recorded span."""
        return self.spans[recorded_span_id].get_span_context().span_id


def _depths(records: list[SpanRecord]) -> dict[int, int]:
    parents = {r.span_id: r.parent_span_id for r in records}
    depths: dict[int, int] = {}
    for r in records:
        depth, node, seen = 0, r.span_id, set()
        while parents.get(node) in parents and node not in seen:
            seen.add(node)
            node = parents[node]  # type: ignore[assignment]
            depth += 1
        depths[r.span_id] = depth
    return depths


def replay_spans(
    provider: TracerProvider,
    records: Iterable[SpanRecord],
    *,
    ids: ReplayIdGenerator | None = None,
    scope: str = "span-replay",
) -> ReplayResult:
    """Start and end live spans on ``provider`` exactly as ``records`` describe them.

    Args:
        provider: the real SDK provider (with the processors under test).
        records: spans of one or more traces, in any order.
        ids: the provider's :class:`ReplayIdGenerator`, to keep recorded ids; fresh ids when None.
        scope: the instrumentation scope name of the replaying tracer.

    Returns:
        The live spans by recorded span id, and the trace id map.
    """
    records = list(records)
    tracer = provider.get_tracer(scope)
    by_id = {r.span_id: r for r in records}
    depths = _depths(records)

    # A parent must start before its child even when clocks disagree, so a child never starts before its parent.
    eff_start: dict[int, int] = {}
    for r in sorted(records, key=lambda r: depths[r.span_id]):
        parent = by_id.get(r.parent_span_id) if r.parent_span_id is not None else None
        start = r.start_ns
        if parent is not None and parent.span_id in eff_start:
            start = max(start, eff_start[parent.span_id])
        eff_start[r.span_id] = start

    # A parent is ended after its children even when clocks disagree: the JavaScript SDK cuts a start to the
    # millisecond and adds a precise duration, so a child can appear to end up to 1 ms after its parent, though it
    # was ended first. Only the order of the end calls follows this effective end; each span keeps its end time.
    eff_end: dict[int, int] = {r.span_id: max(r.end_ns, eff_start[r.span_id]) for r in records}
    for r in sorted(records, key=lambda r: -depths[r.span_id]):
        parent_id = r.parent_span_id
        if parent_id is not None and parent_id in eff_end and eff_end[parent_id] < eff_end[r.span_id]:
            eff_end[parent_id] = eff_end[r.span_id]

    # One timeline: at equal times ends go first (a sibling that ends as the next starts), deeper spans end first
    # and start last; a span's own end always follows its start.
    timeline: list[tuple[int, int, int, int, SpanRecord]] = []
    for r in records:
        start = eff_start[r.span_id]
        end = eff_end[r.span_id]
        depth = depths[r.span_id]
        timeline.append((start, 1, depth, 0, r))
        timeline.append((end, 0 if end > start else 2, -depth, 1, r))
    timeline.sort(key=lambda e: (e[0], e[1], e[2]))

    live: dict[int, Span] = {}
    trace_ids: dict[int, int] = {}
    for _, _, _, is_end, r in timeline:
        if is_end:
            span = live[r.span_id]
            if r.status_error:
                span.set_status(Status(StatusCode.ERROR, r.status_message or None))
            for name, time_ns, ev_attrs in r.events:
                span.add_event(name, _attributes(ev_attrs), time_ns)
            # The recorded end time; only the order of the end calls follows the effective end.
            span.end(end_time=max(r.end_ns, eff_start[r.span_id]))
            continue
        context = None
        if r.parent_span_id is not None:
            parent_live = live.get(r.parent_span_id)
            if parent_live is not None:
                context = trace.set_span_in_context(parent_live)
            else:
                # The parent is not in the input (another process): a remote parent keeps the trace id.
                remote = SpanContext(
                    trace_ids.get(r.trace_id, r.trace_id), r.parent_span_id, is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                )
                context = trace.set_span_in_context(NonRecordingSpan(remote))
        if ids is not None:
            ids.next_span_id = r.span_id
            ids.next_trace_id = r.trace_id
        span = tracer.start_span(
            r.name, context=context, attributes=_attributes(r.attributes), start_time=eff_start[r.span_id]
        )
        if ids is not None:
            ids.next_span_id = ids.next_trace_id = None
        live[r.span_id] = span  # type: ignore[assignment]
        trace_ids.setdefault(r.trace_id, span.get_span_context().trace_id)
    return ReplayResult(live, trace_ids)
