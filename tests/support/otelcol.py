"""Run the real OpenTelemetry Collector built by ``tests/collector/build.sh`` as a child process.

The binary is found through ``LOOPGUARD_OTELCOL`` (exported by ``.ci/run`` from the build script's output) or, when
that is unset, at the cache path the build script uses for the committed sources. Tests start it with the shipped
files from ``collector-config/`` plus one overlay file written by the test (the Collector merges maps of several
``--config`` files and replaces lists, as ``agent-raw-copy.yaml`` relies on): the overlay only moves listeners to
free ports and points the exporters at recording backends, so the pipelines and processors run exactly as shipped.

:class:`RecordingOTLPHTTPReceiver` adds an OTLP/HTTP (protobuf, gzip) listener to the gRPC
:class:`~tests.support.otlp_receiver.RecordingOTLPReceiver`, for the ``otlp_http`` exporters of the configurations.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.support.otlp_receiver import LOGS, METRICS, TRACES, Received, RecordingOTLPReceiver
from tests.support.processes import launch_logged, port_open, stop_process, wait_until_ready

__all__ = [
    "OTELCOL_ENV",
    "RELEASE",
    "Otelcol",
    "OtelcolError",
    "RecordingOTLPHTTPReceiver",
    "cached_build_path",
    "otelcol_binary",
    "otelcol_unavailable_reason",
    "port_open",
    "scrape",
]

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "tests" / "collector"
SOURCE_DIR = BUILD_DIR / "otelcol"
# Must match tests/collector/build.sh (RELEASE, SOURCES and the cache path).
RELEASE = "v0.161.0"
SOURCE_FILES = ("go.mod", "go.sum", "components.go", "main.go", "main_others.go", "main_windows.go")
OTELCOL_ENV = "LOOPGUARD_OTELCOL"


class OtelcolError(RuntimeError):
    """The Collector could not be started, or did not become ready."""


def cached_build_path(prefix: str, source_dir: Path, source_files: Sequence[str]) -> Path:
    """Where a build script of tests/collector/ caches its binary: ``<cache>/<prefix>-<digest of the sources>``
    (the scheme of ``build.sh`` and ``build-jaeger.sh``)."""
    digest = hashlib.sha256(b"".join((source_dir / name).read_bytes() for name in source_files)).hexdigest()[:16]
    cache = os.environ.get("LOOPGUARD_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otel-loopguard"
    )
    return Path(cache) / f"{prefix}-{digest}"


def cached_binary_path() -> Path:
    """Where ``tests/collector/build.sh`` puts the binary for the committed sources."""
    return cached_build_path(f"otelcol-loopguard-{RELEASE}", SOURCE_DIR, SOURCE_FILES)


def otelcol_binary(override: str | None = None) -> Path | None:
    """The Collector binary: ``override`` (the value of ``LOOPGUARD_OTELCOL``) or the cached build, if present."""
    path = Path(override) if override else cached_binary_path()
    return path if path.is_file() and os.access(path, os.X_OK) else None


def otelcol_unavailable_reason(override: str | None = None) -> str | None:
    """Why the Collector cannot run here, or None when it can (checked by running ``--version``)."""
    path = otelcol_binary(override)
    if path is None:
        where = override or str(cached_binary_path())
        return f"no Collector binary at {where}; build it with: bash tests/collector/build.sh"
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} --version failed: {exc}"
    version = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or not version.endswith(RELEASE.lstrip("v")):
        return f"{path} --version answered {done.returncode}: {version!r}, expected release {RELEASE}"
    return None


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of a Prometheus text endpoint: sample name -> [(labels, value)]."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def write_overlay(directory: Path, overlay: Mapping[str, Any], name: str = "overlay.yaml") -> Path:
    """Write one overlay configuration file for ``--config``."""
    path = directory / name
    path.write_text(yaml.safe_dump(dict(overlay), sort_keys=False), encoding="utf-8")
    return path


class Otelcol:
    """A running Collector: ``otelcol --config A --config B ...`` with its output in a temp file.

    Args:
        binary: the Collector binary.
        configs: configuration files, merged in order.
        env: extra environment (e.g. ``TEMPO_OTLP_ENDPOINT``); ``OTEL_*`` of the host is not passed on.
        ready_ports: ports that must accept connections before :meth:`start` returns.
        health_url: if given, also wait until this URL answers 200 (the ``health_check`` extension).
        ready_timeout: seconds to wait for readiness (generous: the machine may be loaded).
    """

    def __init__(
        self,
        binary: Path,
        configs: Sequence[Path],
        *,
        env: Mapping[str, str] | None = None,
        ready_ports: Iterable[int] = (),
        health_url: str | None = None,
        ready_timeout: float = 60.0,
    ) -> None:
        self.binary = binary
        self.configs = list(configs)
        self._env = dict(env or {})
        self._ready_ports = list(ready_ports)
        self._health_url = health_url
        self._ready_timeout = ready_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="otelcol-"))
        self.log_path = self._workdir / "otelcol.log"

    @property
    def command(self) -> list[str]:
        """The command line."""
        return [str(self.binary), *(arg for path in self.configs for arg in ("--config", str(path)))]

    def start(self) -> Otelcol:
        """Start and wait until every ready port accepts connections (and the health check says 200).

        Raises:
            OtelcolError: the process exited or was not ready in time (its output is in the message).
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
        env.update(self._env)
        self._proc = launch_logged(self.command, self.log_path, env)
        why = wait_until_ready(self._proc, lambda: all(port_open(p) for p in self._ready_ports) and self._healthy(),
                               self._ready_timeout, 0.05)
        if why is None:
            return self
        self.stop()
        raise OtelcolError(f"the Collector {why}\n{self.diagnostics()}")

    def _healthy(self) -> bool:
        if self._health_url is None:
            return True
        try:
            with urllib.request.urlopen(self._health_url, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (the Collector drains its pipelines), SIGKILL after ``timeout`` s; returns the exit code."""
        proc, self._proc = self._proc, None
        return None if proc is None else stop_process(proc, timeout)

    def output(self) -> str:
        """Everything the Collector has written so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def diagnostics(self, max_chars: int = 6000) -> str:
        """The tail of the Collector's output, for assertion messages."""
        return f"Collector output ({self.log_path}):\n{self.output()[-max_chars:]}"

    def remove_files(self) -> None:
        """Delete the temp directory with the output (stop first)."""
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Otelcol:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_HTTP_PATHS = {
    "/v1/traces": (TRACES, trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
    "/v1/logs": (LOGS, logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse),
    "/v1/metrics": (
        METRICS, metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse,
    ),
}  # fmt: skip


class RecordingOTLPHTTPReceiver(RecordingOTLPReceiver):
    """A :class:`RecordingOTLPReceiver` that also accepts OTLP/HTTP protobuf (gzip or zlib) on its own port.

    ``http_endpoint`` is the base URL (``http://127.0.0.1:PORT``): an ``otlp_http`` exporter configured with it
    posts to ``/v1/traces``, ``/v1/logs`` and ``/v1/metrics``. Requests land in the same recording as gRPC ones,
    so :meth:`wait_for`, :meth:`spans`, :meth:`log_records` and :meth:`metric_points` see both.
    """

    def __init__(self, port: int = 0, *, http_port: int = 0, max_workers: int = 16) -> None:
        super().__init__(port, max_workers=max_workers)
        self._http_port = http_port
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.http_paths: list[str] = []

    @property
    def http_endpoint(self) -> str:
        """``"http://127.0.0.1:PORT"`` of the OTLP/HTTP listener."""
        return f"http://127.0.0.1:{self._http_port}"

    def start(self) -> RecordingOTLPHTTPReceiver:
        """Start the gRPC server and the HTTP listener."""
        super().start()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                route = _HTTP_PATHS.get(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if route is None or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404 if route is None else 415)
                    return
                kind, request_type, response_type = route
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding in ("deflate", "zlib"):
                    body = zlib.decompress(body)
                request = request_type.FromString(body)
                owner._record_http(kind, self.path, request)
                payload = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._http = ThreadingHTTPServer(("127.0.0.1", self._http_port), Handler)
        self._http_port = self._http.server_address[1]
        self._http_thread = threading.Thread(target=self._http.serve_forever, name="otlp-http-receiver", daemon=True)
        self._http_thread.start()
        return self

    def _record_http(self, kind: str, path: str, request: Any) -> None:
        # Same bookkeeping as the gRPC handlers of the base class: count, record, wake every waiter.
        with self._cond:
            self._attempts[kind] += 1
            self.http_paths.append(path)
            self._received.append(Received(kind, request, time.monotonic()))
            self._cond.notify_all()

    def stop(self, grace: float | None = 0.5) -> None:
        """Stop both listeners (idempotent)."""
        http, self._http = self._http, None
        if http is not None:
            http.shutdown()
            http.server_close()
            if self._http_thread is not None:
                self._http_thread.join(timeout=5)
        super().stop(grace)
