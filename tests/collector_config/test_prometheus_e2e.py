"""A real Prometheus scrapes the demo's metrics (OTel Prometheus exporter in this process) and raises the alerts."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, start_http_server

from otel_loopguard.cli.demo_agent import run_demo

from ._support import RULES_FILE, require_binary

AGENT = "support-bot"  # the demo's same-call loop: stuck by the period rule, nudged, then stopped
# Deadlines, not waits (each poll returns as soon as Prometheus answers): starting Prometheus, loading the rules and
# one or two 1 s scrape/evaluation rounds take seconds, several times longer on a loaded two-core machine.
DEADLINE_S = 120.0
HTTP_TIMEOUT_S = 10


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
        return json.load(response)


def _poll(what: str, probe: Any, deadline: float) -> Any:
    """Call probe() until it returns something truthy; Prometheus offers no push notification for these."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = probe()
            if result:
                return result
        except OSError as exc:  # not listening yet, connection reset while starting
            last_error = exc
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what} (last error: {last_error})")


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
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = _free_port()
    log_path = tmp_path / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={config_path}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + DEADLINE_S

        def ready() -> bool:
            if process.poll() is not None:  # exited: no use waiting out the deadline
                pytest.fail(f"Prometheus exited with {process.returncode}:\n{log_path.read_text()}")
            return urllib.request.urlopen(f"{url}/-/ready", timeout=HTTP_TIMEOUT_S).status == 200

        _poll("Prometheus to become ready", ready, deadline)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if process.returncode not in (0, -15):
            print(log_path.read_text())


def test_demo_raises_the_stuck_and_stop_alerts(prometheus: str, exporter_endpoint: tuple[str, MeterProvider]) -> None:
    """The demo's real processor metrics make LoopGuardAgentStuck and LoopGuardRunStopped pending or firing."""
    _, provider = exporter_endpoint
    deadline = time.monotonic() + DEADLINE_S

    def rules_loaded() -> bool:
        groups = _get_json(f"{prometheus}/api/v1/rules")["data"]["groups"]
        return any(rule.get("name") == "LoopGuardAgentStuck" for g in groups for rule in g["rules"])

    _poll("the loopguard rules to load", rules_loaded, deadline)
    result = run_demo(meter_provider=provider, logger_provider=LoggerProvider(), stream=io.StringIO())
    assert result.scenarios, "the demo ran no scenario"

    def active(name: str) -> list[dict[str, Any]]:
        alerts = _get_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == name and a["state"] in {"pending", "firing"}]

    stuck = _poll("LoopGuardAgentStuck to fire for the demo's looping agent",
                  lambda: [a for a in active("LoopGuardAgentStuck") if a["labels"].get("gen_ai_agent_name") == AGENT],
                  deadline)
    assert stuck[0]["labels"]["loopguard_rule"] == "period"
    assert stuck[0]["labels"]["job"] == "agents" and stuck[0]["labels"]["severity"] == "warning"
    stopped = _poll("LoopGuardRunStopped to fire", lambda: active("LoopGuardRunStopped"), deadline)
    assert {a["labels"].get("loopguard_rule") for a in stopped} >= {"period", "cost_limit"}
