"""Loki's documented OTLP mapping, applied to OTLP log records, and the two LogQL shapes the dashboard uses.

Loki itself is not available to the tests; this module restates its mapping (Loki 3.x, ``docs/sources/send-data/
otel/_index.md`` and ``pkg/loghttp/push/otlp.go``): the default resource attributes become index labels, every
other resource attribute, the scope's name and every log attribute become structured metadata, as do the record's
``severity_text``, ``severity_number``, ``trace_id`` and ``span_id`` (hex); every name is normalised like a
Prometheus label (any character outside ``[a-zA-Z0-9_]`` becomes ``_``; a leading digit gets ``key_``), values
become strings (``AsString``: integers in decimal, booleans ``true``/``false``), and the body is the log line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Loki's default_resource_attributes_as_index_labels.
DEFAULT_INDEX_LABELS = frozenset({
    "cloud.availability_zone", "cloud.region", "container.name", "deployment.environment", "k8s.cluster.name",
    "k8s.container.name", "k8s.cronjob.name", "k8s.daemonset.name", "k8s.deployment.name", "k8s.job.name",
    "k8s.namespace.name", "k8s.pod.name", "k8s.replicaset.name", "k8s.statefulset.name", "service.instance.id",
    "service.name", "service.namespace",
})  # fmt: skip
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def normalize(name: str) -> str:
    """A Loki label or structured-metadata name for an OTLP attribute key (prometheus translator NormalizeLabel)."""
    out = re.sub(r"[^a-zA-Z0-9_]", "_", name)
    if out[:1].isdigit():
        return "key_" + out
    if out.startswith("_") and not out.startswith("__"):
        return "key" + out
    return out


def as_string(value: Any) -> str:
    """pcommon.Value.AsString for the scalar types the records carry."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class LokiEntry:
    """One log record as Loki stores it."""

    labels: dict[str, str]  # index labels (the stream)
    metadata: dict[str, str]  # structured metadata
    line: str

    def field(self, name: str) -> str | None:
        """A label filter's view: index label or structured metadata."""
        return self.labels.get(name, self.metadata.get(name))


def loki_entry(record: dict[str, Any]) -> LokiEntry:
    """Apply the mapping to one record as :meth:`RecordingOTLPReceiver.log_records` flattens it."""
    labels = {normalize(k): as_string(v) for k, v in record["resource"].items() if k in DEFAULT_INDEX_LABELS}
    metadata = {normalize(k): as_string(v) for k, v in record["resource"].items() if k not in DEFAULT_INDEX_LABELS}
    if record["scope"]:
        metadata["scope_name"] = record["scope"]
    for key, value in record["attributes"].items():
        name = normalize(key)
        assert name not in metadata, f"{key} and another attribute both become {name} in Loki"
        metadata[name] = as_string(value)
    if record["severity_number"]:
        metadata["severity_number"] = str(record["severity_number"])
    for key in ("severity_text", "trace_id", "span_id"):
        if record[key]:
            metadata[key] = record[key]
    return LokiEntry(labels, metadata, as_string(record["body"]))


_QUERY = re.compile(r'^\{(\w+)=~"([^"]*)"\} \| (\w+)(=~|=)"([^"]*)"$')


def select(entries: list[LokiEntry], logql: str) -> list[LokiEntry]:
    """Entries matching ``{label=~"re"} | field="v"`` or ``| field=~"re"`` (the dashboard's log queries)."""
    match = _QUERY.match(logql.strip())
    assert match is not None, f"not a query shape this test evaluates: {logql}"
    label, label_re, field, op, value = match.groups()
    out = []
    for entry in entries:
        have = entry.labels.get(label)
        got = entry.field(field)
        if have is None or not re.fullmatch(label_re, have) or got is None:
            continue
        if (op == "=" and got == value) or (op == "=~" and re.fullmatch(value, got)):
            out.append(entry)
    return out
