"""Pin the Prometheus names of the code's metrics by running the real OTel Prometheus exporter."""

from __future__ import annotations

import re

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest

from otel_loopguard.conventions import names as n

from ._support import GENERIC_LABELS, INSTRUMENTS, emitted_series, prom_label

_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)\{([^}]*)\}\s", re.MULTILINE)


def _exposition() -> str:
    """Record one value on every instrument the code emits and return the exporter's text output."""
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter(n.INSTRUMENTATION_SCOPE)
    try:
        for inst in INSTRUMENTS:
            attrs = dict.fromkeys(inst.attributes, "x")
            if inst.kind == "counter":
                meter.create_counter(inst.name, unit=inst.unit).add(1, attrs)
            elif inst.kind == "updown":
                meter.create_up_down_counter(inst.name, unit=inst.unit).add(1, attrs)
            else:
                meter.create_histogram(inst.name, unit=inst.unit).record(1.5, attrs)
        return generate_latest(registry).decode()
    finally:
        provider.shutdown()


def test_exporter_series_names_match_the_translation_the_rules_assume() -> None:
    """Every series the real exporter writes is one the rules/dashboard translation predicts, and vice versa."""
    text = _exposition()
    seen = {name for name, _ in _SAMPLE.findall(text) if name != "target_info"}
    assert seen == set(emitted_series())


def test_exporter_labels_are_the_attribute_keys_with_underscores() -> None:
    """Each series carries exactly its attributes as labels (plus the scope labels), e.g. loopguard_verdict."""
    expected = emitted_series()
    for name, body in _SAMPLE.findall(_exposition()):
        if name == "target_info":
            continue
        labels = {pair.split("=", 1)[0] for pair in body.split(",") if pair}
        assert labels <= expected[name], (name, labels - expected[name])
        assert labels - GENERIC_LABELS == expected[name] - GENERIC_LABELS, name


def test_pinned_names_for_the_alerts() -> None:
    """The names the stuck alert and the cost rules are written against (a rename in _names breaks this)."""
    series = emitted_series()
    assert "loopguard_verdicts_total" in series
    assert prom_label(n.LOOPGUARD_VERDICT) == "loopguard_verdict"
    assert "loopguard_verdict" in series["loopguard_verdicts_total"]
    # A `{...}` unit disappears; `USD` is appended with its case kept.
    assert {"loopguard_trace_cost_USD_bucket", "loopguard_trace_steps_sum", "loopguard_traces_active"} <= set(series)
