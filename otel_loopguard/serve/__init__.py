"""``otel-loopguard serve``: an OTLP receiver (gRPC and HTTP) that judges traces from agents in any language."""
