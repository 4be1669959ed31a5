"""Which recorded fixture files the verdict tests judge.

``tests/fixtures/otlp`` holds the agent frameworks recorded in Python (``MANIFEST-<family>.json``), ``otlp/js`` the
JavaScript ones, ``otlp/model_spans`` applications instrumented only at the model client (see
``tests/fixtures/README.md``). The tests that pin or compare verdicts (replay vs audit, serve vs audit, scenario
expectations, the golden output of ``test_audit_equivalence``) take only the sources below; a source joins this
tuple once the product reads it (and the golden file is regenerated for its files). The decoding tests keep
reading every file.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
#: The folders of recorded traces (each with its MANIFEST-*.json files).
FIXTURE_DIRS = (FIXTURES, FIXTURES / "js", FIXTURES / "model_spans")

#: Applications instrumented only at the model client (``otlp/model_spans``).
MODEL_SPAN_SOURCES = (
    "anthropic_genai",
    "anthropic_openinference",
    "anthropic_sdk",
    "anthropic_traceloop",
    "anthropic_traceloop_0_53",
    "litellm_parent_span",
    "litellm_request_span",
    "litellm_request_span_latest",
    "openai_genai_event",
    "openai_genai_span",
    "openai_openinference",
    "openai_traceloop",
    "openai_traceloop_0_54",
    "openai_v2_event",
    "openai_v2_legacy",
    "openai_v2_span",
)

#: The first seven sources (``otlp/``): tool spans with content, no closing call of the framework's own, so each
#: run is exactly its scenario's calls (what tests deriving figures per scenario by hand rely on).
SCENARIO_EXACT_SOURCES = (
    "langgraph_genai",
    "langgraph_openinference",
    "langgraph_traceloop",
    "openai_agents_genai",
    "openai_agents_openinference",
    "openai_agents_traceloop",
    "pydantic_ai",
)

JUDGED_SOURCES = (
    # Python agent frameworks (otlp/)
    "adk_default",
    "adk_legacy",
    "autogen_native",
    "autogen_openinference",
    "dspy_openinference",
    "langgraph_genai",
    "langgraph_openinference",
    "langgraph_traceloop",
    "llamaindex_traceloop",
    "openai_agents_genai",
    "openai_agents_logfire",
    "openai_agents_openinference",
    "openai_agents_traceloop",
    "pydantic_ai",
    "smolagents_code_openinference",
    "smolagents_openinference",
    "strands_default",
    "strands_latest",
    # JavaScript agent frameworks (otlp/js/)
    "adk_js",
    "langgraph_js_traceloop",
    "mastra",
    "mastra_legacy",
    "vercel_ai",
    "vercel_ai7",
    "vercel_ai7_legacy",
    "vercel_ai7_stream",
    "vercel_ai_stream",
    # Applications instrumented only at the model client (otlp/model_spans/)
    *MODEL_SPAN_SOURCES,
)


#: Judged sources recorded without a content switch (Logfire's Agents SDK integration has none): every scenario but
#: ``no_content``.
NO_CONTENT_SWITCH_SOURCES = ("openai_agents_logfire",)


#: Agent loops traced by LLM-observability SDKs and Google's GenAI SDK (``otlp/obs_sdk``, ``MANIFEST-obs-sdk.json``):
#: the scenarios
#: ``same_call_loop``, ``ping_pong``, ``pagination``, ``healthy`` and, where the SDK has a content switch,
#: ``no_content`` (judged by their own tests, so the seven-scenario checks above do not apply); BeeAI also
#: ``same_call_guarded`` (its cycle checker on).
OBS_SDK_FIXTURES = FIXTURES / "obs_sdk"
OBS_SDK_SOURCES = ("beeai", "google_genai", "haystack_openinference", "haystack_openllmetry", "langfuse", "logfire_v1",
                   "mlflow", "openlit", "openlit_langchain")
#: Those traced only at the model client (no tool span): google-genai's chats, Logfire's instrument_openai, OpenLIT
#: on the OpenAI client.
OBS_MODEL_SPAN_SOURCES = ("google_genai", "logfire_v1", "openlit")


def obs_sdk_fixture_files() -> list[Path]:
    """The fixture files of the LLM-observability SDKs, sorted by name."""
    return sorted(OBS_SDK_FIXTURES.glob("*__*.json"))


#: Sources that ``audit`` reads right and the processor and ``serve`` do not yet (none).
AUDIT_ONLY_SOURCES: tuple[str, ...] = ()

#: What the processor's replay suites judge (every judged source).
PROCESSOR_SOURCES = JUDGED_SOURCES


def judged_fixture_files(sources: tuple[str, ...] = JUDGED_SOURCES) -> list[Path]:
    """The fixture files (``<source>__<scenario>.json``) of the judged sources, sorted by folder and name."""
    return [p for d in FIXTURE_DIRS for p in sorted(d.glob("*__*.json")) if p.stem.split("__", 1)[0] in sources]


def audited_fixture_files() -> list[Path]:
    """The fixture files ``audit`` judges right: those of every judged source, audit-only ones included."""
    return judged_fixture_files(JUDGED_SOURCES + AUDIT_ONLY_SOURCES)
