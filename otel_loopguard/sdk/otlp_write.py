"""Write SDK spans as OTLP/JSON, the encoding the OTLP specification defines.

protobuf's JSON mapping renders ``bytes`` as base64, but OTLP/JSON wants trace
and span ids as lower-case hex, so the ids are rewritten after encoding.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(obj: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        value = obj.get(name)
        if value:
            obj[name] = base64.b64decode(value).hex()


def spans_to_otlp_dict(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """Encode finished SDK spans as an OTLP/JSON ``ExportTraceServiceRequest`` object.

    Args:
        spans: finished spans, for example from an ``InMemorySpanExporter``.

    Returns:
        A dict ``{"resourceSpans": [...]}`` ready for ``json.dump``.
    """
    request = encode_spans(list(spans))
    data = MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return data


def write_otlp_json(spans: Iterable[ReadableSpan], path: str, *, lines: bool = False) -> None:
    """Write spans to ``path`` as one OTLP/JSON document (or one line, for JSON Lines)."""
    data = spans_to_otlp_dict(spans)
    with open(path, "w", encoding="utf-8") as fh:
        if lines:
            fh.write(json.dumps(data, separators=(",", ":")) + "\n")
        else:
            json.dump(data, fh, indent=1)
            fh.write("\n")
