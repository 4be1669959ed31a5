"""``serve`` under sustained load with abuse interleaved: a soak (``tests/benchmarks/serve_soak.py``, which also
runs for a minute or longer) from loopback HTTP and gRPC load threads against an in-process ``Server`` with a
small ``max_traces`` and a short idle timeout.

The soak is bounded by requests, not seconds: every load client makes exactly ``REQUESTS`` valid requests, serve's
clock counts the load requests made (so ``IDLE`` is a number of requests) and memory is sampled at ``SAMPLES`` evenly
spaced request counts. Every figure asserted here is then the same on a loaded two-core CI machine as on a fast one
(a 5-second soak asserting what a fast machine does in 5 s failed 5 runs of 5 with three busy loops on two cores).

That the receivers bind 127.0.0.1 by default is pinned in ``tests/serve/test_errors.py::
test_binds_loopback_by_default`` (not repeated here).
"""

from __future__ import annotations

import pytest

from tests.benchmarks.serve_soak import MAX_BODY, SoakResult, abuses, run_soak

MAX_TRACES = 50
HTTP_CLIENTS, GRPC_CLIENTS = 3, 1
REQUESTS = 120  # per load client: 480 load requests, 4 new traces each
# A trace is idle after this many load requests without a span of it. In that time 4 * 40 = 160 traces start, so
# the 50-trace limit is what ends traces during the load (evictions); the idle timer ends those left open after it.
IDLE = 40
SAMPLES = 40  # one before the load, then one every 480 / 40 = 12 load requests
# Heap samples move by tens of KiB with the requests in flight. Between the two windows (fractions 0.4-0.65 and
# 0.75-1 of the run; medians 0.35 of the run apart) about 0.35 * 480 * 4 = 670 traces start and end and 0.35 * 480
# * 28 = 4 700 spans arrive, so a leak of 800 bytes per trace (tried: +548 KiB; a trace's state in serve is several
# KiB) or of 112 bytes per span would exceed this.
HEAP_TOLERANCE = 512 * 1024
# RSS also holds the allocator's fragmentation and thread stacks; it settles more slowly than the heap.
RSS_TOLERANCE = 8 * 2**20


@pytest.fixture(scope="module")
def soak() -> SoakResult:
    """One soak shared by the tests of this module."""
    return run_soak(requests=REQUESTS, max_traces=MAX_TRACES, idle=IDLE, samples=SAMPLES, warmup=0.4,
                    http_clients=HTTP_CLIENTS, grpc_clients=GRPC_CLIENTS)


def test_soak_answers_every_valid_request_and_still_judges_at_the_end(soak: SoakResult) -> None:
    """Every valid request over HTTP and gRPC was accepted and its tool calls judged, and a looping trace sent after
    the load is called stuck."""
    assert soak.errors == ()
    assert soak.requests["http"] == HTTP_CLIENTS * REQUESTS and soak.requests["grpc"] == GRPC_CLIENTS * REQUESTS
    # By hand: a trace has 6 tool spans, sent 3 and 3 in two requests of one client. A load request carries the
    # first halves of 4 new traces (12 tool spans) and, from the client's second request on, the second halves of
    # its previous 4 (12 more; the last request's are never sent): 4 clients * (120 * 12 + 119 * 12) = 11 472.
    # The valid request after each abuse carries one first half (3), and the final looping trace all 6.
    tool_spans = 11_472 + 3 * sum(soak.abuse.values()) + 6
    assert soak.requests["tool_spans"] == tool_spans
    # serve judged each tool call once: none lost, none counted twice, none taken from a refused request.
    assert soak.stats.tool_calls == tool_spans
    assert soak.final_stuck
    # Every verdict event left through the logger provider.
    assert soak.events == soak.exported > 0


def test_soak_keeps_open_traces_within_max_traces_and_counts_finishes(soak: SoakResult) -> None:
    """Open traces never exceed max_traces and the early finishes are counted as evictions; after the load the idle
    timer finishes the last trace."""
    assert max(s.stats.open_traces for s in soak.samples) == MAX_TRACES  # the limit was reached and held
    assert soak.stats.open_traces <= MAX_TRACES
    assert soak.stats.evicted_traces > 0
    assert soak.final_idle
    assert soak.stats.finished_traces > soak.stats.evicted_traces



def test_soak_counts_every_accepted_span(soak: SoakResult) -> None:
    """serve counted exactly the spans of the requests it accepted (none lost, none from refused requests)."""
    assert soak.stats.spans == soak.requests["spans"]


def test_soak_memory_does_not_grow_after_warm_up(soak: SoakResult) -> None:
    """Python heap and RSS medians of the last quarter are within tolerance of those right after warm-up."""
    assert soak.length == 480
    # Taken by the client whose request completed the count: at 0, 12, ..., 468 load requests, whatever the speed.
    assert [sample.at for sample in soak.samples] == [12 * k for k in range(SAMPLES)]
    # So the windows compared hold samples 16-26 (192-312 requests) and 30-39 (360-468).
    assert len(soak.window(0.4, 0.65)) == 11 and len(soak.window(0.75, 1.0)) == 10
    heap_early, heap_late, heap_growth = soak.growth("heap")
    rss_early, rss_late, rss_growth = soak.growth("rss")
    # The samples measure something: the traced heap moves while traces are held and released (comparing with
    # the very first sample was flaky: it can still hold the first requests' transient buffers).
    heaps = [sample.heap for sample in soak.samples]
    assert max(heaps) > min(heaps) and any(sample.stats.open_traces for sample in soak.samples)
    assert heap_growth <= HEAP_TOLERANCE, (heap_early, heap_late)
    assert rss_growth <= RSS_TOLERANCE, (rss_early, rss_late)


def test_soak_abuse_gets_otlp_errors_and_the_server_keeps_serving(soak: SoakResult) -> None:
    """Every kind of bad request was sent, answered with its OTLP status (checked as it happened), counted as
    rejected, and followed by a valid request that succeeded."""
    kinds = {a.name for a in abuses(MAX_BODY)}
    assert set(soak.abuse) == kinds
    assert all(count >= 1 for count in soak.abuse.values())
    # gRPC refuses an oversized message itself, before serve's handler sees (and counts) it.
    refused_by_serve = sum(soak.abuse.values()) - soak.abuse["grpc-oversized"]
    assert soak.stats.rejected_requests == refused_by_serve
