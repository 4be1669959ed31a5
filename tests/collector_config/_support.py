"""Shared knowledge for the collector-config tests: where the files are, which Prometheus names the code's
metrics get, a small PromQL/LogQL name extractor, and where the promtool/prometheus binaries are (a missing one
skips the test, or fails it under ``LOOPGUARD_REQUIRE_E2E=1``: :func:`tests.support.external.unavailable`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from otel_loopguard.conventions import names as n
from tests.support.external import unavailable

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "collector-config"
RULES_FILE = CONFIG_DIR / "prometheus" / "loopguard-rules.yaml"
RULES_TEST_FILE = CONFIG_DIR / "prometheus" / "loopguard-rules.test.yaml"
DASHBOARD_FILE = CONFIG_DIR / "grafana" / "loopguard.json"

# No constant in _names for this unit yet; the spec gives it.
UNIT_ERROR = "{error}"


@dataclass(frozen=True)
class Instrument:
    """One instrument the code emits: OTel name, unit, kind and attribute keys."""

    name: str
    unit: str
    kind: str  # "counter" | "updown" | "histogram"
    attributes: tuple[str, ...] = ()


INSTRUMENTS: tuple[Instrument, ...] = (
    Instrument(n.METRIC_VERDICTS, n.UNIT_TRANSITION, "counter",
               (n.LOOPGUARD_VERDICT, n.LOOPGUARD_VERDICT_PREVIOUS, n.LOOPGUARD_RULE, n.GEN_AI_AGENT_NAME,
                n.LOOPGUARD_STEP_KIND)),
    Instrument(n.METRIC_INTERVENTIONS, n.UNIT_INTERVENTION, "counter",
               (n.LOOPGUARD_INTERVENTION, n.LOOPGUARD_RULE, n.LOOPGUARD_STEP_KIND)),
    Instrument(n.METRIC_TRACES_ACTIVE, n.UNIT_TRACE, "updown", (n.LOOPGUARD_VERDICT,)),
    Instrument(n.METRIC_TOOL_CALLS, n.UNIT_TOOL_CALL, "counter", (n.GEN_AI_TOOL_NAME,)),
    Instrument(n.METRIC_TRACE_STEPS, n.UNIT_STEP, "histogram"),
    Instrument(n.METRIC_TRACE_COST, n.UNIT_USD, "histogram"),
    Instrument(n.METRIC_DETECTION_DELAY, n.UNIT_STEP, "histogram"),
    Instrument(n.METRIC_AGENT_TOOL_CALLS, n.UNIT_TOOL_CALL, "histogram", (n.GEN_AI_AGENT_NAME,)),
    Instrument(n.METRIC_TRACES_EVICTED, n.UNIT_TRACE, "counter"),
    Instrument(n.METRIC_PROCESSOR_ERRORS, UNIT_ERROR, "counter", (n.ERROR_TYPE,)),
)

# Labels every scraped series may carry besides its attributes: target labels, the histogram bucket bound and
# the instrumentation-scope labels both exporters add.
GENERIC_LABELS = frozenset({"job", "instance", "le", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"})


def prom_label(attribute: str) -> str:
    """Prometheus label for an OTel attribute key (every character outside [a-zA-Z0-9] becomes ``_``)."""
    return re.sub(r"[^a-zA-Z0-9]", "_", attribute)


def prom_base_name(instrument: Instrument) -> str:
    """Prometheus family name under the default UnderscoreEscapingWithSuffixes translation.

    Established by running opentelemetry-exporter-prometheus (test_exporter_names pins it) and matching the
    Collector's translator: ``{annotation}`` units vanish, other units are appended verbatim, counters get
    ``_total``.
    """
    tokens = [t for t in re.split(r"[^a-zA-Z0-9:]+", instrument.name) if t]
    unit = re.sub(r"\{.*?\}", "", instrument.unit).strip()
    if unit and unit not in tokens:
        tokens.append(re.sub(r"[^a-zA-Z0-9:]+", "_", unit).strip("_"))
    if instrument.kind == "counter":
        tokens = [t for t in tokens if t != "total"] + ["total"]
    return "_".join(tokens)


def prom_series_names(instrument: Instrument) -> set[str]:
    """All series names the instrument produces in Prometheus."""
    base = prom_base_name(instrument)
    if instrument.kind == "histogram":
        return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return {base}


def emitted_series() -> dict[str, frozenset[str]]:
    """Map from every emitted Prometheus series name to the labels it may carry."""
    out: dict[str, frozenset[str]] = {}
    for inst in INSTRUMENTS:
        labels = frozenset(prom_label(a) for a in inst.attributes) | GENERIC_LABELS
        for series in prom_series_names(inst):
            out[series] = labels
    return out


def all_emitted_labels() -> frozenset[str]:
    """Union of labels over all emitted series."""
    return frozenset().union(*emitted_series().values())


def names_values() -> set[str]:
    """Every string constant defined in otel_loopguard.conventions.names (attribute, event and metric names)."""
    values: set[str] = set()
    for key, value in vars(n).items():
        if key.startswith("_"):
            continue
        if isinstance(value, str):
            values.add(value)
        elif isinstance(value, dict):
            values.update(v for v in value.values() if isinstance(v, str))
        elif isinstance(value, frozenset):
            values.update(v for v in value if isinstance(v, str))
    return values


# --- PromQL name extraction ------------------------------------------------------------------------------
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
                       "and", "or", "unless", "inf", "nan", "atan2"})
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*\"")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_IDENT = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")


@dataclass(frozen=True)
class PromQLNames:
    """Metric names, per-selector labels and grouping labels found in one PromQL expression."""

    metrics: frozenset[str]
    selector_labels: tuple[tuple[str | None, frozenset[str]], ...]
    grouping_labels: frozenset[str]


def promql_names(expr: str) -> PromQLNames:
    """Extract names from a PromQL expression (enough for the expressions in this repository, not a parser)."""
    expr = re.sub(r"\$\{?\w+\}?", "x", expr)  # Grafana variables
    grouping: set[str] = set()
    for group in _GROUPING.findall(expr):
        grouping.update(label.strip() for label in group.split(",") if label.strip())
    selectors = []
    for metric, body in _SELECTOR.findall(expr):
        labels = frozenset(_MATCHER.findall(body))
        selectors.append((metric or None, labels))
    stripped = _STRING.sub('""', expr)
    stripped = re.sub(r"\{[^}]*\}", " ", stripped)
    stripped = _GROUPING.sub(" ", stripped)
    stripped = re.sub(r"\[[^\]]*\]", " ", stripped)
    stripped = re.sub(r"\boffset\s+-?[\w.]+", " ", stripped)  # a modifier's duration is no metric name
    metrics = {m for m in _IDENT.findall(stripped) if m not in _KEYWORDS}
    return PromQLNames(frozenset(metrics), tuple(selectors), frozenset(grouping))


def load_yaml(path: Path) -> Any:
    """Parse one YAML file."""
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# A deadline for a hang, not a wait: `promtool test rules` evaluates a day of samples per group and takes 5-7 s
# alone on two cores, several times that on a loaded machine.
PROMTOOL_TIMEOUT_S = 300


def run_tool(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Prometheus binary (promtool) with a deadline for a hang; its output is captured as text."""
    return subprocess.run(args, capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S, cwd=cwd, check=False)


def require_binary(name: str) -> str:
    """Path of a Prometheus binary; skip without it, or fail when LOOPGUARD_REQUIRE_E2E=1."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        unavailable(f"{name} not installed (apt-get install -y prometheus)")
    return path
