"""Span attributes to core values: every telemetry name, the conventions of each instrumentation, extraction."""
