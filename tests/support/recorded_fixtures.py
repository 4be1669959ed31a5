"""Which recorded fixture files the verdict tests judge.

``tests/fixtures/otlp`` also holds the Python agent families recorded for issue 11 (strands, Google ADK,
AutoGen, LlamaIndex, smolagents, DSPy; see ``MANIFEST-<family>.json`` and ``tests/fixtures/README.md``),
which the product does not read yet. The tests that pin or compare verdicts (replay vs audit, serve vs audit,
scenario expectations, the golden output of ``test_audit_perf_equivalence``) take only the sources below; a
source joins this tuple once the product reads it (and the golden file is regenerated). The decoding tests
keep reading every file.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"

JUDGED_SOURCES = (
    "langgraph_genai",
    "langgraph_openinference",
    "langgraph_traceloop",
    "openai_agents_genai",
    "openai_agents_openinference",
    "openai_agents_traceloop",
    "pydantic_ai",
)


def judged_fixture_files() -> list[Path]:
    """The fixture files (``<source>__<scenario>.json``) of the judged sources, sorted by name."""
    return sorted(p for p in FIXTURES.glob("*__*.json") if p.stem.split("__", 1)[0] in JUDGED_SOURCES)
