"""Run the real ``rotel-agent`` collector (shipped inside the ``rotel`` PyPI wheel) as a child process.

The agent listens for OTLP over gRPC and HTTP on free 127.0.0.1 ports and forwards traces, logs and metrics over
OTLP/gRPC to one exporter endpoint (normally a :class:`~tests.support.otlp_receiver.RecordingOTLPReceiver`). Its
output goes to a temp file whose tail :meth:`RotelCollector.diagnostics` returns for failure messages.

Facts about the pinned ``rotel==0.0.1a15`` wheel (agent reports ``0.0.1-alpha10``), checked with ``start --help``:
``--exporter otlp`` with ``--otlp-exporter-endpoint`` serves all three signals; the receivers for traces, logs and
metrics are all on unless ``--otlp-receiver-*-disabled`` is given; batching flushes every 200 ms by default; exporter
retries start at a 5 s backoff, which :class:`RotelCollector` shortens so outage tests stay quick.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.otlp_receiver import free_port
from tests.support.processes import launch_logged, port_open, stop_process, wait_until_ready

__all__ = ["RotelCollector", "RotelError", "rotel_agent_path", "rotel_available"]


class RotelError(RuntimeError):
    """The collector could not be started or did not become ready."""


def rotel_agent_path(override: str | os.PathLike[str] | None = None) -> Path | None:
    """Path of the ``rotel-agent`` binary, or None if absent.

    Args:
        override: use this binary instead of the one inside the installed ``rotel`` package.
    """
    if override is not None:
        path = Path(override)
        return path if path.is_file() else None
    try:
        import rotel
    except ImportError:
        return None
    path = Path(rotel.__file__).parent / "rotel-agent"
    return path if path.is_file() else None


def rotel_available(agent: str | os.PathLike[str] | None = None) -> str | None:
    """Why rotel cannot run here, or None when it can.

    Args:
        agent: check this binary instead of the one inside the installed ``rotel`` package.
    """
    if not sys.platform.startswith("linux") and sys.platform != "darwin":
        return f"rotel-agent does not run on {sys.platform}"
    path = rotel_agent_path(agent)
    if path is None:
        if agent is not None:
            return f"rotel-agent binary {agent} does not exist"
        return "the rotel package (with its rotel-agent binary) is not installed; pip install rotel==0.0.1a15"
    if not os.access(path, os.X_OK):
        return f"{path} is not executable"
    try:
        done = subprocess.run([str(path), "version"], capture_output=True, timeout=10, check=False)
    except OSError as exc:
        # A wheel for another architecture fails here with "Exec format error".
        return f"{path} cannot be executed on {platform.machine()}: {exc}"
    except subprocess.TimeoutExpired:
        return f"{path} version did not answer within 10 s"
    if done.returncode != 0:
        return f"{path} version exited {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
    return None


class RotelCollector:
    """A running ``rotel-agent`` that forwards all signals to ``exporter_endpoint`` over OTLP/gRPC.

    Usable as a context manager. :meth:`stop` and :meth:`start` may be repeated; the ports stay the same so SDK
    exporters keep working across a restart.

    Args:
        exporter_endpoint: ``"127.0.0.1:PORT"`` or ``"http://127.0.0.1:PORT"`` of the OTLP/gRPC backend.
        batch_timeout: how long rotel batches before exporting (rotel duration syntax, e.g. ``"50ms"``).
        retry_initial_backoff: first delay before rotel re-sends a failed export.
        retry_max_elapsed_time: how long rotel keeps retrying one batch before dropping it.
        retry_max_backoff: longest delay between re-sends.
        extra_args: further ``rotel-agent start`` flags.
        ready_timeout: seconds to wait for both receiver ports to accept connections.
        agent: path of a ``rotel-agent`` binary to use instead of the packaged one.
    """

    def __init__(
        self,
        exporter_endpoint: str,
        *,
        batch_timeout: str = "50ms",
        retry_initial_backoff: str = "100ms",
        retry_max_backoff: str = "500ms",
        retry_max_elapsed_time: str = "30s",
        extra_args: tuple[str, ...] = (),
        ready_timeout: float = 60.0,
        agent: str | os.PathLike[str] | None = None,
    ) -> None:
        self._agent = agent
        if not exporter_endpoint.startswith(("http://", "https://")):
            exporter_endpoint = "http://" + exporter_endpoint
        self.exporter_endpoint = exporter_endpoint
        self._flags = [
            "--exporter", "otlp",
            "--otlp-exporter-endpoint", exporter_endpoint,
            "--otlp-exporter-protocol", "grpc",
            "--batch-timeout", batch_timeout,
            "--otlp-exporter-retry-initial-backoff", retry_initial_backoff,
            "--otlp-exporter-retry-max-backoff", retry_max_backoff,
            "--otlp-exporter-retry-max-elapsed-time", retry_max_elapsed_time,
            *extra_args,
        ]  # fmt: skip
        self._ready_timeout = ready_timeout
        self._grpc_port = 0
        self._http_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="rotel-"))
        self.log_path = self._workdir / "rotel.log"

    @property
    def grpc_endpoint(self) -> str:
        """``"http://127.0.0.1:PORT"`` of rotel's OTLP/gRPC receiver."""
        return f"http://127.0.0.1:{self._grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """``"http://127.0.0.1:PORT"`` of rotel's OTLP/HTTP receiver (append ``/v1/traces`` etc. per signal)."""
        return f"http://127.0.0.1:{self._http_port}"

    @property
    def running(self) -> bool:
        """Whether the agent process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> RotelCollector:
        """Start the agent and wait until both receivers accept connections.

        The first start picks free ports; later starts reuse them. A lost race for a fresh port is retried.

        Returns:
            self, for chaining.

        Raises:
            RotelError: rotel is unavailable, exited early, or was not ready within ``ready_timeout``.
        """
        if self.running:
            raise RotelError("rotel is already running")
        reason = rotel_available(self._agent)
        if reason is not None:
            raise RotelError(reason)
        fresh_ports = self._grpc_port == 0
        for attempt in range(3):
            if fresh_ports:
                self._grpc_port, self._http_port = free_port(), free_port()
            try:
                self._launch()
                return self
            except RotelError:
                if not fresh_ports or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        agent = rotel_agent_path(self._agent)
        if agent is None:
            raise RotelError("rotel-agent binary vanished")
        cmd = [
            str(agent), "start",
            "--otlp-grpc-endpoint", f"127.0.0.1:{self._grpc_port}",
            "--otlp-http-endpoint", f"127.0.0.1:{self._http_port}",
            # Only consulted with --daemon, but point them at our own directory so parallel agents never share.
            "--pid-file", str(self._workdir / "rotel.pid"),
            "--log-file", str(self._workdir / "rotel-daemon.log"),
            *self._flags,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTEL_")}
        env["NO_COLOR"] = "1"
        self._proc = launch_logged(cmd, self.log_path, env)
        why = wait_until_ready(self._proc, lambda: port_open(self._grpc_port) and port_open(self._http_port),
                               self._ready_timeout, 0.02)
        if why is not None:
            self.stop()
            raise RotelError(f"rotel {why}\n{self.diagnostics()}")

    def stop(self, timeout: float = 5.0) -> int | None:
        """Stop the agent with SIGTERM, escalating to SIGKILL after ``timeout`` seconds (idempotent).

        Returns:
            the exit code, or None if it was not running.
        """
        proc, self._proc = self._proc, None
        return None if proc is None else stop_process(proc, timeout)

    def restart(self) -> RotelCollector:
        """Stop, then start on the same ports."""
        self.stop()
        return self.start()

    def wait_for_output(self, text: str, timeout: float = 60.0, *, after: int = 0) -> bool:
        """Wait until the agent has written ``text`` (e.g. ``"Exporting failed"``) to its output.

        rotel offers no event for its internal state, so this polls its output file every 20 ms.

        Args:
            text: substring to look for.
            timeout: seconds to wait.
            after: only search output beyond this byte offset (see :meth:`output_size`).

        Returns:
            whether the text appeared in time.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.log_path.open("rb") as log:
                    log.seek(after)
                    if text.encode() in log.read():
                        return True
            except OSError:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def output_size(self) -> int:
        """Bytes of agent output so far, to pass as ``after`` to :meth:`wait_for_output`."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def diagnostics(self, max_chars: int = 4000) -> str:
        """The tail of the agent's combined stdout/stderr, for assertion messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no rotel output)"
        return f"rotel output ({self.log_path}):\n{text[-max_chars:]}"

    def remove_files(self) -> None:
        """Delete the temp directory holding the agent's output (stop first)."""
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> RotelCollector:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
