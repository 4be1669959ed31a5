"""OTLP wire formats: reading stored and received OTLP/JSON (typed fast path and general decoder) and protobuf."""
