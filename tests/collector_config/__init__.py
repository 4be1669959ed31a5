"""Tests for collector-config/: Collector pipelines, Prometheus rules, Grafana dashboard."""
