"""Start a shipped configuration in the real Collector with every listener on a free 127.0.0.1 port.

:func:`listener_overlay` reads a shipped file and returns an overlay that moves each of its listeners (receivers'
protocols, the ``health_check`` extension, the ``prometheus`` exporter and the Collector's own metrics) to a free
port; nothing else changes. Backends are chosen through the files' documented variables (``TEMPO_OTLP_ENDPOINT``,
``JAEGER_OTLP_ENDPOINT``, ``LOKI_OTLP_ENDPOINT``, ``RAW_TRACES_OTLP_ENDPOINT``), as a user would.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.otelcol import Otelcol, RecordingOTLPHTTPReceiver, write_overlay
from tests.support.otlp_receiver import free_port

# Defined here rather than taken from ._support, which imports the package's private modules: these tests use
# only the public API and the CLI, so a reorganisation of otel_loopguard's internals cannot break them.
ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "collector-config"
RULES_FILE = CONFIG_DIR / "prometheus" / "loopguard-rules.yaml"


def load_yaml(path: Path) -> Any:
    """Parse one YAML file."""
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)

# What the Collector logs when a configuration uses a deprecated component name or OTTL paths without their
# context prefix (it rewrites them and says so): the shipped files must not trigger either.
DEPRECATION_MARKERS = ("alias is deprecated", "were modified to include their context prefix", "deprecated")


def merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Merge like the Collector does for several --config files: maps recursively, everything else replaced."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Ports:
    """Free ports chosen for one configuration's listeners."""

    receivers: dict[str, dict[str, int]] = field(default_factory=dict)  # receiver id -> protocol -> port
    health: int | None = None
    prometheus: int | None = None  # the `prometheus` exporter (metrics for Prometheus to scrape)
    telemetry: int | None = None  # the Collector's own metrics

    def all(self) -> list[int]:
        """Every listening port (for readiness)."""
        ports = [p for protocols in self.receivers.values() for p in protocols.values()]
        return ports + [p for p in (self.health, self.prometheus, self.telemetry) if p is not None]

    @property
    def health_url(self) -> str | None:
        """The health_check extension's URL, when the configuration has one."""
        return None if self.health is None else f"http://127.0.0.1:{self.health}/"


def listener_overlay(*names: str) -> tuple[dict[str, Any], Ports]:
    """Overlay moving every listener of the merged shipped files ``names`` to a free 127.0.0.1 port."""
    cfg: dict[str, Any] = {}
    for name in names:
        cfg = merge(cfg, load_yaml(CONFIG_DIR / name))
    ports = Ports()
    overlay: dict[str, Any] = {}
    for receiver_id, receiver in (cfg.get("receivers") or {}).items():
        protocols = {protocol: free_port() for protocol in (receiver.get("protocols") or {})}
        ports.receivers[receiver_id] = protocols
        overlay.setdefault("receivers", {})[receiver_id] = {
            "protocols": {protocol: {"endpoint": f"127.0.0.1:{port}"} for protocol, port in protocols.items()}
        }
    if "health_check" in (cfg.get("extensions") or {}):
        ports.health = free_port()
        overlay["extensions"] = {"health_check": {"endpoint": f"127.0.0.1:{ports.health}"}}
    if "prometheus" in (cfg.get("exporters") or {}):
        ports.prometheus = free_port()
        overlay["exporters"] = {"prometheus": {"endpoint": f"127.0.0.1:{ports.prometheus}"}}
    if cfg.get("service", {}).get("telemetry", {}).get("metrics", {}).get("readers"):
        ports.telemetry = free_port()
        reader = {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": ports.telemetry}}}}
        overlay["service"] = {"telemetry": {"metrics": {"readers": [reader]}}}
    return overlay, ports


def backend_env(backend: RecordingOTLPHTTPReceiver) -> dict[str, str]:
    """Point every documented backend variable at one recording backend."""
    return {
        "TEMPO_OTLP_ENDPOINT": backend.endpoint,
        "JAEGER_OTLP_ENDPOINT": backend.endpoint,
        "RAW_TRACES_OTLP_ENDPOINT": backend.endpoint,
        "LOKI_OTLP_ENDPOINT": backend.http_endpoint,
    }


@dataclass
class Running:
    """A started Collector and the ports of its listeners."""

    collector: Otelcol
    ports: Ports

    def receiver(self, receiver_id: str = "otlp", protocol: str = "grpc") -> str:
        """``http://127.0.0.1:PORT`` of one receiver protocol."""
        return f"http://127.0.0.1:{self.ports.receivers[receiver_id][protocol]}"

    @property
    def prometheus_url(self) -> str:
        """The prometheus exporter's scrape URL."""
        return f"http://127.0.0.1:{self.ports.prometheus}/metrics"

    @property
    def telemetry_url(self) -> str:
        """The Collector's own metrics."""
        return f"http://127.0.0.1:{self.ports.telemetry}/metrics"


@contextmanager
def run_shipped(
    binary: Path,
    tmp_path: Path,
    names: tuple[str, ...],
    env: Mapping[str, str],
    extra: Mapping[str, Any] | None = None,
    listeners: tuple[dict[str, Any], Ports] | None = None,
) -> Iterator[Running]:
    """Run ``--config`` each shipped file in ``names``, then an overlay with free ports (and ``extra``).

    ``listeners`` is a :func:`listener_overlay` result chosen beforehand (when a test needs a port before the
    Collector starts). On a failure inside the block the Collector's output is printed, so it shows in the report.
    """
    overlay, ports = listeners or listener_overlay(*names)
    if extra:
        overlay = merge(overlay, extra)
    configs = [CONFIG_DIR / name for name in names] + [write_overlay(tmp_path, overlay)]
    collector = Otelcol(binary, configs, env=env, ready_ports=ports.all(), health_url=ports.health_url)
    collector.start()
    ok = False
    try:
        yield Running(collector, ports)
        ok = True
    finally:
        collector.stop()
        if not ok:
            print(collector.diagnostics())
