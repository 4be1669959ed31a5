"""The demo through the shipped ``agent.yaml`` into real backends: Jaeger v2 (traces), Prometheus (metrics, with the
documented ``collector-config/prometheus/prometheus.yml``) and a recording Loki stand-in (logs).

``otel-loopguard demo`` runs as a user runs it, in its own process exporting OTLP to the Collector
(``OTEL_EXPORTER_OTLP_ENDPOINT``); the Collector runs the shipped file with its listeners moved to free ports and
its backend variables pointing at the backends above (the Tempo variable at a recording stand-in). Jaeger is
optional here: without a binary, :attr:`DemoStack.jaeger_api` is None and :attr:`DemoStack.jaeger_missing` says
why, so the Prometheus tests still run and the Jaeger tests skip (or fail under ``LOOPGUARD_REQUIRE_E2E=1``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.jaeger import JaegerPorts, jaeger_binary, jaeger_config, jaeger_get, jaeger_unavailable_reason
from tests.support.otelcol import Otelcol, RecordingOTLPHTTPReceiver, write_overlay

from ._collector import CONFIG_DIR, load_yaml, run_shipped
from ._prometheus import DEADLINE_S, instant, poll, running_prometheus

PROMETHEUS_YML = CONFIG_DIR / "prometheus" / "prometheus.yml"
DEMO_SERVICE = "otel-loopguard-demo"  # the demo's service.name
# The demo dates its spans an hour back; searches cover the last three hours.
LOOKBACK_S = 3 * 3600
_TRACE_LINE = re.compile(r"^\[(\d)/7\] .*? {2}(\S+) \| trace ([0-9a-f]{32})$", re.MULTILINE)


@dataclass
class DemoStack:
    """What one demo run left in the backends."""

    traces: dict[str, str]  # agent name -> trace id (32 hex digits), as the demo printed them
    loki: RecordingOTLPHTTPReceiver
    prometheus: str | None  # base URL, None when Prometheus is not installed
    prometheus_missing: str | None
    jaeger_api: str | None  # base URL of Jaeger's query service, None without a binary
    jaeger_missing: str | None


def prometheus_config(target: str) -> dict[str, Any]:
    """The documented prometheus.yml, scraping ``target`` each second, with the real paths of the shipped rules
    files it names (every one of them: verdict rules and operations rules)."""
    config = load_yaml(PROMETHEUS_YML)
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(PROMETHEUS_YML.parent / name) for name in config["rule_files"]]
    [job] = config["scrape_configs"]
    job["static_configs"] = [{"targets": [target]}]
    return config


def run_demo_process(otlp_grpc: str) -> str:
    """``otel-loopguard demo`` in its own process, exporting to ``otlp_grpc``; returns what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_grpc
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from otel_loopguard import cli; sys.exit(cli.main(['demo']))"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def demo_traces(stdout: str) -> dict[str, str]:
    """Agent name -> trace id from the demo's scenario headers (``[1/7] title  agent | trace id``)."""
    found = {agent: trace_id for _, agent, trace_id in _TRACE_LINE.findall(stdout)}
    assert len(found) == 7, stdout
    return found


def _start_jaeger(stack: ExitStack, workdir: Path, override: str | None) -> tuple[str | None, str | None, str | None]:
    """Start Jaeger when its binary is there: (OTLP gRPC endpoint, query API URL, None), or (None, None, why not)."""
    missing = jaeger_unavailable_reason(override)
    binary = jaeger_binary(override)
    if missing is not None or binary is None:
        return None, None, f"Jaeger v2 unavailable: {missing}"
    ports = JaegerPorts.pick()
    config = write_overlay(workdir, jaeger_config(ports), name="jaeger.yaml")
    stack.enter_context(Otelcol(binary, [config], ready_ports=[ports.otlp_grpc, ports.query_http],
                                health_url=f"http://127.0.0.1:{ports.health}/status"))
    return f"127.0.0.1:{ports.otlp_grpc}", ports.api, None


@contextmanager
def demo_stack(otelcol: Path, workdir: Path, prometheus_bin: str | None, prometheus_missing: str | None,
               jaeger_override: str | None) -> Iterator[DemoStack]:
    """Start the backends and the Collector, run the demo once, and wait until every backend holds its data."""
    with ExitStack() as stack:
        tempo = stack.enter_context(RecordingOTLPHTTPReceiver())
        loki = stack.enter_context(RecordingOTLPHTTPReceiver())
        jaeger_otlp, jaeger_api, jaeger_missing = _start_jaeger(stack, workdir, jaeger_override)
        env = {"TEMPO_OTLP_ENDPOINT": tempo.endpoint, "LOKI_OTLP_ENDPOINT": loki.http_endpoint,
               "JAEGER_OTLP_ENDPOINT": jaeger_otlp or tempo.endpoint}  # fmt: skip
        running = stack.enter_context(run_shipped(otelcol, workdir, ("agent.yaml",), env))
        prometheus = None
        if prometheus_bin is not None:
            (workdir / "prometheus").mkdir()
            target = f"127.0.0.1:{running.ports.prometheus}"
            prometheus = stack.enter_context(
                running_prometheus(prometheus_bin, prometheus_config(target), workdir / "prometheus"))
        traces = demo_traces(run_demo_process(running.receiver("otlp", "grpc")))
        deadline = time.monotonic() + DEADLINE_S
        if prometheus is not None:
            # One OTLP request carries every metric of the demo's one export, so all series arrive in one scrape.
            poll("the demo's metrics in Prometheus", lambda: instant(prometheus, "loopguard_trace_steps_count"),
                 deadline)
            # The operations panels read recorded series: wait for an evaluation after that scrape.
            poll("the recorded task figures in Prometheus",
                 lambda: instant(prometheus, "loopguard:task_cost_usd:mean1h"), deadline)
        if jaeger_api is not None:
            poll("the demo's 7 traces in Jaeger", lambda: len(search(jaeger_api, {})) == 7, deadline)
        poll("the demo's verdict events at Loki", lambda: verdict_logs(loki), deadline)
        yield DemoStack(traces, loki, prometheus, prometheus_missing, jaeger_api, jaeger_missing)


def search(api: str, extra: dict[str, str]) -> list[dict[str, Any]]:
    """Jaeger's trace search for the demo's service over the lookback (what the Jaeger UI's search page asks)."""
    now_us = int(time.time() * 1_000_000)
    params = {"service": DEMO_SERVICE, "start": str(now_us - LOOKBACK_S * 1_000_000), "end": str(now_us),
              "limit": "100", **extra}  # fmt: skip
    return jaeger_get(api, "/api/traces", params)["data"]


def verdict_logs(loki: RecordingOTLPHTTPReceiver) -> list[dict[str, Any]]:
    """The ``loopguard.verdict`` log records the Loki stand-in received."""
    return [r for r in loki.log_records() if r.get("event_name") == "loopguard.verdict"]
