"""Child processes the tests start (the Collector, rotel, ``otel-loopguard serve``): launch with a log, wait until
ready, stop with SIGTERM then SIGKILL."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def launch_logged(command: Sequence[str], log_path: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` with its output appended to ``log_path``, after a ``--- command`` line."""
    with log_path.open("ab") as log:
        log.write(f"--- {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env))


def wait_until_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float,
                     interval: float) -> str | None:
    """Poll ``ready()`` every ``interval`` s until it says yes (None), the process exits or ``timeout`` s pass.

    Returns:
        None when ready, else why not: ``"exited with CODE during startup"`` or ``"was not ready within T s"``.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited with {proc.returncode} during startup"
        if ready():
            return None
        time.sleep(interval)
    return f"was not ready within {timeout} s"


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM, SIGKILL if still running after ``timeout`` s; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
