"""Helpers shared by the test suite: a recording OTLP receiver and a real rotel collector."""
