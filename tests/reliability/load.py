"""Synthetic agent traffic for the memory checks (imported by ``test_bounded_memory`` and ``tests/benchmarks/memory.py``).

Each trace is a root span and two tool calls. Some roots never end (an agent that crashed or was killed), so
their state can only leave through loopguard's capacity limit or idle TTL. Span times are explicit and follow a
synthetic clock: dense stretches fill the store to its capacity, and a jump past the TTL makes every held trace
idle, so both eviction reasons occur without waiting for the wall clock.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Tracer

SECOND = 10**9
T0 = 1_767_225_600 * SECOND
TOOL = {"gen_ai.operation.name": "execute_tool"}


@dataclass
class TraceLoad:
    """Drives traces through a tracer, continuing its own synthetic clock across calls.

    Attributes:
        tracer: a tracer of the provider under test.
        end_every: only every n-th root ends; the others are left open forever (1: all end, 0: none ends).
        step_ns: synthetic time between two traces.
        ttl_jump_every: after this many traces the clock jumps by ``ttl_jump_ns`` (0: never).
        ttl_jump_ns: the size of that jump (larger than the processor's TTL).
    """

    tracer: Tracer
    end_every: int = 2
    step_ns: int = SECOND // 1000
    ttl_jump_every: int = 0
    ttl_jump_ns: int = 3_601 * SECOND
    now: int = T0
    done: int = 0

    def run(self, count: int) -> None:
        """Send ``count`` more traces."""
        tracer = self.tracer
        for _ in range(count):
            i = self.done
            self.done += 1
            if self.ttl_jump_every and i and i % self.ttl_jump_every == 0:
                self.now += self.ttl_jump_ns
            self.now += self.step_ns
            t = self.now
            root = tracer.start_span("agent run", start_time=t)
            parent = trace.set_span_in_context(root)
            for k in range(2):
                attrs: dict[str, Any] = {
                    **TOOL, "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": f'{{"query": "item {i}", "page": {k}}}',
                    "gen_ai.tool.call.result": f"{k} rows",
                }
                span = tracer.start_span("execute_tool search", context=parent, attributes=attrs, start_time=t)
                span.end(end_time=t + 1000)
            if self.end_every and i % self.end_every == 0:
                root.end(end_time=t + 2000)


def one_trace_calls(tracer: Tracer, count: int, start: int = 0) -> None:
    """End ``count`` tool spans in one open trace (the caller keeps the root): loops mixed with fresh calls."""
    span = tracer.start_span("agent run", start_time=T0)
    parent = trace.set_span_in_context(span)
    for i in range(start, start + count):
        # Every third stretch of 30 calls is a same-call loop; the rest are all distinct.
        args = '{"q": "poll"}' if (i // 30) % 3 == 0 else f'{{"q": "item {i}"}}'
        t = T0 + i * 1000
        tool = tracer.start_span("execute_tool", context=parent, start_time=t, attributes={
            **TOOL, "gen_ai.tool.name": "fetch", "gen_ai.tool.call.arguments": args,
            "gen_ai.tool.call.result": f"r{i % 5}"})
        tool.end(end_time=t + 500)


def rss_kib() -> int:
    """Resident set size now, KiB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except OSError:
        return peak_rss_kib()


def peak_rss_kib() -> int:
    """Peak resident set size of this process so far, KiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def deep_size(root: object) -> int:
    """Bytes of ``root`` and everything reachable from it (each object once; classes, modules and functions skipped).

    Used on one trace's state: a state whose size does not grow with the number of calls is bounded by the window.
    """
    import gc
    import sys
    import types

    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def live_instances(cls: type) -> int:
    """How many instances of ``cls`` (subclasses included) the garbage collector tracks now, after a full collection."""
    return live_counts(cls)[0]


def live_counts(*classes: type) -> tuple[int, ...]:
    """How many instances of each of ``classes`` (subclasses included) the garbage collector tracks now, after one
    full collection: one pass over the tracked objects for all of them (a pass costs seconds in a full suite run)."""
    import gc

    gc.collect()
    counts = [0] * len(classes)
    for o in gc.get_objects():
        for i, cls in enumerate(classes):
            if isinstance(o, cls):
                counts[i] += 1
    return tuple(counts)
