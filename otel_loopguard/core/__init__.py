"""The pure core: values, configuration, signatures, the verdict engine, the trace judge, cost and the step audit.

Imports only the standard library and msgspec (checked in CI), so it can judge tool calls anywhere, with or
without OpenTelemetry.
"""
