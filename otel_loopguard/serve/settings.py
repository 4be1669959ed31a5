"""``serve``'s network settings: limits, TLS, the bearer token, and the ``[serve]`` table of the TOML file.

Precedence, most explicit first: command-line flags, the ``[serve]`` table of the configuration file (``--config``
or ``LOOPGUARD_CONFIG``), the defaults below. The detector settings of the same file are read by
:class:`~otel_loopguard.core.config.LoopGuardConfig`, which leaves the ``[serve]`` table to this module.

Defaults, and why:

* ``header_timeout`` 10 s: from the first byte of a request (or the start of a TLS handshake) to the end of its
  headers; a client that dribbles header bytes is disconnected then. An exporter sends its headers in one write.
* ``idle_timeout`` 60 s: a kept-alive connection without a request in progress is closed after this long (gRPC:
  ``max_connection_idle``, a GOAWAY). Exporters export every few seconds, so their connections stay open.
* ``body_timeout`` 60 s: reading one request body (16 MiB at 2 Mbit/s).
* ``max_connections``: per receiver; by default half of the open-file limit less a reserve of 128, at most 1 024
  (at a 1 024-file limit: 448 each), so the two receivers together can never exhaust the process's file
  descriptors. ``serve`` raises its soft open-file limit to the hard limit first, as Go programs do.
* ``max_concurrent_requests`` 16 (HTTP) and ``grpc_max_concurrent_rpcs`` 64: requests whose bodies are held and
  decoded at once; the rest wait (HTTP, in the kernel's socket buffers) or are refused with
  ``RESOURCE_EXHAUSTED`` (gRPC), so memory for bodies stays bounded by these times ``max_body``.
* ``backlog`` 1 024: the listen queue (the kernel caps it at ``net.core.somaxconn``).
* ``max_body`` 16 MiB, before and after gzip decompression (gRPC: the maximum message size).
* ``grpc_max_concurrent_streams`` 100 per connection; ``grpc_max_connection_age`` off (a value makes clients
  reconnect, e.g. to rebalance behind a load balancer).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import ssl
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

try:
    import resource
except ImportError:  # pragma: no cover - not on POSIX: no open-file limit to read or raise
    resource = None  # type: ignore[assignment]

__all__ = [
    "SETTING_NAMES",
    "BearerToken",
    "ServeSettings",
    "TLSFiles",
    "default_max_connections",
    "exposure_warnings",
    "raise_open_file_limit",
    "read_serve_table",
]

# The largest configuration file read (the same cap as LOOPGUARD_CONFIG itself).
MAX_CONFIG_BYTES = 1024 * 1024
# The largest token file read: a bearer token is a few hundred bytes at most.
MAX_TOKEN_BYTES = 64 * 1024
#: The tenant of a bare token (a token file line without a tenant name).
DEFAULT_TENANT = "default"
_TENANT = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _token_bytes(token: str) -> bytes:
    """A token checked: at least 16 characters of printable ASCII without spaces."""
    token = token.strip()
    if len(token) < 16:
        raise ConfigError("the bearer token must have at least 16 characters")
    if not all(33 <= ord(c) <= 126 for c in token):
        raise ConfigError("the bearer token must be printable ASCII without spaces")
    return token.encode("ascii")
_FD_RESERVE = 128
_MAX_AUTO_CONNECTIONS = 1024


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one (as the Go runtime does at start); returns the soft limit."""
    if resource is None:  # pragma: no cover
        return 1 << 20
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY:
        return soft if soft != resource.RLIM_INFINITY else 1 << 20
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def default_max_connections(open_files: int | None = None) -> int:
    """Connections per receiver when not configured: half of what the open-file limit leaves after a reserve."""
    if open_files is None and resource is None:  # pragma: no cover
        open_files = 1 << 20
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if open_files == resource.RLIM_INFINITY:
            open_files = 1 << 20
    return max(16, min(_MAX_AUTO_CONNECTIONS, (open_files - _FD_RESERVE) // 2))


class BearerToken:
    """The tokens clients must send as ``Authorization: Bearer <token>``, each naming a tenant; compared in constant
    time.

    A token never appears in a ``repr``, a ``str`` or a log line: only :meth:`tenant` and :meth:`matches` read it.

    Args:
        token: the secret (surrounding whitespace removed); at least 16 characters, printable ASCII.
        tenant: who sends with it (:data:`DEFAULT_TENANT` for a bare token).

    Raises:
        ConfigError: the token is too short or has characters a header cannot carry.
    """

    __slots__ = ("_tokens", "named")

    def __init__(self, token: str, tenant: str = DEFAULT_TENANT) -> None:
        self._tokens: tuple[tuple[str, bytes], ...] = ((tenant, _token_bytes(token)),)
        #: Whether the tokens name tenants (a ``TENANT TOKEN`` line): then serve keys traces by (tenant, trace id).
        self.named = False

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BearerToken:
        """Read the tokens from a file (at most 64 KiB): one per line, ``TOKEN`` (tenant ``default``) or
        ``TENANT TOKEN``; blank lines and lines starting with ``#`` are skipped.

        Raises:
            ConfigError: the file cannot be read, holds no valid token, a bad tenant name, or a tenant or token
                twice (the message never shows a token).
        """
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the bearer token file: {exc.strerror or exc}") from None
        if len(data) > MAX_TOKEN_BYTES:
            raise ConfigError(f"{path}: the bearer token file is larger than {MAX_TOKEN_BYTES} bytes")
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: the bearer token must be printable ASCII") from None
        try:
            return cls._from_lines(text.splitlines())
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    @classmethod
    def _from_lines(cls, lines: list[str]) -> BearerToken:
        pairs: list[tuple[str, bytes]] = []
        named = False
        for number, line in enumerate(lines, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) > 2:
                raise ConfigError(f"line {number}: expected TOKEN or TENANT TOKEN")
            tenant, token = (DEFAULT_TENANT, words[0]) if len(words) == 1 else (words[0], words[1])
            named = named or len(words) == 2
            if not _TENANT.fullmatch(tenant):
                raise ConfigError(f"line {number}: a tenant name is 1-64 letters, digits, '.', '_' or '-'")
            try:
                pairs.append((tenant, _token_bytes(token)))
            except ConfigError as exc:
                raise ConfigError(f"line {number}: {exc}") from None
        if not pairs:
            raise ConfigError("the bearer token must have at least 16 characters")
        if len({t for t, _ in pairs}) < len(pairs) or len({k for _, k in pairs}) < len(pairs):
            raise ConfigError("each tenant and each token may appear once")
        tokens = cls.__new__(cls)
        tokens._tokens, tokens.named = tuple(pairs), named
        return tokens

    def tenant(self, authorization: str | bytes | None) -> str | None:
        """The tenant whose token an ``Authorization`` header value carries (scheme ``Bearer``, any case), or None."""
        if authorization is None:
            return None
        raw = authorization.encode("latin-1", "replace") if isinstance(authorization, str) else authorization
        scheme, _, given = raw.strip().partition(b" ")
        given = given.strip()
        found = None
        # Every token is compared in full, whatever the scheme or an earlier match: the time taken says nothing
        # about any token.
        for tenant, expected in self._tokens:
            if hmac.compare_digest(given, expected):
                found = tenant
        return found if scheme.lower() == b"bearer" else None

    def matches(self, authorization: str | bytes | None) -> bool:
        """Whether an ``Authorization`` header value carries one of the tokens."""
        return self.tenant(authorization) is not None

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a BearerToken cannot be pickled")


@dataclass(frozen=True)
class TLSFiles:
    """Server certificate and key (PEM), and optionally the CA that client certificates must chain to (mTLS).

    Raises:
        ConfigError: a file cannot be read, or the certificate and key do not match.
    """

    cert: str
    key: str
    client_ca: str | None = None

    def __post_init__(self) -> None:
        for what, path in (("--tls-cert", self.cert), ("--tls-key", self.key), ("--tls-client-ca", self.client_ca)):
            if path is not None and not os.path.isfile(path):
                raise ConfigError(f"{what} {path}: no such file")
        self.ssl_context()  # fail at configuration time, not at the first connection

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side context: TLS 1.2 or later, the certificate, and client verification with a client CA."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert, self.key)
            if self.client_ca is not None:
                context.load_verify_locations(self.client_ca)
                context.verify_mode = ssl.CERT_REQUIRED
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"TLS files {self.cert}, {self.key}: {exc}") from None
        context.set_alpn_protocols(["http/1.1"])
        return context

    def grpc_credentials(self) -> tuple[bytes, bytes, bytes | None]:
        """(private key, certificate chain, client CA or None) as PEM bytes, for ``grpc.ssl_server_credentials``."""
        client_ca = Path(self.client_ca).read_bytes() if self.client_ca is not None else None
        return Path(self.key).read_bytes(), Path(self.cert).read_bytes(), client_ca


@dataclass(frozen=True)
class ServeSettings:
    """Everything about how ``serve``'s receivers accept connections and requests (see the module for defaults).

    Attributes:
        max_body: largest request in bytes, before and after gzip decompression.
        header_timeout: seconds from a request's first byte (or a TLS handshake's start) to the end of its headers.
        idle_timeout: seconds a connection may stay open without a request in progress.
        body_timeout: seconds to receive one request body.
        max_connections: open connections per receiver (None: :func:`default_max_connections` when started).
        max_concurrent_requests: HTTP request bodies read and decoded at once.
        backlog: the listen queue length.
        grpc_max_concurrent_streams: streams per gRPC connection.
        grpc_max_concurrent_rpcs: gRPC calls in progress before new ones get ``RESOURCE_EXHAUSTED``.
        grpc_max_connection_age: seconds after which a gRPC connection is asked to reconnect (None: never).
        shutdown_timeout: seconds SIGTERM or SIGINT waits for open traces to be judged and their events, metrics
            and forwarded requests to leave; what is still pending then is dropped (and said so).
        tls: certificate, key and client CA; None for plain TCP.
        bearer_token: the token every request must carry; None for no authentication.
    """

    max_body: int = 16 * 1024 * 1024
    header_timeout: float = 10.0
    idle_timeout: float = 60.0
    body_timeout: float = 60.0
    max_connections: int | None = None
    max_concurrent_requests: int = 16
    backlog: int = 1024
    grpc_max_concurrent_streams: int = 100
    grpc_max_concurrent_rpcs: int = 64
    grpc_max_connection_age: float | None = None
    shutdown_timeout: float = 5.0
    tls: TLSFiles | None = None
    bearer_token: BearerToken | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_body", "max_concurrent_requests", "backlog", "grpc_max_concurrent_streams",
                     "grpc_max_concurrent_rpcs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.max_connections is not None and (
                isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int)
                or self.max_connections <= 0):
            raise ConfigError(f"max_connections must be a positive integer, got {self.max_connections!r}")
        for name in ("header_timeout", "idle_timeout", "body_timeout", "grpc_max_connection_age", "shutdown_timeout"):
            value = getattr(self, name)
            if value is None and name == "grpc_max_connection_age":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")

    def connections(self) -> int:
        """The connection cap per receiver in force."""
        return self.max_connections if self.max_connections is not None else default_max_connections()

    def with_values(self, values: Mapping[str, Any]) -> ServeSettings:
        """A copy with ``values`` (setting names as keys; None values ignored)."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


# The [serve] keys: the command's long options with "_" for "-" (addresses and files as strings).
SETTING_NAMES = tuple(f.name for f in fields(ServeSettings) if f.name not in ("tls", "bearer_token"))
SERVE_TABLE_KEYS = frozenset({
    "grpc", "http", "idle", "forward", "tls_cert", "tls_key", "tls_client_ca", "bearer_token_file", "status",
    "trace_url", "quiet", *SETTING_NAMES,
})


def read_serve_table(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``[serve]`` table of a TOML configuration file (empty when it has none), keys checked.

    Raises:
        ConfigError: the file is not a regular file of at most 1 MiB, is not TOML, or the table has an unknown key
            or a value of the wrong type.
    """
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: the configuration must be a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: the configuration file is larger than {MAX_CONFIG_BYTES} bytes")
        with open(path, "rb") as fh:
            data = tomllib.loads(fh.read(MAX_CONFIG_BYTES + 1).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("serve", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [serve] must be a TOML table")
    unknown = sorted(set(table) - SERVE_TABLE_KEYS)
    if unknown:
        raise ConfigError(f"{path}: [serve]: unknown key(s) {', '.join(unknown)}")
    for key in ("grpc", "http", "tls_cert", "tls_key", "tls_client_ca", "bearer_token_file", "status", "trace_url"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{path}: [serve] {key} must be a string, got {table[key]!r}")
    for key in ("forward", "quiet"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigError(f"{path}: [serve] {key} must be true or false, got {table[key]!r}")
    for key in ("idle", *SETTING_NAMES):
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{path}: [serve] {key} must be a number, got {value!r}")
    return dict(table)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def exposure_warnings(hosts: Mapping[str, str], tls: bool, token: bool, mtls: bool) -> list[str]:
    """Warnings for receivers bound beyond loopback without TLS or without authentication.

    Args:
        hosts: receiver name (``OTLP/gRPC``, ``OTLP/HTTP``) to the host it binds.
        tls: TLS is on; ``token``: a bearer token is required; ``mtls``: client certificates are required.
    """
    exposed = [f"{name} on {host}" for name, host in hosts.items() if not is_loopback(host)]
    if not exposed:
        return []
    where = " and ".join(exposed)
    warnings = []
    if not token and not mtls:
        warnings.append(
            f"{where} accepts spans from anyone who can reach it (no --bearer-token-file, no --tls-client-ca): "
            "they can forge verdicts and interventions for any trace id and fill the trace table")
    if not tls:
        warnings.append(
            f"{where} is not encrypted (no --tls-cert/--tls-key): tool arguments and results in the spans"
            + (", and the bearer token," if token else "") + " cross the network in clear text")
    return warnings
