"""``otel-loopguard serve`` as a child process under a 1 024 open-file limit, held by more connections than it may
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

from tests.support.otlp_receiver import RecordingOTLPReceiver

from ._child import serve_command
from ._support import FIXTURE_FILES, grpc_export, post, to_proto

FILE_LIMIT = 1024
HOLDERS = 1200  # more than the file limit: without a cap, accept() fails with EMFILE


@pytest.fixture
def limited_serve() -> Iterator[tuple[int, int]]:
    """serve with a 1 024-file limit (soft and hard); yields its (gRPC, HTTP) ports."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = HOLDERS + 200  # this test's own sockets
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"this process may open only {hard} files; the test needs {needed}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    with RecordingOTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.endpoint}"}
        args = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--idle", "600"]
        with serve_command(args, env, file_limit=FILE_LIMIT) as (proc, line):
            try:
                match = re.search(r"grpc 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+)", line)
                assert match, line
                limits = Path(f"/proc/{proc.pid}/limits")
                if limits.exists():  # Linux: the limit the child set itself
                    assert re.search(r"Max open files\s+1024\s+1024\s", limits.read_text())
                yield int(match.group(1)), int(match.group(2))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)


def test_header_dribblers_beyond_the_file_limit_lock_out_neither_receiver(limited_serve: tuple[int, int]) -> None:
    """1 200 connections to the HTTP receiver that sent part of their headers and stop there: a real OTLP/HTTP
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
