"""The OpenTelemetry SDK shell: the span processor, its worker, emission of events and metrics, zero-code hook.

The only layer that imports the OpenTelemetry SDK.
"""
