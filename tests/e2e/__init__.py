"""End-to-end tests through a real collector."""
