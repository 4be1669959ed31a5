"""Test suite for otel_loopguard (a package so helpers import as ``tests.support``)."""
