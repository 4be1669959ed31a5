"""``otel-loopguard serve`` as a child process under a 512 open-file limit, held by more connections than it may
open files, none of which ever finishes its headers: both receivers still answer."""

from __future__ import annotations

import json
import re
import resource
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.external import unavailable
from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._child import serve_command
from ._support import FIXTURE_FILES, grpc_export, post, to_proto

# 512, not the common 1 024: the test process holds every connection's other end, and CI machines whose hard limit
# is 1 024 (not raisable without privileges) must run it too, not skip it.
FILE_LIMIT = 512
HOLDERS = 600  # more than the file limit: without a cap, accept() fails with EMFILE


@pytest.fixture
def limited_serve() -> Iterator[tuple[int, int]]:
    """serve with a 512-file limit (soft and hard); yields its (gRPC, HTTP) ports."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = HOLDERS + 200  # this test's own sockets
    if soft < needed:
        raised = hard if hard == resource.RLIM_INFINITY or hard >= needed else needed
        try:  # raising the hard limit too needs privileges (CI runs as root); lowering it back does not
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, raised))
        except (ValueError, OSError):
            unavailable(f"this process may open only {hard} files and cannot raise the limit; the test needs "
                        f"{needed} (ulimit -Hn {needed})")
    try:
        yield from _serve_under_the_limit()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _serve_under_the_limit() -> Iterator[tuple[int, int]]:
    """The limited serve child's (gRPC, HTTP) ports, for as long as the caller holds them."""
    with RecordingOTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}"}
        args = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--idle", "600"]
        with serve_command(args, env, file_limit=FILE_LIMIT) as (proc, line):
            try:
                match = re.search(r"grpc 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
                assert match, line
                limits = Path(f"/proc/{proc.pid}/limits")
                if limits.exists():  # Linux: the limit the child set itself
                    assert re.search(rf"Max open files\s+{FILE_LIMIT}\s+{FILE_LIMIT}\s", limits.read_text())
                yield int(match.group(1)), int(match.group(2))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)


def test_header_dribblers_beyond_the_file_limit_lock_out_neither_receiver(limited_serve: tuple[int, int]) -> None:
    """600 connections to the HTTP receiver that sent part of their headers and stop there: a real OTLP/HTTP
    request and a real OTLP/gRPC export still succeed. (http.server gave each holder a thread and a descriptor until
    accept failed with EMFILE; then neither receiver answered.)"""
    grpc_port, http_port = limited_serve
    path = FIXTURE_FILES[0]
    holders = []
    try:
        for _ in range(HOLDERS):
            sock = socket.create_connection(("127.0.0.1", http_port), timeout=30)
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            holders.append(sock)
        status, _, _ = post(http_port, path.read_bytes(), "application/json")
        assert status == 200
        grpc_export(grpc_port, to_proto(json.loads(path.read_text())))
    finally:
        for sock in holders:
            sock.close()
