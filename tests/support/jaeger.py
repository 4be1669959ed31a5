"""Run Jaeger v2, built from its Go module by ``tests/collector/build-jaeger.sh``, and read it through its HTTP API.

Jaeger v2 is an OpenTelemetry Collector distribution, so it runs under :class:`~tests.support.otelcol.Otelcol`
with one configuration written here: an OTLP gRPC receiver, in-memory trace storage and the query service's HTTP
API, each on a free 127.0.0.1 port (nothing else listens). A module build embeds no UI, so tests read what a user
sees through ``/api/traces`` -- the API the Jaeger UI itself calls.

The binary is found through ``LOOPGUARD_JAEGER`` (exported by ``.ci/run`` from the build script's output) or, when
that is unset, at the cache path the build script uses for the committed ``go.mod``/``go.sum``.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.otelcol import ROOT, cached_build_path
from tests.support.otlp_receiver import free_port

__all__ = ["JAEGER_ENV", "RELEASE", "JaegerPorts", "jaeger_binary", "jaeger_config", "jaeger_get",
           "jaeger_unavailable_reason"]

SOURCE_DIR = ROOT / "tests" / "collector" / "jaeger"
# Must match tests/collector/build-jaeger.sh (RELEASE, SOURCES and the cache path).
RELEASE = "v1.76.0"
SOURCE_FILES = ("go.mod", "go.sum")
JAEGER_ENV = "LOOPGUARD_JAEGER"


def jaeger_binary(override: str | None = None) -> Path | None:
    """The Jaeger binary: ``override`` (the value of ``LOOPGUARD_JAEGER``) or the cached build, if present."""
    path = Path(override) if override else cached_build_path(f"jaeger-{RELEASE}", SOURCE_DIR, SOURCE_FILES)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def jaeger_unavailable_reason(override: str | None = None) -> str | None:
    """Why Jaeger cannot run here, or None when it can (checked by running ``jaeger version``)."""
    path = jaeger_binary(override)
    if path is None:
        where = override or str(cached_build_path(f"jaeger-{RELEASE}", SOURCE_DIR, SOURCE_FILES))
        return f"no Jaeger binary at {where}; build it with: bash tests/collector/build-jaeger.sh"
    try:
        done = subprocess.run([str(path), "version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} version failed: {exc}"
    if done.returncode != 0:
        return f"{path} version answered {done.returncode}: {done.stderr.decode(errors='replace')[-500:]!r}"
    return None


@dataclass(frozen=True)
class JaegerPorts:
    """Free 127.0.0.1 ports of one Jaeger: OTLP gRPC in, the query HTTP API and the health check."""

    otlp_grpc: int
    query_http: int
    query_grpc: int
    health: int

    @classmethod
    def pick(cls) -> JaegerPorts:
        """Four free ports."""
        return cls(free_port(), free_port(), free_port(), free_port())

    @property
    def api(self) -> str:
        """Base URL of the query service (``/api/traces`` and the rest below it)."""
        return f"http://127.0.0.1:{self.query_http}"


def jaeger_config(ports: JaegerPorts) -> dict[str, Any]:
    """Jaeger v2's all-in-one pipeline (OTLP in, memory storage, query) reduced to what the tests use."""
    loopback = "127.0.0.1"
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                     "exporters": ["jaeger_storage_exporter"]}},
            # Jaeger's own metrics would listen on 8888 by default: off.
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "jaeger_query": {"storage": {"traces": "memstore"},
                             "http": {"endpoint": f"{loopback}:{ports.query_http}"},
                             "grpc": {"endpoint": f"{loopback}:{ports.query_grpc}"}},
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 10_000}}}},
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"{loopback}:{ports.health}"}},
        },
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"{loopback}:{ports.otlp_grpc}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }  # fmt: skip


def jaeger_get(api: str, path: str, params: dict[str, str] | None = None, timeout: float = 10.0) -> Any:
    """GET ``api + path`` (with query parameters) from the Jaeger query service and decode its JSON."""
    url = api + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)
