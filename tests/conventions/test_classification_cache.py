"""The classification of spans is remembered per attribute-key set: answers must not leak between spans that share
keys but differ in the values compared, in the span name, or in the order they are seen."""

from __future__ import annotations

import itertools
import threading
from typing import Any

from otel_loopguard.conventions.extract import ROLE_AGENT, ROLE_LLM, ROLE_TOOL, Extractor

# Each case: attributes, span name, the role the README's conventions table gives it (worked out by hand).
CASES: list[tuple[dict[str, Any], str, str | None]] = [
    # No attribute: only the span name can say something. "execute_tool <tool>" is ADK for JS's bare tool span.
    ({}, "execute_tool lookup", ROLE_TOOL),
    ({}, "lookup", None),
    # ADK's call_llm: a model span only with gen_ai.system = gcp.vertex.agent and exactly that name.
    ({"gen_ai.system": "gcp.vertex.agent"}, "call_llm", ROLE_LLM),
    ({"gen_ai.system": "gcp.vertex.agent"}, "call_llm_2", None),
    ({"gen_ai.system": "other"}, "call_llm", None),
    # One key, the value decides: execute_tool a tool, chat a model call, invoke_agent an agent, embeddings nothing
    # (unless the name is a GenAI tool span's).
    ({"gen_ai.operation.name": "execute_tool"}, "x", ROLE_TOOL),
    ({"gen_ai.operation.name": "chat"}, "x", ROLE_LLM),
    ({"gen_ai.operation.name": "invoke_agent"}, "x", ROLE_AGENT),
    ({"gen_ai.operation.name": "embeddings"}, "x", None),
    ({"gen_ai.operation.name": "embeddings"}, "execute_tool x", ROLE_TOOL),
    # The same keys in another order: the same answers.
    ({"app.x": 1, "gen_ai.operation.name": "chat"}, "x", ROLE_LLM),
    ({"gen_ai.operation.name": "chat", "app.x": 1}, "x", ROLE_LLM),
    # A value that is not a string never matches (and an unhashable one cannot be a cache key).
    ({"gen_ai.operation.name": {"a": 1}}, "x", None),
    ({"gen_ai.operation.name": ["execute_tool"]}, "x", None),
    # ADK's merged span is recognised and is not a call; another tool name on the same keys is a call.
    ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "(merged tools)"}, "x", None),
    ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}, "x", ROLE_TOOL),
    # A presence condition: ADK's legacy content attribute makes any span a tool span.
    ({"gcp.vertex.agent.tool_call_args": "{}"}, "x", ROLE_TOOL),
]


def test_every_order_of_the_cases_gives_the_table_answers() -> None:
    """Seen in any order, by one extractor (its cache filled by the earlier cases), each case gets its answer."""
    for order in itertools.islice(itertools.permutations(range(len(CASES))), 0, 40_000, 4_001):
        extractor = Extractor()
        for index in (*order, *order):  # twice: the second time from the cache
            attrs, name, role = CASES[index]
            assert extractor.span_role(dict(attrs), name) == role, (attrs, name)


def test_may_matter_and_read_role_agree_with_the_markers() -> None:
    """A span without a marker key and without a GenAI tool span name is not read, whatever the table says."""
    extractor = Extractor()
    # ADK's call_llm model span has gen_ai.system, a marker: read.
    assert extractor.read_role({"gen_ai.system": "gcp.vertex.agent"}, "call_llm")[0] == ROLE_LLM
    assert extractor.may_matter({"gen_ai.system": "gcp.vertex.agent"}, "call_llm") is True
    # No marker, but the name of a GenAI tool span: read.
    assert extractor.may_matter({}, "execute_tool lookup") is True
    assert extractor.read_role({}, "execute_tool lookup")[0] == ROLE_TOOL
    # Neither: not read.
    assert extractor.may_matter({"app.x": 1}, "lookup") is False
    assert extractor.read_role({"app.x": 1}, "lookup")[0] is None


def test_threads_sharing_an_extractor_get_their_own_answers() -> None:
    """serve reads requests on several threads with one extractor: no thread gets another span's answer."""
    extractor = Extractor()
    errors: list[tuple[Any, ...]] = []
    start = threading.Barrier(4)

    def work(offset: int) -> None:
        start.wait()
        for i in range(3_000):
            attrs, name, role = CASES[(i + offset) % len(CASES)]
            got = extractor.span_role(dict(attrs), name)
            if got != role:
                errors.append((attrs, name, got, role))

    threads = [threading.Thread(target=work, args=(k * 5,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
