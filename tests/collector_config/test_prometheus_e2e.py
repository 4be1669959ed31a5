"""A real Prometheus scrapes the demo's metrics (OTel Prometheus exporter in this process) and raises the alerts."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, start_http_server

from otel_loopguard.cli.demo_agent import run_demo

from ._prometheus import DEADLINE_S, get_json, poll, running_prometheus
from ._support import RULES_FILE, require_binary

AGENT = "support-bot"  # the demo's same-call loop: stuck by the period rule, nudged, then stopped


@pytest.fixture
def exporter_endpoint() -> Iterator[tuple[str, MeterProvider]]:
    """The OTel Prometheus exporter served over HTTP on a free 127.0.0.1 port, with its MeterProvider."""
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{server.server_port}", provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        provider.shutdown()


@pytest.fixture
def prometheus(tmp_path: Path, exporter_endpoint: tuple[str, MeterProvider]) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 scraping the exporter every second with the loopguard rules loaded."""
    binary = require_binary("prometheus")
    target, _ = exporter_endpoint
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES_FILE)],
        "scrape_configs": [{"job_name": "agents", "static_configs": [{"targets": [target]}]}],
    }
    with running_prometheus(binary, config, tmp_path) as url:
        yield url


def test_demo_raises_the_stuck_and_stop_alerts(prometheus: str, exporter_endpoint: tuple[str, MeterProvider]) -> None:
    """The demo's real processor metrics make LoopGuardAgentStuck and LoopGuardRunStopped pending or firing."""
    _, provider = exporter_endpoint
    deadline = time.monotonic() + DEADLINE_S

    def rules_loaded() -> bool:
        groups = get_json(f"{prometheus}/api/v1/rules")["data"]["groups"]
        return any(rule.get("name") == "LoopGuardAgentStuck" for g in groups for rule in g["rules"])

    poll("the loopguard rules to load", rules_loaded, deadline)
    result = run_demo(meter_provider=provider, logger_provider=LoggerProvider(), stream=io.StringIO())
    assert result.scenarios, "the demo ran no scenario"

    def active(name: str) -> list[dict[str, Any]]:
        alerts = get_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == name and a["state"] in {"pending", "firing"}]

    stuck = poll("LoopGuardAgentStuck to fire for the demo's looping agent",
                  lambda: [a for a in active("LoopGuardAgentStuck") if a["labels"].get("gen_ai_agent_name") == AGENT],
                  deadline)
    assert stuck[0]["labels"]["loopguard_rule"] == "period"
    assert stuck[0]["labels"]["job"] == "agents" and stuck[0]["labels"]["severity"] == "warning"
    stopped = poll("LoopGuardRunStopped to fire", lambda: active("LoopGuardRunStopped"), deadline)
    assert {a["labels"].get("loopguard_rule") for a in stopped} >= {"period", "cost_limit"}
