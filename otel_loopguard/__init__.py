"""otel_loopguard: detect AI-agent loops from OpenTelemetry GenAI spans."""
