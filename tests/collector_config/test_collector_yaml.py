"""Static checks of the Collector configurations in collector-config/ (targeting otelcol-contrib v0.161.0).

The same files run in the real Collector in test_otelcol_*.py; these checks name the rule a file breaks.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from otel_loopguard.conventions import names as n
from tests.support.json_paths import strings_below

from ._collector import merge
from ._support import CONFIG_DIR, load_yaml, names_values

TARGET_RELEASE = "v0.161.0"

# Component type names in otelcol-contrib v0.161.0 (only the families these files may reasonably use). The
# types of the components the files use were read from each module's metadata.yaml at v0.161.0, where
# `otlp_grpc`, `otlp_http` and `load_balancing` replaced `otlp`, `otlphttp` and `loadbalancing` (kept only as
# deprecated aliases, so they are not allowed here); test_otelcol_validate.py checks them in the real build.
ALLOWED: dict[str, frozenset[str]] = {
    "receivers": frozenset({"otlp", "nop", "jaeger", "zipkin", "prometheus", "filelog", "hostmetrics", "kafka",
                            "otlpjsonfile"}),
    "processors": frozenset({"batch", "memory_limiter", "attributes", "transform", "filter", "resource",
                             "resourcedetection", "redaction", "tail_sampling", "probabilistic_sampler",
                             "groupbytrace", "k8sattributes", "span", "cumulativetodelta", "deltatocumulative"}),
    "exporters": frozenset({"otlp_grpc", "otlp_http", "debug", "nop", "prometheus", "prometheusremotewrite",
                            "load_balancing", "file", "kafka", "zipkin"}),
    "extensions": frozenset({"health_check", "pprof", "zpages", "file_storage", "basicauth", "bearertokenauth",
                             "oauth2client", "headers_setter"}),
    "connectors": frozenset({"forward", "count", "routing", "spanmetrics", "servicegraph", "failover",
                             "roundrobin", "sum", "signal_to_metrics"}),
}

# Which signals a used component handles (from each component's README status table at that release).
SIGNALS: dict[str, frozenset[str]] = {
    "tail_sampling": frozenset({"traces"}),
    "load_balancing": frozenset({"traces", "logs", "metrics"}),
    "prometheus": frozenset({"metrics"}),
    "prometheusremotewrite": frozenset({"metrics"}),
}

FULL_CONFIGS = ("agent.yaml", "gateway.yaml", "tail-sampling.yaml")
OVERLAYS = {"agent-raw-copy.yaml": "agent.yaml"}

# Backends that keep data for a long time: anything routed there must be redacted first.
LONG_TERM_EXPORTERS = frozenset({"otlp_grpc/tempo", "otlp_grpc/jaeger", "otlp_http/loki"})
REDACTION = "transform/redact_genai"
SENSITIVE_KEYS = frozenset({
    n.GEN_AI_TOOL_CALL_ARGUMENTS, n.GEN_AI_TOOL_CALL_RESULT, n.GEN_AI_INPUT_MESSAGES, n.GEN_AI_OUTPUT_MESSAGES,
    n.OI_INPUT_VALUE, n.OI_OUTPUT_VALUE, n.TRACELOOP_ENTITY_INPUT, n.TRACELOOP_ENTITY_OUTPUT,
})

_ENV = re.compile(r"\$\{env:(\w+)(?::-([^}]*))?\}")
_ATTR_KEY = re.compile(r'attributes\["([^"]+)"\]')
_DELETE_KEY = re.compile(r'delete_key\((?:\w+\.)?attributes,\s*"([^"]+)"\)')


def _configs() -> dict[str, dict[str, Any]]:
    configs = {name: load_yaml(CONFIG_DIR / name) for name in FULL_CONFIGS}
    for overlay, base in OVERLAYS.items():
        configs[f"{base}+{overlay}"] = merge(configs[base], load_yaml(CONFIG_DIR / overlay))
    return configs


CONFIGS = _configs()


def _defaults(value: str) -> str:
    """Resolve ${env:NAME:-default} to its default, as a Collector started without that variable would."""
    return _ENV.sub(lambda m: m.group(2) or "", value)


@pytest.mark.parametrize("name", [*FULL_CONFIGS, *OVERLAYS])
def test_file_parses_and_has_a_header(name: str) -> None:
    """Each file is valid YAML and opens with a comment naming the release and the otelcol-contrib command."""
    text = (CONFIG_DIR / name).read_text(encoding="utf-8")
    assert isinstance(load_yaml(CONFIG_DIR / name), dict)
    header = text.split("\n\n", 1)[0]
    assert all(line.startswith("#") for line in header.splitlines()), name
    assert TARGET_RELEASE in header and "otelcol-contrib --config" in header, name


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_pipeline_component_is_declared_and_every_declared_component_is_used(name: str) -> None:
    """Pipelines reference only declared components, and nothing declared is left unused."""
    cfg = CONFIGS[name]
    pipelines = cfg["service"]["pipelines"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for pipeline_id, pipeline in pipelines.items():
        assert pipeline_id.split("/")[0] in {"traces", "metrics", "logs"}, pipeline_id
        assert pipeline.get("receivers") and pipeline.get("exporters"), pipeline_id
        for kind in used:
            for component in pipeline.get(kind) or []:
                assert component in (cfg.get(kind) or {}), f"{pipeline_id}: {kind} {component} not declared"
                used[kind].add(component)
    for kind, components in used.items():
        assert set(cfg.get(kind) or {}) == components, f"{kind} declared but unused"
    assert set(cfg["service"].get("extensions") or []) == set(cfg.get("extensions") or {})


@pytest.mark.parametrize("name", list(CONFIGS))
def test_component_types_exist_in_the_target_release(name: str) -> None:
    """Every component type (the part before '/') is one otelcol-contrib v0.161.0 ships, by its current name."""
    cfg = CONFIGS[name]
    for kind, allowed in ALLOWED.items():
        for component in cfg.get(kind) or {}:
            assert component.split("/")[0] in allowed, f"{kind}: {component}"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_components_sit_in_pipelines_of_signals_they_support(name: str) -> None:
    """tail_sampling only on traces, prometheus exporters only on metrics, and so on."""
    for pipeline_id, pipeline in CONFIGS[name]["service"]["pipelines"].items():
        signal = pipeline_id.split("/")[0]
        for component in [*(pipeline.get("processors") or []), *pipeline["exporters"]]:
            supported = SIGNALS.get(component.split("/")[0])
            assert supported is None or signal in supported, f"{pipeline_id}: {component}"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_memory_limiter_first_and_batch_last(name: str) -> None:
    """Back-pressure before any work, batching after everything that filters or rewrites."""
    for pipeline_id, pipeline in CONFIGS[name]["service"]["pipelines"].items():
        processors = pipeline.get("processors") or []
        assert processors[:1] == ["memory_limiter"], pipeline_id
        assert processors[-1:] == ["batch"], pipeline_id


@pytest.mark.parametrize("name", list(CONFIGS))
def test_listeners_bind_loopback_by_default(name: str) -> None:
    """Receivers, extensions, the prometheus exporter and the Collector's own metrics listen on 127.0.0.1."""
    cfg = CONFIGS[name]
    endpoints: list[str] = []
    for receiver in (cfg.get("receivers") or {}).values():
        for protocol in (receiver.get("protocols") or {}).values():
            endpoints.append((protocol or {}).get("endpoint", ""))
    for extension in (cfg.get("extensions") or {}).values():
        endpoints.append((extension or {}).get("endpoint", ""))
    for exporter_id, exporter in (cfg.get("exporters") or {}).items():
        if exporter_id.split("/")[0] == "prometheus":
            endpoints.append(exporter["endpoint"])
    assert endpoints and all(endpoints), "every listener sets an explicit endpoint"
    for endpoint in endpoints:
        host = _defaults(endpoint).rsplit(":", 1)[0]
        assert host == "127.0.0.1", endpoint
    for reader in cfg["service"].get("telemetry", {}).get("metrics", {}).get("readers", []):
        assert reader["pull"]["exporter"]["prometheus"]["host"] == "127.0.0.1"


@pytest.mark.parametrize("name", ["agent.yaml", "gateway.yaml", "agent.yaml+agent-raw-copy.yaml"])
def test_long_term_backends_only_get_redacted_data(name: str) -> None:
    """Any traces/logs pipeline that reaches Tempo, Jaeger or Loki runs the redaction processor."""
    for pipeline_id, pipeline in CONFIGS[name]["service"]["pipelines"].items():
        if pipeline_id.startswith("metrics"):
            continue
        if set(pipeline["exporters"]) & LONG_TERM_EXPORTERS:
            assert REDACTION in (pipeline.get("processors") or []), pipeline_id


@pytest.mark.parametrize("name", ["agent.yaml", "gateway.yaml"])
def test_redaction_covers_every_sensitive_genai_key_on_spans_and_logs(name: str) -> None:
    """Span attributes and log attributes lose (or hash) every sensitive GenAI/OpenInference/Traceloop key."""
    redaction = CONFIGS[name]["processors"][REDACTION]
    assert redaction["error_mode"] == "ignore"
    for section, context in (("trace_statements", "span"), ("log_statements", "log")):
        statements = [s for group in redaction[section] if group["context"] == context for s in group["statements"]]
        deleted = {key for s in statements for key in _DELETE_KEY.findall(s)}
        assert deleted >= SENSITIVE_KEYS, (section, SENSITIVE_KEYS - deleted)
        for statement in statements:
            # A key that is hashed must also be deleted whenever it is not a string SHA256 can handle.
            if statement.startswith("set(") and "SHA256" in statement:
                key = _ATTR_KEY.findall(statement)[0]
                assert f'IsString({context}.attributes["{key}"])' in statement
                assert any(
                    f'delete_key({context}.attributes, "{key}") where' in s and "not IsString" in s for s in statements
                )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_attribute_key_in_ottl_is_a_known_name(name: str) -> None:
    """Attribute keys in redaction and sampling rules are names from otel_loopguard.conventions.names."""
    known = names_values()
    processors = CONFIGS[name].get("processors") or {}
    keys = {key for s in strings_below(processors) for key in (*_ATTR_KEY.findall(s), *_DELETE_KEY.findall(s))}
    assert keys, "expected OTTL with attribute keys"
    assert keys <= known, keys - known


def test_tail_sampling_keeps_verdict_traces_errors_and_a_baseline() -> None:
    """Policies: span event named loopguard.verdict (OTTL), error status, and a probabilistic baseline."""
    policies = CONFIGS["tail-sampling.yaml"]["processors"]["tail_sampling"]["policies"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for policy in policies:
        assert policy["type"] in policy, policy["name"]
        by_type.setdefault(policy["type"], []).append(policy)
    span_event_conditions = [c for p in by_type["ottl_condition"] for c in p["ottl_condition"]["spanevent"]]
    assert f'spanevent.name == "{n.EVENT_VERDICT}"' in span_event_conditions
    assert by_type["status_code"][0]["status_code"]["status_codes"] == ["ERROR"]
    assert 0 < by_type["probabilistic"][0]["probabilistic"]["sampling_percentage"] < 100


def test_gateway_routes_raw_traces_by_trace_id_and_keeps_verdicts_out_of_the_balancer() -> None:
    """loadbalancing with routing_key traceID; the receiver for verdicts never feeds the load balancer."""
    cfg = CONFIGS["gateway.yaml"]
    lb = cfg["exporters"]["load_balancing"]
    assert lb["routing_key"] == "traceID"
    assert all(host.endswith(":4317") for host in lb["resolver"]["static"]["hostnames"])
    assert len(lb["resolver"]["static"]["hostnames"]) >= 2
    assert "dns:" in (CONFIG_DIR / "gateway.yaml").read_text(encoding="utf-8")
    for pipeline_id, pipeline in cfg["service"]["pipelines"].items():
        if "load_balancing" in pipeline["exporters"]:
            assert pipeline["receivers"] == ["otlp"], pipeline_id
            assert REDACTION not in (pipeline.get("processors") or []), "serve needs the raw arguments"


def test_raw_copy_overlay_adds_an_unredacted_short_retention_pipeline() -> None:
    """Merged with agent.yaml, the overlay adds traces/raw without redaction and keeps the main pipelines."""
    merged = CONFIGS["agent.yaml+agent-raw-copy.yaml"]["service"]["pipelines"]
    assert set(merged) == {"traces", "logs", "metrics", "traces/raw"}
    assert REDACTION not in merged["traces/raw"]["processors"]
    assert merged["traces/raw"]["exporters"] == ["otlp_grpc/raw_short_retention"]
