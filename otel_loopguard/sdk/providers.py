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
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

__all__ = ["build_providers", "exemplar_filter", "otlp_exporter", "otlp_protocol", "service_resource"]

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


def build_providers(environ: Mapping[str, str], resource: Resource) -> tuple[LoggerProvider, MeterProvider]:
    """A LoggerProvider and a MeterProvider exporting over OTLP as the ``OTEL_EXPORTER_OTLP_*`` variables say, with
    :func:`log_record_limits` and :func:`exemplar_filter`."""
    logger_provider = LoggerProvider(resource=resource, log_record_limits=log_record_limits(environ))
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(otlp_exporter("logs", environ)))
    reader = PeriodicExportingMetricReader(otlp_exporter("metrics", environ))
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader], exemplar_filter=exemplar_filter(environ))
    return logger_provider, meter_provider
