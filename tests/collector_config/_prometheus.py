"""A real Prometheus (Debian's package) started on a free 127.0.0.1 port, and its HTTP API.

One implementation for every test that runs Prometheus: the configuration is given as a mapping (the tests load
a shipped file and move its targets and rule paths), the process logs to a file that a failure prints, and every
wait is a deadline that ends as soon as Prometheus answers.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.support.otlp_receiver import free_port

# Deadlines, not waits (each poll returns as soon as Prometheus answers): starting Prometheus, loading rules and one
# or two 1 s scrape/evaluation rounds take seconds, several times longer on a loaded two-core machine.
DEADLINE_S = 120.0
HTTP_TIMEOUT_S = 10

T = TypeVar("T")


def get_json(url: str, params: Mapping[str, str] | None = None) -> Any:
    """GET a URL (with query parameters) and decode its JSON."""
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
        return json.load(response)


def poll(what: str, probe: Callable[[], T], deadline: float) -> T:
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


def instant(url: str, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
    answer = get_json(f"{url}/api/v1/query", {"query": expr})
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@contextmanager
def running_prometheus(binary: str, config: Mapping[str, Any], workdir: Path) -> Iterator[str]:
    """Start Prometheus with ``config`` on a free 127.0.0.1 port; yield its base URL once it is ready."""
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    port = free_port()
    log_path = workdir / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={config_path}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if process.poll() is not None:  # exited: no use waiting out the deadline
                pytest.fail(f"Prometheus exited with {process.returncode}:\n{log_path.read_text()}")
            return urllib.request.urlopen(f"{url}/-/ready", timeout=HTTP_TIMEOUT_S).status == 200

        poll("Prometheus to become ready", ready, time.monotonic() + DEADLINE_S)
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
