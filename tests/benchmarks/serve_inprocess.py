"""Benchmark of ``serve``'s work per span without sockets: decoding, against decoding, judging and emitting.

Run: ``.venv/bin/python tests/benchmarks/serve_inprocess.py [--traces 600] [--rounds 7] [--profile FILE]``.

The requests of ``serve.py`` (protobuf, ``BATCH`` spans, traces of 10 tool spans and an agent root, half looping)
are built once per round; then, alternately first, **decode** runs :func:`decode_proto_request` on each and
discards the spans, and **serve** runs what the receivers call for each (decoding and :meth:`Server.ingest`), then
finishes every trace (:meth:`Server.finish_all`, what the idle sweep does) and flushes the logger provider (the
events' export thread, to an exporter that drops them). CPU is the whole process's (every thread). Prints µs per
span of each and their ratio (median and range over the rounds), which isolates what ``serve.py``'s ratio
measures minus the server stack; ``--profile`` writes a cProfile of the serve variant's rounds.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.otlp.proto import decode_proto_request
from otel_loopguard.serve.server import Server, tune_gc
from tests.benchmarks.serve import make_bodies
from tests.benchmarks.serve_clients import summary
from tests.benchmarks.sinks import DropLogs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=600, help="traces per variant and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", help="write a cProfile of the serve variant to this file")
    args = parser.parse_args()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    server = Server(LoopGuardConfig(), grpc_address=None, http_address=None, idle=60,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    profiler = cProfile.Profile() if args.profile else None
    tune_gc()

    def decode(bodies: list[bytes]) -> None:
        for body in bodies:
            decode_proto_request(body)

    def serve(bodies: list[bytes]) -> None:
        if profiler is not None:
            profiler.enable()
        for body in bodies:
            server.ingest(decode_proto_request(body), "127.0.0.1")
        server.finish_all()
        logger_provider.force_flush()
        if profiler is not None:
            profiler.disable()

    variants = {"decode": decode, "serve": serve}
    per_span: dict[str, list[float]] = {name: [] for name in variants}
    offset = 1_000_000
    for round_no in range(args.rounds + 1):  # round 0 warms up and is not counted
        order = list(variants) if round_no % 2 else list(reversed(variants))
        for name in order:
            bodies, count = make_bodies(args.traces, offset, "http/protobuf")
            offset += args.traces
            cpu = time.process_time()
            variants[name](bodies)
            cpu = time.process_time() - cpu
            if round_no:
                per_span[name].append(cpu / count * 1e6)
    ratios = [d / s for d, s in zip(per_span["decode"], per_span["serve"])]
    print(f"{args.rounds} rounds of {args.traces} traces; CPU µs per span, median (min-max)")
    for name, values in per_span.items():
        print(f"  {name:7s} {summary(values, '{:.2f}')}")
    print(f"  speed serve/decode {summary(ratios, '{:.3f}')}")
    logger_provider.shutdown()
    meter_provider.shutdown()
    if profiler is not None:
        profiler.dump_stats(args.profile)


if __name__ == "__main__":
    main()
