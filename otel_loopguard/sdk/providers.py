"""One place that picks OTLP exporters and builds the logger and meter providers the commands export through.

The exporters read their endpoint, headers, timeout and TLS settings from the standard ``OTEL_EXPORTER_OTLP_*``
variables themselves; this module only chooses gRPC or HTTP per signal, as those variables say.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from opentelemetry.sdk._logs import LoggerProvider, LogRecordLimits
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    AlwaysOnExemplarFilter,
    ExemplarFilter,
    MeterProvider,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

__all__ = [
    "build_providers", "exemplar_filter", "exporter_names", "exporters_for", "otlp_exporter", "otlp_protocol",
    "sdk_logger_provider", "sdk_meter_provider", "service_resource",
]

Signal = Literal["traces", "logs", "metrics"]

_logger = logging.getLogger(__name__)


def otlp_protocol(signal: Signal, environ: Mapping[str, str]) -> str:
    """``grpc`` or ``http/protobuf`` for a signal: its own ``OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL``, then the
    general one, then ``grpc``; a protocol the Python exporters lack (``http/json``) falls back to
    ``http/protobuf`` with a warning."""
    value = (environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
             or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc").strip().lower()
    if value in ("grpc", "http/protobuf"):
        return value
    _logger.warning("otel_loopguard: OTLP protocol %r is not supported by the Python exporters; "
                    "using http/protobuf for %s", value, signal)
    return "http/protobuf"


def otlp_exporter(signal: Signal, environ: Mapping[str, str]) -> Any:
    """A new OTLP exporter for ``signal`` over the protocol :func:`otlp_protocol` chooses."""
    # Imported on demand: each exporter module pulls in grpc or requests, which most commands never need.
    grpc = otlp_protocol(signal, environ) == "grpc"
    if signal == "traces":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
            return OTLPSpanExporter()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as HTTPSpanExporter,
        )
        return HTTPSpanExporter()
    if signal == "logs":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter  # noqa: PLC0415
            return OTLPLogExporter()
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # noqa: PLC0415
            OTLPLogExporter as HTTPLogExporter,
        )
        return HTTPLogExporter()
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter  # noqa: PLC0415
        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: PLC0415
        OTLPMetricExporter as HTTPMetricExporter,
    )
    return HTTPMetricExporter()


def service_resource(default_name: str) -> Resource:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), named ``default_name`` when
    those leave the service unnamed."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_name}))
    return resource


# Attribute limits of the log records the commands emit, unless the OTEL_* limit variables say otherwise. The emitter
# already bounds every string it sets (sdk/emit.py); these stop anything else (a future attribute, a resource
# attribute from OTEL_RESOURCE_ATTRIBUTES) from making one record big.
LOG_ATTRIBUTE_LENGTH = 4096
LOG_ATTRIBUTES = 64


def log_record_limits(environ: Mapping[str, str]) -> LogRecordLimits:
    """Log-record attribute limits: the ``OTEL_*`` limit variables when set, else 64 attributes of 4096 characters."""
    length_set = any(environ.get(name) for name in ("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT",
                                                    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"))
    count_set = any(environ.get(name) for name in ("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT",
                                                   "OTEL_ATTRIBUTE_COUNT_LIMIT"))
    return LogRecordLimits(
        max_attributes=None if count_set else LOG_ATTRIBUTES,
        max_attribute_length=None if length_set else LOG_ATTRIBUTE_LENGTH,
    )


_EXEMPLAR_FILTERS: dict[str, type[ExemplarFilter]] = {
    "always_off": AlwaysOffExemplarFilter,
    "always_on": AlwaysOnExemplarFilter,
    "trace_based": TraceBasedExemplarFilter,
}


def exemplar_filter(environ: Mapping[str, str]) -> ExemplarFilter:
    """The filter ``OTEL_METRICS_EXEMPLAR_FILTER`` names (``always_off``, ``always_on``, ``trace_based``); when it
    is unset, ``always_off`` rather than the SDK's default ``trace_based``.

    Every metric record loopguard makes is made outside any span (sdk/emit.py), so a trace-based filter never keeps
    an exemplar of ours anyway; off, the SDK does not even ask for each record. ``always_on`` still gives one sample
    value per bucket (without a trace link) to whoever wants it. An unknown name warns and turns exemplars off."""
    name = environ.get("OTEL_METRICS_EXEMPLAR_FILTER", "").strip().lower() or "always_off"
    chosen = _EXEMPLAR_FILTERS.get(name)
    if chosen is None:
        _logger.warning("otel_loopguard: unknown OTEL_METRICS_EXEMPLAR_FILTER %r; exemplars are off", name[:64])
        chosen = AlwaysOffExemplarFilter
    return chosen()


def exporter_names(signal: Signal, environ: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_<SIGNAL>_EXPORTER`` names (comma-separated; ``none`` or empty: none); ``otlp`` when unset,
    as ``opentelemetry-instrument`` defaults."""
    value = environ.get(f"OTEL_{signal.upper()}_EXPORTER")
    if value is None:
        return ["otlp"]
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    return [] if names == ["none"] else [name for name in names if name != "none"]


def exporters_for(signal: Signal, environ: Mapping[str, str]) -> list[Any]:
    """New exporters (for metrics: exporters or pull readers) for the names :func:`exporter_names` gives.

    ``otlp`` is :func:`otlp_exporter` (gRPC or HTTP as the protocol variables say); any other name (``console``,
    ``otlp_proto_http``, ``prometheus``...) is loaded from its ``opentelemetry_<signal>_exporter`` entry point by the
    SDK's own configuration code, as ``opentelemetry-instrument`` does. A name that cannot be loaded is warned about
    and skipped: a bad environment value never stops the application."""
    exporters = []
    for name in exporter_names(signal, environ):
        if name == "otlp":
            exporters.append(otlp_exporter(signal, environ))
            continue
        try:
            from opentelemetry.sdk._configuration import _import_config_components  # noqa: PLC0415 - rarely needed

            ((_, exporter_class),) = _import_config_components([name], f"opentelemetry_{signal}_exporter")
            exporters.append(exporter_class())
        except Exception as exc:  # noqa: BLE001 - a bad variable warns and falls back, as the SDK's settings do
            _logger.warning("otel_loopguard: ignoring OTEL_%s_EXPORTER=%r: %s", signal.upper(), name[:64],
                            str(exc)[:200])
    return exporters


def sdk_logger_provider(environ: Mapping[str, str], resource: Resource) -> LoggerProvider:
    """A LoggerProvider with :func:`log_record_limits`, batching to the exporters ``OTEL_LOGS_EXPORTER`` selects."""
    provider = LoggerProvider(resource=resource, log_record_limits=log_record_limits(environ))
    for exporter in exporters_for("logs", environ):
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    return provider


def sdk_meter_provider(environ: Mapping[str, str], resource: Resource) -> MeterProvider:
    """A MeterProvider with :func:`exemplar_filter`, reading to the exporters ``OTEL_METRICS_EXPORTER`` selects."""
    readers = [exporter if isinstance(exporter, MetricReader) else PeriodicExportingMetricReader(exporter)
               for exporter in exporters_for("metrics", environ)]
    return MeterProvider(resource=resource, metric_readers=readers, exemplar_filter=exemplar_filter(environ))


def build_providers(environ: Mapping[str, str], resource: Resource) -> tuple[LoggerProvider, MeterProvider]:
    """A LoggerProvider and a MeterProvider exporting as the ``OTEL_{LOGS,METRICS}_EXPORTER`` and
    ``OTEL_EXPORTER_OTLP_*`` variables say (OTLP when unset), with :func:`log_record_limits` and
    :func:`exemplar_filter`."""
    return sdk_logger_provider(environ, resource), sdk_meter_provider(environ, resource)
