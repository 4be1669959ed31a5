"""Tests of ``otel-loopguard serve``."""
