"""Raw-socket HTTP helpers for the receiver tests: requests no library would send, and reading answers by hand."""

from __future__ import annotations

import select
import socket
import time


def raw_request(port: int, head: bytes, body: bytes = b"", *, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` (request line and headers, without the blank line) and ``body``; read until the server closes.

    Returns (status, headers with lower-case names, body).
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        reply = read_until_closed(sock)
    return parse_reply(reply)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the peer sends until it closes (a reset after its answer counts as closed)."""
    reply = b""
    try:
        while chunk := sock.recv(65536):
            reply += chunk
    except ConnectionResetError:
        pass
    return reply


def parse_reply(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one HTTP/1.1 answer."""
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the peer closes ``sock`` within ``within`` seconds (an upper bound for a failing test, not a pace)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
    return False


def dribble_until_closed(sock: socket.socket, data: bytes, every: float, within: float) -> bool:
    """Send ``data`` one byte every ``every`` seconds (a slow client's pace) until the peer closes, at most
    ``within`` seconds; returns whether it closed."""
    deadline = time.monotonic() + within
    index = 0
    while time.monotonic() < deadline:
        try:
            sock.send(data[index % len(data):index % len(data) + 1])
        except (BrokenPipeError, ConnectionResetError):
            return True
        index += 1
        if closed_by_peer(sock, every):
            return True
    return False
