"""Helpers for tests of applications that use otel_loopguard (and for ours).

Import from here rather than from private modules: these names stay stable.
"""

from __future__ import annotations

from .sdk.otlp_write import spans_to_otlp_dict, write_otlp_json

__all__ = ["spans_to_otlp_dict", "write_otlp_json"]
