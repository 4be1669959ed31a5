"""Benchmark: what an OTLP outage costs the agent's thread, and what reaches the backend afterwards.

Run it as a script (pytest does not collect it):

    .venv/bin/python tests/benchmarks/outage.py [--traces 300] [--calls 6]

The processor exports over OTLP/gRPC (SDK batch processors, 50 ms schedule delay, 10 s exporter timeout) straight
to a recording receiver on 127.0.0.1. Scenarios: healthy; nothing listening (a closed port); refusing (every
request answered UNAVAILABLE); stalling (every request held unanswered); flapping (the receiver stopped and started
three times). Each runs ``--traces`` stuck agent runs of ``--calls`` identical tool calls and reports, per tool
span on the agent's thread, median and p99 CPU time (``time.thread_time``) and wall time, the slowest span, the
verdict events emitted, how many reached the receiver within 20 s of recovery, and the SDK's own count of log
records dropped because its queue was full (``otel.sdk.processor.log.processed{error.type=queue_full}``, enabled
with ``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED=true``, which this script sets).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ["OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"] = "true"

import grpc

from tests.reliability.otlp import (
    Timings,
    agent_loop,
    build_otlp_pipeline,
    received_verdict_keys,
    verdict_keys,
)
from tests.support.otlp_receiver import RecordingOTLPReceiver, free_port


def _p(values: tuple[float, ...], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scenario(name: str, traces: int, calls: int) -> tuple[str, Timings, int, int, int, float]:
    """Run one scenario; returns (name, timings, emitted, delivered, dropped, shutdown seconds)."""
    receiver = RecordingOTLPReceiver().start()
    endpoint = "http://" + (f"127.0.0.1:{free_port()}" if name == "nothing listening" else receiver.endpoint)
    pipeline = build_otlp_pipeline(endpoint, max_queue_size=2048)
    if name == "refusing":
        receiver.fail_with(grpc.StatusCode.UNAVAILABLE)
    elif name == "stalling":
        receiver.pause()
    if name == "flapping":
        parts = []
        for _ in range(3):
            receiver.stop()
            parts.append(agent_loop(pipeline, traces // 6, calls))
            receiver.start()
            parts.append(agent_loop(pipeline, traces // 6, calls))
        timings = Timings(tuple(c for t in parts for c in t.cpu), tuple(w for t in parts for w in t.wall))
    else:
        timings = agent_loop(pipeline, traces, calls)
    receiver.fail_with(None)
    receiver.resume()
    expected = verdict_keys(pipeline)
    receiver.wait_for(lambda r: expected <= received_verdict_keys(r.log_records()), 20.0)
    delivered = len(expected & received_verdict_keys(receiver.log_records()))
    dropped = pipeline.dropped_logs()
    shutdown = pipeline.shutdown()
    receiver.stop()
    return name, timings, len(expected), delivered, dropped, shutdown


def main() -> None:
    """Run every scenario and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=300)
    parser.add_argument("--calls", type=int, default=6)
    args = parser.parse_args()
    print(f"{'scenario':<18} {'cpu med us':>10} {'cpu p99 us':>10} {'wall med us':>11} {'wall p99 us':>11} "
          f"{'max ms':>7} {'events':>7} {'delivered':>9} {'dropped':>7} {'shutdown s':>10}")
    for name in ("healthy", "nothing listening", "refusing", "stalling", "flapping"):
        name, t, emitted, delivered, dropped, shutdown = scenario(name, args.traces, args.calls)
        print(f"{name:<18} {statistics.median(t.cpu) * 1e6:>10.0f} {_p(t.cpu, 0.99) * 1e6:>10.0f} "
              f"{statistics.median(t.wall) * 1e6:>11.0f} {_p(t.wall, 0.99) * 1e6:>11.0f} {max(t.wall) * 1e3:>7.1f} "
              f"{emitted:>7} {delivered:>9} {dropped:>7} {shutdown:>10.2f}", flush=True)
    print("(nothing listening: the events have nowhere to go; the exporter logs each failed batch at WARNING "
          "from opentelemetry.exporter.otlp.proto.grpc.exporter)")


if __name__ == "__main__":
    main()
