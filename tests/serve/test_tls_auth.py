"""TLS, mutual TLS and the bearer token on both receivers; the exposure warning; the ``[serve]`` table."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from google.rpc import status_pb2

from otel_loopguard import cli
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.errors import ConfigError
from otel_loopguard.serve.server import command_settings
from otel_loopguard.serve.settings import BearerToken, ServeSettings, TLSFiles, exposure_warnings
from tests.support.certs import Certs, make_certs

from ._child import REPO, serve_command
from ._net import closed_by_peer
from ._support import EXPORT_METHOD, FIXTURE_FILES, Harness, post, to_proto

GOOD = FIXTURE_FILES[0]
SPANS = sum(len(ss["spans"]) for rs in json.loads(GOOD.read_text())["resourceSpans"] for ss in rs["scopeSpans"])
TOKEN = "s3cr3t-t0ken-0123456789abcdef"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, a server certificate for 127.0.0.1, a client it signed and a client another CA signed."""
    return make_certs(tmp_path_factory.mktemp("certs"))


def _https_post(port: int, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(f"https://127.0.0.1:{port}/v1/traces", data=GOOD.read_bytes(),
                                     headers={"Content-Type": "application/json", **(headers or {})}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _client_context(certs: Certs, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def _grpc_export(port: int, credentials: grpc.ChannelCredentials | None, metadata: tuple[tuple[str, str], ...] = ()
                 ) -> None:
    target = f"127.0.0.1:{port}"
    with (grpc.secure_channel(target, credentials) if credentials is not None else grpc.insecure_channel(target)) as ch:
        export = ch.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        export(to_proto(json.loads(GOOD.read_text())), timeout=10, metadata=metadata)


def _grpc_code(port: int, credentials: grpc.ChannelCredentials | None,
               metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    try:
        _grpc_export(port, credentials, metadata)
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        return code
    return grpc.StatusCode.OK


def test_tls_on_both_receivers(certs: Certs) -> None:
    """With a certificate and key, both receivers speak TLS only: a client trusting the CA gets through, a
    plain-text client does not, and only the TLS requests' spans are judged."""
    settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key)))
    with Harness(settings=settings) as h:
        assert _https_post(h.server.http_port, _client_context(certs)) == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            post(h.server.http_port, GOOD.read_bytes(), "application/json")
        credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
        assert _grpc_code(h.server.grpc_port, credentials) == grpc.StatusCode.OK
        assert _grpc_code(h.server.grpc_port, None) == grpc.StatusCode.UNAVAILABLE
        assert h.server.stats().spans == 2 * SPANS


def test_mutual_tls_accepts_only_clients_of_the_client_ca(certs: Certs) -> None:
    """With --tls-client-ca, a client without a certificate and one signed by another CA are refused during the
    handshake on both receivers; a client signed by the client CA gets through."""
    settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key), str(certs.ca)))
    with Harness(settings=settings) as h:
        port = h.server.http_port
        for context in (_client_context(certs), _client_context(certs, certs.rogue_cert, certs.rogue_key)):
            with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError, OSError)):
                _https_post(port, context)
        assert _https_post(port, _client_context(certs, certs.client_cert, certs.client_key)) == 200
        ca = certs.ca.read_bytes()
        refused = [
            grpc.ssl_channel_credentials(root_certificates=ca),
            grpc.ssl_channel_credentials(root_certificates=ca, private_key=certs.rogue_key.read_bytes(),
                                         certificate_chain=certs.rogue_cert.read_bytes()),
        ]
        for credentials in refused:
            assert _grpc_code(h.server.grpc_port, credentials) == grpc.StatusCode.UNAVAILABLE
        accepted = grpc.ssl_channel_credentials(root_certificates=ca, private_key=certs.client_key.read_bytes(),
                                                certificate_chain=certs.client_cert.read_bytes())
        assert _grpc_code(h.server.grpc_port, accepted) == grpc.StatusCode.OK
        assert h.server.stats().spans == 2 * SPANS


def test_bearer_token_on_http(caplog: pytest.LogCaptureFixture) -> None:
    """Without the token, or with a wrong one, a request is 401 with WWW-Authenticate and a google.rpc.Status of code
    16 (UNAUTHENTICATED) in the request's encoding, and nothing is judged; the right token (scheme in any case)
    passes. The token appears in no log line."""
    caplog.set_level(logging.DEBUG)
    with Harness(settings=ServeSettings(bearer_token=BearerToken(TOKEN))) as h:
        port = h.server.http_port
        status, reply, _ = post(port, GOOD.read_bytes(), "application/json")
        assert status == 401
        assert json.loads(reply) == {"code": 16, "message": "missing or invalid bearer token"}
        body = to_proto(json.loads(GOOD.read_text()))
        for header in ({"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": TOKEN},
                       {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN[:-1]}"}):
            status, reply, _ = post(port, body, "application/x-protobuf", headers=header)
            assert status == 401, header
            assert status_pb2.Status.FromString(reply).code == 16
        assert h.server.stats().spans == 0
        assert post(port, GOOD.read_bytes(), "application/json", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert post(port, body, "application/x-protobuf", headers={"Authorization": f"bearer {TOKEN}"})[0] == 200
        assert h.server.stats().spans == 2 * SPANS
        stats = h.server.connection_stats()
        assert stats is not None and stats.unauthenticated == 5
        assert h.server.stats().rejected_requests == 5
    assert TOKEN not in caplog.text


def test_bearer_token_on_grpc() -> None:
    """gRPC: no token or a wrong one is UNAUTHENTICATED before decoding; the right one passes."""
    with Harness(settings=ServeSettings(bearer_token=BearerToken(TOKEN))) as h:
        port = h.server.grpc_port
        assert _grpc_code(port, None) == grpc.StatusCode.UNAUTHENTICATED
        assert _grpc_code(port, None, (("authorization", f"Bearer {TOKEN}0"),)) == grpc.StatusCode.UNAUTHENTICATED
        assert _grpc_code(port, None, (("authorization", f"Bearer {TOKEN}"),)) == grpc.StatusCode.OK
        assert h.server.grpc_unauthenticated == 2
        assert h.server.stats().spans == SPANS


def test_tls_and_token_together(certs: Certs) -> None:
    """Both at once: TLS and the token are each required."""
    settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key)),
                             bearer_token=BearerToken(TOKEN))
    with Harness(settings=settings) as h:
        context = _client_context(certs)
        assert _https_post(h.server.http_port, context) == 401
        assert _https_post(h.server.http_port, context, {"Authorization": f"Bearer {TOKEN}"}) == 200
        credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
        assert _grpc_code(h.server.grpc_port, credentials) == grpc.StatusCode.UNAUTHENTICATED
        assert _grpc_code(h.server.grpc_port, credentials, (("authorization", f"Bearer {TOKEN}"),)) \
            == grpc.StatusCode.OK


def test_the_token_is_never_shown(tmp_path: Path) -> None:
    """Neither repr nor str of the token or the settings holds it; it cannot be pickled; errors about a token file
    name the file, never its content."""
    token = BearerToken(TOKEN)
    settings = ServeSettings(bearer_token=token)
    for text in (repr(token), str(token), repr(settings), str(settings)):
        assert TOKEN not in text
    with pytest.raises(TypeError):
        pickle.dumps(token)
    short = tmp_path / "short"
    short.write_text("tiny-secret\n")
    with pytest.raises(ConfigError) as info:
        BearerToken.from_file(short)
    assert "tiny-secret" not in str(info.value) and str(short) in str(info.value)
    spaced = tmp_path / "spaced"
    spaced.write_text("two words of secret text\n")
    with pytest.raises(ConfigError) as info:
        BearerToken.from_file(spaced)
    assert "secret" not in str(info.value).replace(str(spaced), "")
    good = tmp_path / "good"
    good.write_text(f"  {TOKEN}\n")
    assert BearerToken.from_file(good).matches(f"Bearer {TOKEN}")


def test_exposure_warnings_name_the_risk() -> None:
    """Beyond loopback: no auth → anyone can forge verdicts; no TLS → clear text. Loopback, or TLS with a token or
    client certificates: no warning."""
    hosts = {"OTLP/HTTP": "0.0.0.0", "OTLP/gRPC": "127.0.0.1"}
    plain = exposure_warnings(hosts, tls=False, token=False, mtls=False)
    assert len(plain) == 2
    assert "OTLP/HTTP on 0.0.0.0" in plain[0] and "forge verdicts" in plain[0] and "OTLP/gRPC" not in plain[0]
    assert "clear text" in plain[1]
    assert "bearer token" in exposure_warnings(hosts, tls=False, token=True, mtls=False)[0]
    assert exposure_warnings(hosts, tls=True, token=True, mtls=False) == []
    assert exposure_warnings(hosts, tls=True, token=False, mtls=True) == []
    assert exposure_warnings({"OTLP/HTTP": "localhost", "OTLP/gRPC": "::1"}, tls=False, token=False, mtls=False) == []
    assert len(exposure_warnings({"OTLP/gRPC": "agents.internal"}, tls=False, token=False, mtls=False)) == 2


def test_command_prints_the_warning_before_binding() -> None:
    """``serve --http 192.0.2.1:4318`` (an address this machine does not have: nothing is exposed) warns about the
    missing TLS and authentication, then fails to bind with one error line and exit status 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-m", "otel_loopguard.cli", "serve", "--grpc", "", "--http",
                           "192.0.2.1:4318"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith("otel-loopguard serve: WARNING: OTLP/HTTP on 192.0.2.1 accepts spans from anyone")
    assert "clear text" in lines[1]
    assert lines[-1].startswith("otel-loopguard: error:")


def _config(tmp_path: Path, certs: Certs, extra: str = "") -> Path:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    path = tmp_path / "loopguard.toml"
    path.write_text(f"""window = 10

[serve]
http = "127.0.0.1:0"
grpc = "127.0.0.1:0"
idle = 600
tls_cert = "{certs.server_cert}"
tls_key = "{certs.server_key}"
bearer_token_file = "{token_file}"
max_connections = 7
header_timeout = 2.5
{extra}""")
    return path


def test_serve_table_sets_every_option_and_flags_win(tmp_path: Path, certs: Certs) -> None:
    """The [serve] table fills the options the command line omits; a flag wins; the engine's configuration loads
    the same file; an unknown key or a lone certificate is an error naming it."""
    path = _config(tmp_path, certs)
    assert LoopGuardConfig.load(path).window == 10
    args = cli.build_parser().parse_args(["serve", "--config", str(path), "--max-connections", "9"])
    command = command_settings(args, {})
    assert (command.http, command.grpc, command.idle) == ("127.0.0.1:0", "127.0.0.1:0", 600.0)
    assert command.settings.max_connections == 9  # the flag
    assert command.settings.header_timeout == 2.5  # the file
    assert command.settings.tls is not None and command.settings.tls.cert == str(certs.server_cert)
    assert command.settings.bearer_token is not None and command.settings.bearer_token.matches(f"Bearer {TOKEN}")
    # LOOPGUARD_CONFIG names the file when --config does not.
    from_env = command_settings(cli.build_parser().parse_args(["serve"]), {"LOOPGUARD_CONFIG": str(path)})
    assert from_env.settings.max_connections == 7
    bad = _config(tmp_path, certs, "max_conections = 3\n")
    with pytest.raises(ConfigError, match=r"\[serve\]: unknown key\(s\) max_conections"):
        command_settings(cli.build_parser().parse_args(["serve", "--config", str(bad)]), {})
    with pytest.raises(ConfigError, match="--tls-cert and --tls-key go together"):
        command_settings(cli.build_parser().parse_args(["serve", "--tls-cert", str(certs.server_cert)]), {})
    with pytest.raises(ConfigError, match="header_timeout"):
        command_settings(cli.build_parser().parse_args(["serve", "--header-timeout", "0"]), {})


def test_command_with_tls_and_token_from_the_config_file(tmp_path: Path, certs: Certs) -> None:
    """``serve --config FILE`` whose [serve] table sets TLS and the token: an HTTPS request with the token is
    judged, one without is refused; the token is not in the command's output."""
    path = _config(tmp_path, certs)
    # Nothing listens there (the exporters' failures are logged); this test looks at the receivers only.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    with serve_command(["--config", str(path)], env) as (proc, line):
        match = re.search(r"grpc 127\.0\.0\.1:(\d+), http 127\.0\.0\.1:(\d+) \(tls, bearer token required; at most "
                          r"7 connections", line)
        assert match, line
        port = int(match.group(2))
        assert _https_post(port, _client_context(certs)) == 401
        assert _https_post(port, _client_context(certs), {"Authorization": f"Bearer {TOKEN}"}) == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        rest = proc.stderr.read()
    assert f"stopped after {SPANS} spans" in rest
    assert TOKEN not in line + rest


def test_a_stalled_tls_handshake_is_cut_at_the_header_timeout(certs: Certs) -> None:
    """A client that connects to the TLS receiver and never sends its ClientHello is disconnected after
    header_timeout, like a client that never sends its headers; the receiver then serves a real client."""
    settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key)), header_timeout=0.5)
    with Harness(settings=settings) as h:
        with socket.create_connection(("127.0.0.1", h.server.http_port), timeout=10) as sock:
            assert closed_by_peer(sock, within=20)
        assert _https_post(h.server.http_port, _client_context(certs)) == 200
