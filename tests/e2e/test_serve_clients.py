"""Real OTLP clients → ``serve`` → verdict events at a recording OTLP backend, with and without TLS and the token.

Clients: the Node.js OpenTelemetry trace exporters (``@opentelemetry/exporter-trace-otlp-proto``, ``-http`` (JSON) and
``-grpc``, pinned in ``tests/e2e/node/package-lock.json``, installed here with ``npm ci`` once per lock file), run by
``tests/e2e/node/send.mjs``; and the Python SDK's OTLP span exporters (gRPC and HTTP/protobuf). Each sends one looping
agent trace (four identical ``search`` calls), with and without gzip; ``serve`` judges it and its ``loopguard.verdict``
(stuck) event, with the trace id and the id of a tool span the client created, reaches the recording backend through
the SDK's OTLP log exporter.

Without Node.js, npm or the registry the Node tests skip; under ``LOOPGUARD_REQUIRE_E2E=1`` they fail.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from otel_loopguard.conventions.verdicts import VerdictEvent
from otel_loopguard.core.config import LoopGuardConfig
from otel_loopguard.serve.server import Server
from otel_loopguard.serve.settings import BearerToken, ServeSettings, TLSFiles
from tests.support.certs import Certs, make_certs
from tests.support.external import unavailable
from tests.support.otlp_receiver import RecordingOTLPReceiver

NODE_DIR = Path(__file__).parent / "node"
TOKEN = "e2e-token-0123456789abcdefghij"
WAIT = 20.0
SECURITY = ("plain", "tls+token", "mtls")


@pytest.fixture(autouse=True)
def _no_ca_bundle_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests (under the Python HTTP exporter) lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE replace the exporter's own
    certificate_file; a machine that sets them would make every TLS export here fail verification."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


# -- Node.js ----------------------------------------------------------------------------------------------------


def _node_unavailable() -> str | None:
    """Why the Node.js clients cannot run, or None after making sure ``npm ci`` installed the locked packages."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "node and npm are not installed"
    lock = (NODE_DIR / "package-lock.json").read_bytes()
    stamp = NODE_DIR / "node_modules" / ".loopguard-lock-sha256"
    digest = hashlib.sha256(lock).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest:
        return None
    # --ignore-scripts: nothing the tests use needs an install script (protobufjs's only checks its version).
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return f"npm ci failed: {done.stderr.strip()[-500:]}"
    stamp.write_text(digest)
    return None


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """The directory of send.mjs with its node_modules installed; skips (or fails under LOOPGUARD_REQUIRE_E2E=1)."""
    reason = _node_unavailable()
    if reason is not None:
        unavailable(f"Node.js OTLP exporters unavailable: {reason}")
    return NODE_DIR


def _run_node(node_dir: Path, options: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(["node", str(node_dir / "send.mjs"), json.dumps(options)], capture_output=True,
                          text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert lines, f"send.mjs printed nothing: {done.stderr[-2000:]}"
    return done.returncode, json.loads(lines[-1])


# -- serve and the backend ---------------------------------------------------------------------------------------


@dataclass
class Serve:
    """A started serve judging into a recording backend."""

    server: Server
    logger_provider: LoggerProvider
    receiver: RecordingOTLPReceiver
    security: str
    certs: Certs
    stuck: dict[int, threading.Event]
    lock: threading.Lock

    def expect(self, trace_hex: str) -> threading.Event:
        with self.lock:
            return self.stuck.setdefault(int(trace_hex, 16), threading.Event())

    def http_url(self) -> str:
        scheme = "http" if self.security == "plain" else "https"
        return f"{scheme}://127.0.0.1:{self.server.http_port}/v1/traces"

    def grpc_url(self) -> str:
        scheme = "http" if self.security == "plain" else "https"
        return f"{scheme}://127.0.0.1:{self.server.grpc_port}"

    def client_files(self) -> dict[str, str]:
        """TLS files a client of this serve uses (none for plain)."""
        if self.security == "plain":
            return {}
        files = {"ca": str(self.certs.ca)}
        if self.security == "mtls":
            files.update(cert=str(self.certs.client_cert), key=str(self.certs.client_key))
        return files

    def token(self) -> str | None:
        return TOKEN if self.security == "tls+token" else None

    def check_verdict(self, trace_hex: str, tool_span_ids: list[str]) -> None:
        """serve called the trace stuck, and that event, with the causing tool span, reached the backend."""
        assert self.expect(trace_hex).wait(WAIT), f"serve did not judge trace {trace_hex} stuck"
        assert self.logger_provider.force_flush(10_000)

        def arrived(r: RecordingOTLPReceiver) -> bool:
            return any(rec["trace_id"] == trace_hex and rec["attributes"].get("loopguard.verdict") == "stuck"
                       for rec in r.log_records())

        assert self.receiver.wait_for(arrived, timeout=WAIT)
        record = next(rec for rec in self.receiver.log_records()
                      if rec["trace_id"] == trace_hex and rec["attributes"].get("loopguard.verdict") == "stuck")
        assert record["event_name"] == "loopguard.verdict"
        assert record["span_id"] in tool_span_ids
        assert record["attributes"]["gen_ai.tool.name"] == "search"
        assert record["resource"]["service.name"] == "otel-loopguard"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """Certificates for the TLS modes."""
    return make_certs(tmp_path_factory.mktemp("e2e-certs"))


@pytest.fixture(scope="module", params=SECURITY)
def serve(request: pytest.FixtureRequest, certs: Certs) -> Iterator[Serve]:
    """serve in one of three modes: plain; TLS with the bearer token; mutual TLS."""
    security: str = request.param
    settings = ServeSettings()
    if security == "tls+token":
        settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key)),
                                 bearer_token=BearerToken(TOKEN))
    elif security == "mtls":
        settings = ServeSettings(tls=TLSFiles(str(certs.server_cert), str(certs.server_key), str(certs.ca)))
    with RecordingOTLPReceiver() as receiver:
        resource = Resource.create({"service.name": "otel-loopguard"})
        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"http://{receiver.endpoint}", insecure=True)))
        meter_provider = MeterProvider(resource=resource)
        server = Server(LoopGuardConfig(), grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", idle=600,
                        logger_provider=logger_provider, meter_provider=meter_provider, settings=settings)
        state = Serve(server, logger_provider, receiver, security, certs, {}, threading.Lock())

        def on_event(event: VerdictEvent) -> None:
            if event.verdict.kind == "stuck":
                with state.lock:
                    state.stuck.setdefault(event.trace_id, threading.Event()).set()

        server.add_listener(on_event)
        with server:
            yield state
        logger_provider.shutdown()
        meter_provider.shutdown()


# -- the tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gzip", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json", "grpc"])
def test_node_exporter_gets_its_loop_judged(node_clients: Path, serve: Serve, protocol: str, gzip: bool) -> None:
    """A Node.js agent exporting with @opentelemetry/exporter-trace-otlp-{proto,http,grpc} (HTTP bodies are chunked):
    its export succeeds and its stuck verdict event reaches the backend."""
    url = serve.grpc_url() if protocol == "grpc" else serve.http_url()
    options: dict[str, Any] = {"protocol": protocol, "url": url, "gzip": gzip, **serve.client_files()}
    if serve.token() is not None:
        options["token"] = serve.token()
    status, out = _run_node(node_clients, options)
    assert status == 0, out
    serve.check_verdict(out["traceId"], out["toolSpanIds"])


@pytest.mark.parametrize("serve", ["tls+token", "mtls"], indirect=True)
@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json", "grpc"])
def test_node_exporter_without_the_right_credentials_is_refused(node_clients: Path, serve: Serve,
                                                               protocol: str) -> None:
    """With a wrong token (TLS + token) or without a client certificate (mutual TLS) the Node.js export fails and
    nothing of the trace is judged."""
    url = serve.grpc_url() if protocol == "grpc" else serve.http_url()
    # A short timeout: a refused TLS handshake is retried until it runs out.
    options: dict[str, Any] = {"protocol": protocol, "url": url, "ca": str(serve.certs.ca), "timeoutMillis": 2000}
    if serve.security == "tls+token":
        options["token"] = TOKEN + "-wrong"
    spans_before = serve.server.stats().spans
    status, out = _run_node(node_clients, options)
    assert status == 1 and out["results"] and all(r["code"] != 0 for r in out["results"]), out
    assert serve.server.stats().spans == spans_before


class _Recording(SpanExporter):
    """Keeps every export result of the wrapped exporter."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.results: list[SpanExportResult] = []

    def export(self, spans: Any) -> SpanExportResult:
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


def _python_exporter(serve: Serve, protocol: str, gzip: bool, token: str | None,
                     client_cert: bool = True, timeout: float = 10) -> SpanExporter:
    files = serve.client_files()
    if not client_cert:
        files = {"ca": files["ca"]}
    headers = {"authorization": f"Bearer {token}"} if token else None
    if protocol == "grpc":
        credentials = None
        if files:
            read = {k: Path(v).read_bytes() for k, v in files.items()}
            credentials = grpc.ssl_channel_credentials(root_certificates=read["ca"], private_key=read.get("key"),
                                                       certificate_chain=read.get("cert"))
        return GrpcSpanExporter(endpoint=serve.grpc_url(), insecure=not files, credentials=credentials,
                                headers=headers, compression=grpc.Compression.Gzip if gzip else None, timeout=timeout)
    return HttpSpanExporter(
        endpoint=serve.http_url(), certificate_file=files.get("ca"), client_key_file=files.get("key"),
        client_certificate_file=files.get("cert"), headers=headers, timeout=timeout,
        compression=HttpCompression.Gzip if gzip else HttpCompression.NoCompression)


def _python_agent(exporter: SpanExporter) -> tuple[str, list[str], list[SpanExportResult]]:
    recording = _Recording(exporter)
    provider = TracerProvider(resource=Resource.create({"service.name": "python-looping-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(recording))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent researcher", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}) as root:
        trace_hex = f"{root.get_span_context().trace_id:032x}"
        tool_ids = []
        for _ in range(4):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": json.dumps({"query": "weather in Paris"}),
                    "gen_ai.tool.call.result": json.dumps({"hits": []})}) as tool:
                tool_ids.append(f"{tool.get_span_context().span_id:016x}")
    provider.shutdown()
    return trace_hex, tool_ids, recording.results


@pytest.mark.parametrize("gzip", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_python_exporter_gets_its_loop_judged(serve: Serve, protocol: str, gzip: bool) -> None:
    """The Python SDK's OTLP span exporters (gRPC, HTTP/protobuf): every export succeeds, the stuck event arrives."""
    trace_hex, tool_ids, results = _python_agent(_python_exporter(serve, protocol, gzip, serve.token()))
    assert results and all(r == SpanExportResult.SUCCESS for r in results), results
    serve.check_verdict(trace_hex, tool_ids)


@pytest.mark.parametrize("serve", ["tls+token", "mtls"], indirect=True)
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_python_exporter_without_the_right_credentials_is_refused(serve: Serve, protocol: str) -> None:
    """A wrong bearer token, or no client certificate under mutual TLS: every Python export fails and nothing of the
    trace is judged."""
    spans_before = serve.server.stats().spans
    _, _, results = _python_agent(_python_exporter(serve, protocol, False, TOKEN[::-1], client_cert=False,
                                                                   timeout=2))
    assert results and all(r == SpanExportResult.FAILURE for r in results), results
    assert serve.server.stats().spans == spans_before
