"""Tenants in ``serve``: a token file of ``TENANT TOKEN`` lines, traces keyed by (tenant, trace id), events that
name the tenant (issue 28, point 2: no isolation between senders)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from otel_loopguard.errors import ConfigError
from otel_loopguard.serve.settings import BearerToken, ServeSettings
from tests.serve._support import EXPORT_METHOD, Harness, post, to_proto

ACME, GLOBEX, BARE = "acme-token-0123456789", "globex-token-0123456789", "bare-token-0123456789"
T0 = 1_767_225_600 * 10**9
TRACE = 0xABC


def _tokens(tmp_path: Path, text: str) -> BearerToken:
    path = tmp_path / "tokens"
    path.write_text(text)
    return BearerToken.from_file(path)


def _calls(first: int, count: int) -> dict[str, Any]:
    """``count`` identical search calls (same arguments and result) in trace TRACE, span ids from ``first``."""
    spans = [{"traceId": f"{TRACE:032x}", "spanId": f"{first + i:016x}", "name": "execute_tool search",
              "startTimeUnixNano": str(T0 + (first + i) * 10**9),
              "endTimeUnixNano": str(T0 + (first + i) * 10**9 + 10**8),
              "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (
                  ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "search"),
                  ("gen_ai.tool.call.arguments", '{"q": "same"}'), ("gen_ai.tool.call.result", "nothing"))]}
             for i in range(count)]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def _send(port: int, token: str, doc: dict[str, Any]) -> int:
    return post(port, json.dumps(doc).encode(), "application/json", headers={"Authorization": f"Bearer {token}"})[0]


def test_token_file_lines_name_tenants(tmp_path: Path) -> None:
    """``TENANT TOKEN`` lines name tenants, a bare token is tenant "default", comments and blank lines are skipped;
    a wrong scheme or an unknown token has no tenant."""
    tokens = _tokens(tmp_path, f"# senders\nacme {ACME}\n\nglobex {GLOBEX}\n{BARE}\n")
    assert tokens.named
    assert [tokens.tenant(f"Bearer {t}") for t in (ACME, GLOBEX, BARE)] == ["acme", "globex", "default"]
    assert tokens.tenant(f"Basic {ACME}") is None and tokens.tenant(f"Bearer {ACME}x") is None
    assert not _tokens(tmp_path, f"{BARE}\n").named  # one bare token: no tenants, as before


@pytest.mark.parametrize(("text", "error"), [
    (f"acme {ACME}\nacme {GLOBEX}\n", "each tenant and each token may appear once"),
    (f"acme {ACME}\nglobex {ACME}\n", "each tenant and each token may appear once"),
    (f"ac/me {ACME}\n", "line 1: a tenant name is 1-64 letters, digits, '.', '_' or '-'"),
    (f"acme {ACME} extra\n", "line 1: expected TOKEN or TENANT TOKEN"),
    ("acme short\n", "line 1: the bearer token must have at least 16 characters"),
])
def test_bad_token_files_are_refused_in_one_line(tmp_path: Path, text: str, error: str) -> None:
    """A repeated tenant or token, a bad tenant name, extra words or a short token: one error naming the line."""
    with pytest.raises(ConfigError) as caught:
        _tokens(tmp_path, text)
    assert str(caught.value) == f"{tmp_path / 'tokens'}: {error}"
    assert ACME not in str(caught.value)


def test_two_tenants_sharing_a_trace_id_are_two_traces(tmp_path: Path) -> None:
    """Two calls from each tenant into one trace id stay two traces of two calls (the default config needs three
    identical calls to be stuck): no event. acme's third call makes only acme's trace stuck, and the event names
    the tenant, also as the loopguard.tenant attribute of the exported record."""
    tokens = _tokens(tmp_path, f"acme {ACME}\nglobex {GLOBEX}\n")
    with Harness(settings=ServeSettings(bearer_token=tokens)) as h:
        port = h.server.http_port
        assert _send(port, ACME, _calls(1, 2)) == 200
        assert _send(port, GLOBEX, _calls(11, 2)) == 200
        assert h.events == []
        assert _send(port, ACME, _calls(3, 1)) == 200
        assert [(e.tenant, e.verdict.kind, e.steps) for e in h.events] == [("acme", "stuck", 3)]
        h.logger_provider.force_flush()
        records = [r.log_record for r in h.logs.get_finished_logs() if r.log_record.event_name == "loopguard.verdict"]
        assert [r.attributes["loopguard.tenant"] for r in records] == ["acme"]


def test_grpc_requests_carry_their_tenant(tmp_path: Path) -> None:
    """Over gRPC the tenant comes from the authorization metadata: globex's three calls are globex's stuck trace."""
    tokens = _tokens(tmp_path, f"acme {ACME}\nglobex {GLOBEX}\n")
    with Harness(settings=ServeSettings(bearer_token=tokens)) as h, \
            grpc.insecure_channel(f"127.0.0.1:{h.server.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        export(to_proto(_calls(1, 3)), timeout=60, metadata=(("authorization", f"Bearer {GLOBEX}"),))
        assert [(e.tenant, e.verdict.kind) for e in h.events] == [("globex", "stuck")]


def test_without_tenants_one_trace_id_is_one_trace() -> None:
    """Without tokens (loopback default) spans of one trace id from several senders are one trace, as distributed
    tracing requires: two plus one identical calls are stuck, and the event names no tenant."""
    with Harness() as h:
        port = h.server.http_port
        post(port, json.dumps(_calls(1, 2)).encode(), "application/json")
        post(port, json.dumps(_calls(11, 1)).encode(), "application/json")
        assert [(e.tenant, e.verdict.kind) for e in h.events] == [(None, "stuck")]


def test_the_status_page_names_each_row_s_tenant(tmp_path: Path) -> None:
    """With tenants, the status page's held trace and its events carry the tenant that sent them, in the JSON and
    as a column of the page; without tenants the column is not shown."""
    from tests.serve._loop_request import loop_request
    from tests.serve.test_status_page import _get

    tokens = _tokens(tmp_path, f"acme {ACME}\nglobex {GLOBEX}\n")
    auth = {"Authorization": f"Bearer {ACME}"}
    with Harness(settings=ServeSettings(bearer_token=tokens), status="127.0.0.1:0") as h:
        body = loop_request("4bf92f3577b34da6a3ce929d0e0e4736")
        assert post(h.server.http_port or 0, body, "application/json", headers=auth)[0] == 200
        port = h.server.status_port or 0
        doc = json.loads(_get(port, "/traces.json", auth)[1])
        page = _get(port, "/", auth)[1]
    assert [t["tenant"] for t in doc["traces"]] == ["acme"]
    assert {e["tenant"] for e in doc["events"]} == {"acme"}
    assert "<th>tenant</th>" in page and "<td>acme</td>" in page
    with Harness(status="127.0.0.1:0") as h:
        assert post(h.server.http_port or 0, body, "application/json")[0] == 200
        page = _get(h.server.status_port or 0, "/")[1]
    assert "<th>tenant</th>" not in page
