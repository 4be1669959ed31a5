"""Benchmark of ``serve``'s work per span without sockets: decoding, against decoding, judging and emitting.

Run: ``.venv/bin/python tests/benchmarks/serve_inprocess.py [--traces 600] [--rounds 7] [--profile FILE]
[--before DIR]``.

The requests of ``serve.py`` (protobuf, ``BATCH`` spans, traces of 10 tool spans and an agent root, half looping)
are built once per round; then, alternately first, **decode** runs :func:`decode_proto_request` on each and
discards the spans, and **serve** runs what the receivers call for each (decoding and :meth:`Server.ingest`), then
finishes every trace (:meth:`Server.finish_all`, what the idle sweep does) and flushes the logger provider (the
events' export thread, to an exporter that drops them). CPU is the whole process's (every thread). Prints µs per
span of each and their ratio (median and range over the rounds), which isolates what ``serve.py``'s ratio
measures minus the server stack; ``--profile`` writes a cProfile of the serve variant's rounds. ``--before DIR``
adds a variant **before**: the same work through another revision's package, imported as ``otel_loopguard_before``
from DIR (made as for ``processor_pairs.py``), and prints serve/before per round.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    parser.add_argument("--before", help="a folder holding another revision's package as otel_loopguard_before")
    args = parser.parse_args()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    server = Server(LoopGuardConfig(), grpc_address=None, http_address=None, idle=60,
                    logger_provider=logger_provider, meter_provider=meter_provider)
    variants = {"decode": _decode, "serve": _ingest(server, decode_proto_request, logger_provider)}
    if args.before:
        sys.path.insert(0, args.before)
        before_provider = LoggerProvider()
        before_provider.add_log_record_processor(BatchLogRecordProcessor(DropLogs()))
        before = importlib.import_module("otel_loopguard_before")
        before_server = importlib.import_module("otel_loopguard_before.serve.server").Server(
            before.LoopGuardConfig(), grpc_address=None, http_address=None, idle=60,
            logger_provider=before_provider, meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
        before_decode = importlib.import_module("otel_loopguard_before.otlp.proto").decode_proto_request
        variants["before"] = _ingest(before_server, before_decode, before_provider)
    profiler = cProfile.Profile() if args.profile else None
    tune_gc()
    if profiler is not None:
        serve = variants["serve"]

        def profiled(bodies: list[bytes]) -> None:
            profiler.enable()
            serve(bodies)
            profiler.disable()

        variants["serve"] = profiled
    per_span: dict[str, list[float]] = {name: [] for name in variants}
    offset = 1_000_000
    for round_no in range(args.rounds + 1):  # round 0 warms up and is not counted
        # Rotating, its direction reversed every other round: no variant always follows the same one.
        names = list(variants) if round_no % 2 == 0 else list(reversed(variants))
        for j in range(len(names)):
            name = names[(round_no // 2 + j) % len(names)]
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
    if "before" in per_span:
        against = [s / b for s, b in zip(per_span["serve"], per_span["before"])]
        print(f"  serve/before per round {summary(against, '{:.3f}')}")
    logger_provider.shutdown()
    meter_provider.shutdown()
    if profiler is not None:
        profiler.dump_stats(args.profile)


def _decode(bodies: list[bytes]) -> None:
    for body in bodies:
        decode_proto_request(body)


def _ingest(server: Any, decode: Callable[[bytes], Any], logs: LoggerProvider) -> Callable[[list[bytes]], None]:
    """What the receivers do with each request, then the idle sweep's finish and a flush of the events."""

    def serve(bodies: list[bytes]) -> None:
        for body in bodies:
            server.ingest(decode(body), "127.0.0.1")
        server.finish_all()
        logs.force_flush()

    return serve


if __name__ == "__main__":
    main()
