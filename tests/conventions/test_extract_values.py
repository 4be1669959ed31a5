"""Span attributes -> engine values, one fixed example per behaviour, expected values worked out by hand.

Each expected value below comes from the conventions (the attribute's documented meaning) or from the README's
description of what loopguard reads, never from running the code. The behaviours are the ones a mutation of
``conventions/extract.py`` could change without any recorded fixture noticing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_loopguard.conventions.extract import (
    ROLE_AGENT,
    ROLE_LLM,
    ROLE_TOOL,
    Extractor,
    agent_name,
    conversation_id,
    llm_usage,
    span_role,
)
from otel_loopguard.core.config import LoopGuardConfig, Prices
from otel_loopguard.core.cost import CostTotal, cost_usd
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.core.model import Lease

# Since the conventions table (README, "Conventions read") a span is read by the first row whose conditions hold,
# and each row reads only its own attributes and peels off only its own envelopes; a span no row recognises is read
# as a GenAI execute_tool span (gen_ai.* attributes, no envelopes). The examples below that exercise an envelope
# therefore use a span of a convention that names it: OpenLLMetry's tool span (traceloop.span.kind = tool), whose
# row unwraps LangChain inputs from the arguments and serialised ToolMessages from the result.
OPENLLMETRY_TOOL = {"traceloop.span.kind": "tool"}

# 2026-01-01T00:00:00Z in nanoseconds since the epoch, the unit of OTLP span times.
T0_NS = 1_767_225_600 * 10**9
T0_S = 1_767_225_600.0


def _tool(attrs: dict[str, Any], *, start_ns: int | None = T0_NS, end_ns: int | None = T0_NS + 10**8,
          status_error: bool = False, status_message: str | None = None, events: Any = (),
          max_bytes: int = 65_536, name: str = "execute_tool") -> Any:
    return Extractor(max_bytes).tool_call(attrs, name, start_ns, end_ns, status_error, status_message, events)


def _kinds(calls: list[Any], config: LoopGuardConfig | None = None) -> list[str]:
    engine = LoopEngine(config)
    state = engine.new_state()
    return [engine.observe(state, c).verdict.kind for c in calls]


# --- hidden (redacted) values -----------------------------------------------------------------------------------

def test_a_redacted_result_is_not_recorded() -> None:
    # OpenInference's hide_outputs writes the placeholder "__REDACTED__" into output.value: the README says it
    # counts as not recorded, so the call has no result (captured False, value None), not a result of that text.
    call = _tool({"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"id": 1}',
                  "output.value": "__REDACTED__"})
    assert call.result_captured is False
    assert call.result is None
    # The arguments were recorded: only the result is hidden.
    assert call.arguments_captured is True
    assert call.arguments == '{"id": 1}'


def test_a_redacted_argument_is_not_recorded() -> None:
    # hide_inputs writes the same placeholder into input.value: an unknown signature, not the text "__REDACTED__".
    call = _tool({"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": "__REDACTED__",
                  "output.value": "row 1"})
    assert call.arguments_captured is False
    assert call.arguments is None
    assert call.result_captured is True and call.result == "row 1"


def test_repeated_calls_with_redacted_results_are_uncertain_not_stuck() -> None:
    # Three identical calls whose results are hidden: the repetition is there (period 1, three times, the default
    # min_repetitions), but the evidence is missing, so the verdict after the third call is "uncertain"
    # (rule evidence), never "stuck". Reading the placeholder as a value would make the three results equal: stuck.
    spans = [{"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"id": 1}',
              "output.value": "__REDACTED__"} for _ in range(3)]
    calls = [_tool(a, start_ns=T0_NS + i * 10**9, end_ns=T0_NS + i * 10**9 + 10**8) for i, a in enumerate(spans)]
    assert _kinds(calls) == ["working", "working", "uncertain"]


# --- arguments not recorded, result recorded ---------------------------------------------------------------------

def test_missing_arguments_with_a_recorded_result() -> None:
    # No arguments attribute at all (the instrumentation did not capture them) but a result: the README says such a
    # call has an *unknown* signature (captured False), not empty arguments, while its result is still evidence.
    call = _tool({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                  "gen_ai.tool.call.result": "no hits"})
    assert call.arguments_captured is False
    assert call.arguments is None
    assert call.result_captured is True
    assert call.result == "no hits"


def test_repeated_calls_without_arguments_are_uncertain() -> None:
    # Three such calls with the same result: they look like one call repeated (tool equal, signature unknown), but
    # unknown arguments are incomplete evidence, so the third call gives "uncertain", not "stuck".
    calls = [_tool({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.result": "no hits"}, start_ns=T0_NS + i * 10**9, end_ns=T0_NS + i * 10**9 + 1)
             for i in range(3)]
    assert _kinds(calls) == ["working", "working", "uncertain"]


def test_empty_arguments_are_recorded_arguments() -> None:
    # The opposite case: an arguments attribute holding "{}" was recorded (a tool without parameters); three equal
    # calls with equal results are a loop (stuck after the third), which tells "empty" from "not recorded".
    calls = [_tool({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "now",
                    "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "same"},
                   start_ns=T0_NS + i * 10**9, end_ns=T0_NS + i * 10**9 + 1) for i in range(3)]
    assert calls[0].arguments_captured is True and calls[0].arguments == "{}"
    assert _kinds(calls) == ["working", "working", "stuck"]


# --- which attribute wins ---------------------------------------------------------------------------------------

def test_tool_name_arguments_and_result_per_convention() -> None:
    # The README's table: the row that recognises the span says where its tool name, arguments and result are, and
    # the other conventions' attributes on the same span are not read. Each span below carries the attributes of all
    # three conventions; only its marker differs.
    everything = {"gen_ai.tool.name": "g", "tool.name": "oi", "traceloop.entity.name": "tl",
                  "gen_ai.tool.call.arguments": "ga", "input.value": "oa", "traceloop.entity.input": "ta",
                  "gen_ai.tool.call.result": "gr", "output.value": "or", "traceloop.entity.output": "tr"}
    # GenAI (gen_ai.operation.name = execute_tool): gen_ai.tool.name, gen_ai.tool.call.arguments / .result.
    genai = _tool({"gen_ai.operation.name": "execute_tool", **everything})
    assert (genai.tool, genai.arguments, genai.result) == ("g", "ga", "gr")
    # OpenInference (openinference.span.kind = TOOL): tool.name, input.value, output.value; none of these plain
    # texts is in one of its envelopes.
    oi_only = {k: v for k, v in everything.items() if not k.startswith("gen_ai.")}
    oi = _tool({"openinference.span.kind": "TOOL", **oi_only})
    assert (oi.tool, oi.arguments, oi.result) == ("oi", "oa", "or")
    # OpenLLMetry (traceloop.span.kind = tool): gen_ai.* first, else traceloop.entity.name / .input / .output.
    tl = _tool({**OPENLLMETRY_TOOL, **oi_only})
    assert (tl.tool, tl.arguments, tl.result) == ("tl", "ta", "tr")
    assert _tool({**OPENLLMETRY_TOOL, **everything}) == genai  # its gen_ai.* attributes come first
    # Its last tool-name source: the span name before ".tool".
    assert _tool(OPENLLMETRY_TOOL, name="search.tool").tool == "search"
    # A span no row recognises is read as a GenAI execute_tool span: gen_ai.tool.name, else the span name (after
    # "execute_tool " when it starts so); OpenInference's tool.name on it is not read.
    assert _tool({"tool.name": "oi", "input.value": "oa"}, name="my span").tool == "my span"
    assert _tool({}, name="execute_tool lookup").tool == "lookup"
    # Not even a span name: the call still counts, under the name "unknown".
    assert _tool({}, name="").tool == "unknown"
    # A tool name that is not a string (an int attribute) is read as its text.
    assert _tool({"gen_ai.tool.name": 7}).tool == "7"


# --- span times --------------------------------------------------------------------------------------------------

def test_span_times_are_read_as_epoch_seconds() -> None:
    # OTLP times are nanoseconds since the epoch; the engine works in seconds: 1 767 225 600.25 s for a span
    # starting 250 ms after T0, and 1 767 225 601.75 s for its end 1.5 s later.
    call = _tool({"gen_ai.tool.name": "t"}, start_ns=T0_NS + 250_000_000, end_ns=T0_NS + 1_750_000_000)
    assert call.start == pytest.approx(T0_S + 0.25, abs=1e-6)
    assert call.end == pytest.approx(T0_S + 1.75, abs=1e-6)
    # Zero or absent times are unknown, not the epoch.
    untimed = _tool({"gen_ai.tool.name": "t"}, start_ns=None, end_ns=0)
    assert untimed.start is None and untimed.end is None


def _rate_limited(start_ns: int) -> Any:
    return _tool({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "quote",
                  "gen_ai.tool.call.arguments": '{"symbol": "ACME"}', "error.type": "RateLimitError"},
                 start_ns=start_ns, end_ns=start_ns + 100_000_000, status_error=True)


def test_retry_gaps_come_from_the_span_times() -> None:
    # A rate-limited call retried with backoff, as spans: each call lasts 0.1 s; the retries start 1.1 s, 2.1 s and
    # 4.1 s after the previous call's end (= its start + 0.1 s). With the default policy (interval 1 s, rate 2,
    # tolerance 0.2) the shortest accepted gaps are 0.8 s, 1.6 s and 3.2 s: every gap is long enough, and three
    # retries is the default max_attempts, so the repetition is "retrying" from the third call on.
    starts = [T0_NS, T0_NS + 1_200_000_000, T0_NS + 3_400_000_000, T0_NS + 7_600_000_000]
    assert _kinds([_rate_limited(s) for s in starts]) == ["working", "working", "retrying", "retrying"]


def test_retry_gaps_too_short_are_a_loop() -> None:
    # The same calls 0.5 s apart (0.4 s between one's end and the next start, under the 0.8 s minimum): not a
    # backoff, so the repeated failure is "stuck". Together with the test above this pins the nanosecond scale: read
    # a thousand times too large, 0.4 s would pass as 400 s; a thousand times too small, 1.1 s would fail.
    starts = [T0_NS + i * 500_000_000 for i in range(3)]
    assert _kinds([_rate_limited(s) for s in starts]) == ["working", "working", "stuck"]


# --- envelopes ---------------------------------------------------------------------------------------------------

def test_openinference_toolmessage_result_is_its_data_content() -> None:
    # OpenInference on LangGraph writes the serialised ToolMessage into output.value; the README says only
    # data.content counts. Here the content is "22C"; the envelope's other fields (the message id, the call id, the
    # status) must not be part of the result.
    message = {"type": "tool", "data": {"content": "22C", "type": "tool", "name": "weather", "id": "msg-1",
                                        "tool_call_id": "call_abc", "status": "success"}}
    call = _tool({"openinference.span.kind": "TOOL", "tool.name": "weather", "input.value": '{"city": "Paris"}',
                  "output.value": json.dumps(message)})
    assert call.result == "22C"


def test_openinference_toolmessages_with_other_ids_are_the_same_result() -> None:
    # Three calls whose ToolMessages differ only in their message id ("id" is not a volatile key, so only the unwrap
    # can hide it): the evidence is the same "22C" each time, so the repetition is "stuck" after the third call.
    calls = []
    for i in range(3):
        message = {"type": "tool", "data": {"content": "22C", "id": f"msg-{i}", "tool_call_id": f"call_{i}"}}
        calls.append(_tool({"openinference.span.kind": "TOOL", "tool.name": "weather",
                            "input.value": '{"city": "Paris"}', "output.value": json.dumps(message)},
                           start_ns=T0_NS + i * 10**9, end_ns=T0_NS + i * 10**9 + 1))
    assert _kinds(calls) == ["working", "working", "stuck"]


def test_data_without_a_call_id_is_left_as_it_is() -> None:
    # {"data": {"content": ...}} without tool_call_id is an ordinary JSON result (a search API's answer, say), not a
    # ToolMessage: it stays the same text on an OpenInference span, whose row unwraps ToolMessages. (The unwrap is
    # only tried when the text mentions "kwargs" or "tool_call_id", as this one does.)
    text = json.dumps({"data": {"content": "x", "kwargs": 1}})
    assert _tool({"openinference.span.kind": "TOOL", "tool.name": "t", "output.value": text}).result == text


def test_openllmetry_langchain_envelopes() -> None:
    # OpenLLMetry on LangChain: arguments {"input_str", "tags", "metadata", "inputs", "kwargs"} -> only "inputs"
    # counts (as JSON text again); results {"output": {"kwargs": {"content", "tool_call_id"}}} -> only the content.
    args = json.dumps({"input_str": "{'q': 'x'}", "tags": [], "metadata": {"run": 1}, "inputs": {"q": "x"},
                       "kwargs": {"tool_call_id": "c1"}})
    result = json.dumps({"output": {"lc": 1, "kwargs": {"content": "found", "tool_call_id": "c1"}},
                         "kwargs": {"name": "search"}})
    call = _tool({"traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                  "traceloop.entity.input": args, "traceloop.entity.output": result})
    assert json.loads(call.arguments) == {"q": "x"}
    assert call.result == "found"
    # Only input_str (no structured inputs): the repr string is the arguments.
    call = _tool({**OPENLLMETRY_TOOL, "traceloop.entity.name": "search",
                  "traceloop.entity.input": json.dumps({"input_str": "q=x"})})
    assert call.arguments == "q=x"
    # A bare serialised ToolMessage, and a flat {"content", "tool_call_id"} object, give their content (read from
    # gen_ai.tool.call.result, the row's first result source).
    bare = json.dumps({"lc": 1, "kwargs": {"content": "c", "tool_call_id": "1"}})
    flat = json.dumps({"content": "d", "tool_call_id": "2"})
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": bare}).result == "c"
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": flat}).result == "d"
    # The GenAI row names no envelope: the same text on a GenAI span is the result as it stands.
    assert _tool({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t",
                  "gen_ai.tool.call.result": bare}).result == bare


def test_envelopes_given_as_mappings() -> None:
    # The SDK can hand attributes over as mappings (OTLP kvlists): the OpenLLMetry row's envelopes apply to them
    # too, and what is inside is given as it is (a mapping is not turned into text): the inputs {"q": 1}, and the
    # ToolMessage's data.content "ok".
    call = _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t",
                  "gen_ai.tool.call.arguments": {"inputs": {"q": 1}, "tags": []},
                  "gen_ai.tool.call.result": {"data": {"content": "ok", "tool_call_id": "c"}}})
    assert call.arguments == {"q": 1}
    assert call.result == "ok"
    # A mapping that is not an envelope stays whole.
    plain = _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": {"q": 1}})
    assert plain.arguments == {"q": 1}


def test_envelopes_over_the_size_limit_are_not_parsed() -> None:
    # Text longer than max_bytes is passed on untouched (the canonicaliser digests it whole): with a 40-byte limit,
    # a 53-character envelope stays the same text, on an OpenLLMetry span whose row would otherwise unwrap it.
    args = json.dumps({"inputs": {"q": "x" * 20}, "tags": []})
    assert len(args) > 40
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": args},
                 max_bytes=40).arguments == args
    result = json.dumps({"content": "y" * 30, "tool_call_id": "c"})
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": result},
                 max_bytes=40).result == result
    # Exactly at the limit it is still unwrapped: the content "z".
    exact = json.dumps({"content": "z", "tool_call_id": "c"})
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": exact},
                 max_bytes=len(exact)).result == "z"


# --- hints, errors ----------------------------------------------------------------------------------------------

def test_progress_and_lease_hints() -> None:
    # loopguard.progress is the application's fingerprint (as text); wait.owner + wait.deadline form a lease.
    call = _tool({"gen_ai.tool.name": "poll", "loopguard.progress": 42, "loopguard.wait.owner": "ci",
                  "loopguard.wait.deadline": 1_767_229_200})
    assert call.progress == "42"
    assert call.lease == Lease("ci", 1_767_229_200.0)
    # A deadline that is not a number gives no lease; a deadline without owner gives a lease with no owner.
    assert _tool({"gen_ai.tool.name": "poll", "loopguard.wait.deadline": "soon"}).lease is None
    assert _tool({"gen_ai.tool.name": "poll", "loopguard.wait.deadline": 5}).lease == Lease("", 5.0)


def test_error_class_sources_in_order() -> None:
    """A tool call's error class: error.type, else (status ERROR) the exception event's type or the status text."""
    # error.type wins; else, for a span with status ERROR, the exception event's type; else the status message;
    # else "error". A span without error status and without error.type did not fail.
    tool = {"gen_ai.tool.name": "t"}
    assert _tool({**tool, "error.type": "Timeout"}).error == "Timeout"
    assert _tool({**tool, "error.type": 503}).error == "503"
    events = [("log", {"exception.type": "Ignored"}), ("exception", {"exception.type": "ValueError"})]
    assert _tool(tool, status_error=True, status_message="bad value", events=events).error == "ValueError"
    assert _tool(tool, status_error=True, status_message="bad value").error == "bad value"
    assert _tool(tool, status_error=True).error == "error"
    assert _tool(tool, status_message="bad value", events=events).error is None
    # A status message is cut at 200 characters.
    assert _tool(tool, status_error=True, status_message="m" * 300).error == "m" * 200


# --- roles, names, sessions ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("attrs", "role"), [
    ({"gen_ai.operation.name": "execute_tool"}, ROLE_TOOL),
    ({"gen_ai.operation.name": "invoke_agent"}, ROLE_AGENT),
    ({"gen_ai.operation.name": "chat"}, ROLE_LLM),
    ({"gen_ai.operation.name": "text_completion"}, ROLE_LLM),
    ({"gen_ai.operation.name": "generate_content"}, ROLE_LLM),
    # An operation loopguard does not read, then the other conventions decide.
    ({"gen_ai.operation.name": "embeddings"}, None),
    ({"gen_ai.operation.name": "embeddings", "openinference.span.kind": "TOOL"}, ROLE_TOOL),
    ({"openinference.span.kind": "TOOL"}, ROLE_TOOL),
    ({"openinference.span.kind": "LLM"}, ROLE_LLM),
    ({"openinference.span.kind": "AGENT"}, ROLE_AGENT),
    ({"openinference.span.kind": "CHAIN"}, None),
    # Every row is tried in order and the first whose conditions hold decides: OpenLLMetry's tool row holds,
    # whatever the OpenInference kind says (no row reads openinference.span.kind = CHAIN).
    ({"openinference.span.kind": "CHAIN", "traceloop.span.kind": "tool"}, ROLE_TOOL),
    ({"traceloop.span.kind": "tool"}, ROLE_TOOL),
    ({"traceloop.span.kind": "agent"}, ROLE_AGENT),
    ({"traceloop.span.kind": "workflow"}, None),
    ({"gen_ai.operation.name": {"a": 1}}, None),
    ({"openinference.span.kind": ["TOOL"]}, None),
    ({"traceloop.span.kind": ["tool"]}, None),
    ({}, None),
])
def test_span_roles(attrs: dict[str, Any], role: str | None) -> None:
    # The README's table: execute_tool / TOOL / tool are tools, invoke_agent / AGENT / agent are agents, and the
    # chat-like GenAI operations and OpenInference LLM spans are model calls; only strings can name a role.
    assert span_role(attrs) == role


def test_agent_name_fallbacks() -> None:
    # The README ("Agent spans"): each convention's agent span names its agent in its own attribute, and a tool
    # span only in its convention's agent attribute, never in the tool's own name. A span of no convention:
    # gen_ai.agent.name, else the default.
    assert agent_name({"gen_ai.agent.name": "g", "agent.name": "o", "traceloop.entity.name": "t"}) == "g"
    assert agent_name({"agent.name": "o", "traceloop.entity.name": "t"}) is None
    # An OpenInference AGENT span: agent.name. An OpenLLMetry agent span: gen_ai.agent.name, else its entity name.
    assert agent_name({"openinference.span.kind": "AGENT", "agent.name": "o", "traceloop.entity.name": "t"}) == "o"
    assert agent_name({"traceloop.span.kind": "agent", "agent.name": "o", "traceloop.entity.name": "t"}) == "t"
    # A GenAI invoke_agent span: gen_ai.agent.name, else gen_ai.agent.id.
    assert agent_name({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "a-1"}) == "a-1"
    # An OpenInference TOOL span: agent.name. An OpenLLMetry tool span: its traceloop.entity.name is the tool's name,
    # not the agent's: none (gen_ai.agent.name and traceloop.workflow.name absent).
    assert agent_name({"openinference.span.kind": "TOOL", "agent.name": "o"}) == "o"
    assert agent_name({"traceloop.span.kind": "tool", "traceloop.entity.name": "search"}) is None
    assert agent_name({"traceloop.span.kind": "tool", "traceloop.workflow.name": "wf"}) == "wf"
    assert agent_name({}) is None
    assert agent_name({}, "fallback") == "fallback"
    # An empty name is no name; a non-string one is read as text.
    assert agent_name({"gen_ai.agent.name": ""}, "fallback") == "fallback"
    assert agent_name({"gen_ai.agent.name": 5}) == "5"


def test_session_id_fallback() -> None:
    # gen_ai.conversation.id, else OpenInference's session.id; empty means none.
    assert conversation_id({"gen_ai.conversation.id": "c1", "session.id": "s1"}) == "c1"
    assert conversation_id({"session.id": "s1"}) == "s1"
    assert conversation_id({"session.id": ""}) is None
    assert conversation_id({}) is None
    assert conversation_id({"session.id": 12}) == "12"


# --- model usage and its cost --------------------------------------------------------------------------------------

PRICES = Prices(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)


def test_genai_cached_tokens_are_priced_once() -> None:
    # gen_ai.usage.input_tokens counts the cached tokens too (GenAI conventions): 1000 input tokens of which 600
    # were read from the cache and 100 written to it leave 300 at the plain input price.
    # 300 * 3.00 + 600 * 0.30 + 100 * 3.75 + 50 * 15.00 = 900 + 180 + 375 + 750 = 2205 -> $0.002205.
    model, usage = llm_usage({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                              "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
                              "gen_ai.usage.cache_read.input_tokens": 600,
                              "gen_ai.usage.cache_creation.input_tokens": 100})
    assert model == "m"
    assert usage.uncached_input_tokens == 300
    assert usage.total_tokens == 1050  # every token once: 300 + 600 + 100 + 50
    assert cost_usd(usage, PRICES) == pytest.approx(0.002205, rel=1e-12)


def test_genai_cache_write_spellings() -> None:
    # Both spellings of cache writes occur; cache_creation wins when both are there. 400 input tokens with 100
    # written: 300 * 3 + 100 * 3.75 = 1275 -> $0.001275.
    base = {"gen_ai.usage.input_tokens": 400, "gen_ai.usage.output_tokens": 0}
    _, usage = llm_usage({**base, "gen_ai.usage.cache_write.input_tokens": 100})
    assert usage.cache_write_tokens == 100
    assert cost_usd(usage, PRICES) == pytest.approx(0.001275, rel=1e-12)
    _, both = llm_usage({**base, "gen_ai.usage.cache_creation.input_tokens": 100,
                         "gen_ai.usage.cache_write.input_tokens": 7})
    assert both.cache_write_tokens == 100


def test_genai_model_and_missing_counts() -> None:
    # The response model (what actually answered) wins over the requested one; an output count alone is usage.
    model, usage = llm_usage({"gen_ai.request.model": "req", "gen_ai.response.model": "resp",
                              "gen_ai.usage.output_tokens": 7})
    assert (model, usage.input_tokens, usage.output_tokens) == ("resp", 0, 7)
    model, _ = llm_usage({"gen_ai.usage.input_tokens": 1})
    assert model is None
    # Counts as strings are read as numbers; unreadable ones as zero.
    _, usage = llm_usage({"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "x"})
    assert (usage.input_tokens, usage.output_tokens) == (12, 0)
    _, usage = llm_usage({"gen_ai.usage.input_tokens": float("inf"), "gen_ai.usage.output_tokens": None})
    assert (usage.input_tokens, usage.output_tokens) == (0, 0)
    # No token count at all: no usage.
    assert llm_usage({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) is None


def test_openinference_usage() -> None:
    # OpenInference's prompt count includes its cache details like the GenAI one: 2000 prompt tokens, 1500 read
    # and 200 written leave 300 plain. 300 * 3 + 1500 * 0.3 + 200 * 3.75 + 100 * 15 = 900 + 450 + 750 + 1500
    # = 3600 -> $0.0036.
    model, usage = llm_usage({"openinference.span.kind": "LLM", "llm.model_name": "oi-model",
                              "llm.token_count.prompt": 2000, "llm.token_count.completion": 100,
                              "llm.token_count.prompt_details.cache_read": 1500,
                              "llm.token_count.prompt_details.cache_write": 200})
    assert model == "oi-model"
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.uncached_input_tokens) == (1500, 200, 300)
    assert cost_usd(usage, PRICES) == pytest.approx(0.0036, rel=1e-12)
    # A completion count alone is usage too; no model name gives None.
    model, usage = llm_usage({"llm.token_count.completion": 3})
    assert (model, usage.output_tokens) == (None, 3)


def test_unpriced_model_tokens_are_counted_once() -> None:
    # A model without a price: its tokens are reported, each once (1000 input incl. 600 cached + 50 output = 1050).
    _, usage = llm_usage({"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
                          "gen_ai.usage.cache_read.input_tokens": 600})
    total = CostTotal().add("nobody-prices-me", usage, {})
    assert (total.usd, total.unpriced_tokens, total.unpriced_models) == (0.0, 1050, frozenset({"nobody-prices-me"}))


@pytest.mark.parametrize("marker", ["input_str", "metadata", "tags"])
def test_any_langchain_envelope_key_marks_an_envelope(marker: str) -> None:
    # OpenLLMetry's LangChain envelope is recognised by "inputs" together with any one of its other keys: the
    # arguments are then the inputs only, as JSON text again.
    envelope = {"inputs": {"q": "x"}, marker: "run-1" if marker == "input_str" else {"run": 1}}
    call = _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": json.dumps(envelope)})
    assert json.loads(call.arguments) == {"q": "x"}


def test_a_parameter_named_inputs_is_not_an_envelope() -> None:
    # {"inputs": ...} alone is a tool whose parameter happens to be called "inputs": the arguments stay whole, even
    # on an OpenLLMetry span, whose row unwraps LangChain inputs.
    text = json.dumps({"inputs": [1, 2]})
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": text}).arguments == text


def test_result_envelopes_without_a_call_id() -> None:
    # OpenLLMetry's {"output": {"kwargs": {"content": ...}}} is unwrapped even without a tool_call_id.
    text = json.dumps({"output": {"lc": 1, "kwargs": {"content": "found"}}, "kwargs": {"name": "search"}})
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": text}).result == "found"


@pytest.mark.parametrize("doc", [
    {"output": {"status": "ok"}, "kwargs": {"x": 1}},   # an "output" without kwargs
    {"output": {"kwargs": None}, "kwargs": {"x": 1}},   # kwargs that are not an object
    {"tool_call_id": "c", "value": 3},                  # a call id without content
    {"content": "c", "kwargs": {"x": 1}},               # content without a call id
    {"kwargs": {"content": "c"}},                       # a bare message without a call id
])
def test_results_that_only_look_like_envelopes_stay_whole(doc: dict[str, Any]) -> None:
    # Each mentions "kwargs" or "tool_call_id", so on an OpenLLMetry span the ToolMessage unwrap is tried, but none
    # is a ToolMessage: the result is the same text.
    text = json.dumps(doc)
    assert _tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.result": text}).result == text


def test_defaults_of_the_extractor() -> None:
    # Called with attributes, a name and times only: no error status (the call succeeded), and the size limit is
    # 65536 characters (the configuration's max_argument_bytes default): an envelope of exactly that length is
    # unwrapped on an OpenLLMetry span, one character more is not.
    attrs = {"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"}
    assert Extractor().tool_call(attrs, "t", T0_NS, T0_NS + 1).error is None
    pad = 65_536 - len(json.dumps({"inputs": {"q": ""}, "tags": []}))
    exact = json.dumps({"inputs": {"q": "x" * pad}, "tags": []})
    assert len(exact) == 65_536
    unwrapped = Extractor().tool_call({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t",
                                       "gen_ai.tool.call.arguments": exact}, "t", None, None)
    assert json.loads(unwrapped.arguments) == {"q": "x" * pad}
    over = exact[:-2] + ' ' + exact[-2:]
    kept = Extractor().tool_call({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": over},
                                 "t", None, None)
    assert kept.arguments == over


def test_arguments_envelope_exactly_at_the_limit_is_unwrapped() -> None:
    # A 32-character envelope with a 32-byte limit: not over the limit, so parsed and unwrapped to its inputs.
    args = json.dumps({"inputs": {"q": 1}, "tags": []})
    assert json.loads(_tool({**OPENLLMETRY_TOOL, "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": args},
                            max_bytes=len(args)).arguments) == {"q": 1}


def test_the_status_message_is_the_error_when_nothing_else_names_it() -> None:
    assert _tool({"gen_ai.tool.name": "t"}, status_error=True, status_message="quota exceeded").error == (
        "quota exceeded")


def test_a_prompt_count_alone_is_usage() -> None:
    # An OpenInference LLM span with a prompt count but no completion count still reports usage.
    model, usage = llm_usage({"llm.model_name": "m", "llm.token_count.prompt": 40})
    assert (model, usage.input_tokens, usage.output_tokens) == ("m", 40, 0)
