"""Every convention loopguard reads, one row each: how a span is recognised and where each part of a call is.

This module is data: the :class:`~.extract.Extractor` compiles these rows once and reads every span through them,
and the documentation's convention table (docs/conventions.md) is this table in prose. A row is tried in order
and the first whose ``when`` conditions all hold describes the span; within a row, each part (tool name,
arguments, result, error, call id, agent) is read from the first of its sources that is present.

Sources name a span attribute, the attribute of a span event, or the span name; a ``path`` reads inside the JSON
text of the value (``kwargs.name`` of a serialised LangChain ToolMessage). ``unwrap_arguments``/``unwrap_result``
name envelopes (see :data:`~.extract.ENVELOPES`) peeled off the value so only the call's own content is compared.

Placeholders meaning "not recorded" (``__REDACTED__``, ``[REDACTED]``, ADK's ``{}``) are NOT part of a row: they
are one configurable list, ``redacted_values`` (:data:`~otel_loopguard.core.config.DEFAULT_REDACTED_VALUES`).

User-defined rows (``[conventions.NAME]`` in the configuration) are tried before these.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import names as n

__all__ = [
    "AGENT_SPANS",
    "MODEL_SPANS",
    "TOOL_CONVENTIONS",
    "AgentSpans",
    "Convention",
    "ModelSpans",
    "Source",
    "When",
    "attr",
    "event",
    "span_name",
]


@dataclass(frozen=True)
class When:
    """One condition on a span; a row applies when all of its conditions hold.

    Attributes:
        attribute: the attribute that must be present (with ``equals``: hold one of those values).
        equals: the values accepted; empty = any value (presence).
        span_name_prefix: instead of an attribute: the span name starts with this.
        span_name_equals: instead of an attribute: the span name is exactly this.
    """

    attribute: str = ""
    equals: tuple[str, ...] = ()
    span_name_prefix: str = ""
    span_name_equals: str = ""


def _is(attribute: str, *values: str) -> When:
    return When(attribute, tuple(values))


def _has(attribute: str) -> When:
    return When(attribute)


@dataclass(frozen=True)
class Source:
    """Where one part of a call is read.

    Attributes:
        attribute: the span attribute (or, with ``event``, the event's attribute).
        event: the span event whose attribute it is ("" = a span attribute).
        path: keys (and list indexes) into the value's JSON text; () = the value itself.
        from_span_name: the span name is the value, with ``strip_prefix``/``strip_suffix`` removed when present.
        strip_prefix: see ``from_span_name``.
        strip_suffix: see ``from_span_name``.
    """

    attribute: str = ""
    event: str = ""
    path: tuple[str | int, ...] = ()
    from_span_name: bool = False
    strip_prefix: str = ""
    strip_suffix: str = ""

    def describe(self) -> str:
        """The source as the documentation writes it."""
        if self.from_span_name:
            text = "span name"
            if self.strip_prefix:
                text += f" after `{self.strip_prefix}`"
            if self.strip_suffix:
                text += f" before `{self.strip_suffix}`"
            return text
        text = f"`{self.attribute}`"
        if self.event:
            text = f"event `{self.event}` {text}"
        if self.path:
            text += " → " + ".".join(str(p) for p in self.path)
        return text


def attr(attribute: str, *path: str | int) -> Source:
    """A span attribute, or a value inside its JSON text."""
    return Source(attribute=attribute, path=tuple(path))


def event(name: str, attribute: str) -> Source:
    """An attribute of a span event."""
    return Source(attribute=attribute, event=name)


def span_name(strip_prefix: str = "", strip_suffix: str = "") -> Source:
    """The span name, without a prefix or suffix."""
    return Source(from_span_name=True, strip_prefix=strip_prefix, strip_suffix=strip_suffix)


@dataclass(frozen=True)
class Convention:
    """How one instrumentation writes a tool call.

    Attributes:
        name: short name (used in logs, tests and ``audit`` notes).
        title: frameworks and instrumentations it covers (the documentation's words).
        when: conditions that recognise its tool spans (all must hold).
        tool_name, arguments, result, error, call_id, agent_name: sources, first present wins. An ``error`` value
            that is a string is the error class; ``true`` means failed (class from the exception event or status).
        unwrap_arguments, unwrap_result: envelopes peeled off the value, tried in order.
        not_a_call: the recognised span is not a tool call (it is skipped).
        recorded_from: the packages and versions its fixtures were recorded from.
    """

    name: str
    title: str
    when: tuple[When, ...]
    tool_name: tuple[Source, ...] = ()
    arguments: tuple[Source, ...] = ()
    result: tuple[Source, ...] = ()
    error: tuple[Source, ...] = ()
    call_id: tuple[Source, ...] = ()
    agent_name: tuple[Source, ...] = ()
    unwrap_arguments: tuple[str, ...] = ()
    unwrap_result: tuple[str, ...] = ()
    not_a_call: bool = False
    recorded_from: str = ""


_ERROR_TYPE = (attr(n.ERROR_TYPE),)
_BEEAI = "beeai-framework 0.1.85, openinference-instrumentation-beeai 0.1.30"
_OPENLIT = "openlit 1.45.0, langchain 1.5.2, langchain-openai 1.1.9, openai 2.8.1"

#: Tool-span conventions, most specific first (the first row whose conditions hold reads the span).
TOOL_CONVENTIONS: tuple[Convention, ...] = (
    Convention(
        name="adk_merged",
        title="Google ADK: the `execute_tool (merged)` span after parallel calls (not a call of its own)",
        when=(_is(n.GEN_AI_TOOL_NAME, n.ADK_MERGED_TOOLS),),
        not_a_call=True,
        recorded_from="google-adk 2.13.0",
    ),
    Convention(
        name="vercel_ai",
        title="Vercel AI SDK 6 `experimental_telemetry`, AI SDK 7 `LegacyOpenTelemetry`",
        when=(_is(n.AI_OPERATION_ID, n.AI_OP_TOOL_CALL),),
        tool_name=(attr(n.AI_TOOL_CALL_NAME),),
        arguments=(attr(n.AI_TOOL_CALL_ARGS),),
        result=(attr(n.AI_TOOL_CALL_RESULT),),
        call_id=(attr(n.AI_TOOL_CALL_ID),),
        agent_name=(attr(n.AI_TELEMETRY_FUNCTION_ID),),
        unwrap_result=("json_string",),
        recorded_from="ai 6.0.333, ai 7.0.173 + @ai-sdk/otel 1.0.173",
    ),
    Convention(
        name="mastra_legacy",
        title="Mastra 0.x AI tracing (`@mastra/otel-exporter` 0.3)",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_MASTRA_TOOL_EXECUTE),),
        tool_name=(attr(n.GEN_AI_TOOL_NAME), span_name(strip_prefix="tool.execute ")),
        arguments=(attr(n.GEN_AI_TOOL_INPUT), attr(n.MASTRA_INPUT)),
        result=(attr(n.GEN_AI_TOOL_OUTPUT), attr(n.MASTRA_OUTPUT)),
        error=(attr(n.ERROR_TYPE), attr(n.MASTRA_ERROR)),
        recorded_from="@mastra/core 0.24.9, @mastra/otel-exporter 0.3.3",
    ),
    Convention(
        name="adk_legacy",
        title="Google ADK legacy schema (Python `ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`; ADK for JS)",
        when=(_has(n.ADK_TOOL_CALL_ARGS),),
        tool_name=(attr(n.GEN_AI_TOOL_NAME), span_name(strip_prefix="execute_tool ")),
        arguments=(attr(n.ADK_TOOL_CALL_ARGS),),
        result=(attr(n.ADK_TOOL_RESPONSE),),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        agent_name=(attr(n.GEN_AI_AGENT_NAME),),
        recorded_from="google-adk 2.13.0 (Python), @google/adk 2.0.0 (JS)",
    ),
    Convention(
        name="strands",
        title="strands-agents, default conventions (content in span events)",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_EXECUTE_TOOL), _is(n.GEN_AI_SYSTEM, n.STRANDS_SYSTEM)),
        tool_name=(attr(n.GEN_AI_TOOL_NAME),),
        arguments=(event(n.EVENT_GEN_AI_TOOL_MESSAGE, "content"), attr(n.GEN_AI_TOOL_CALL_ARGUMENTS)),
        result=(event(n.EVENT_GEN_AI_CHOICE, "message"), attr(n.GEN_AI_TOOL_CALL_RESULT)),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        agent_name=(attr(n.GEN_AI_AGENT_NAME),),
        unwrap_result=("content_blocks",),
        recorded_from="strands-agents 1.62.0",
    ),
    Convention(
        name="strands_latest",
        title="strands-agents with `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_EXECUTE_TOOL), _is(n.GEN_AI_PROVIDER_NAME, n.STRANDS_SYSTEM)),
        tool_name=(attr(n.GEN_AI_TOOL_NAME),),
        arguments=(attr(n.GEN_AI_TOOL_CALL_ARGUMENTS),),
        result=(attr(n.GEN_AI_TOOL_CALL_RESULT),),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        agent_name=(attr(n.GEN_AI_AGENT_NAME),),
        unwrap_result=("content_blocks",),
        recorded_from="strands-agents 1.62.0",
    ),
    Convention(
        name="llamaindex_openllmetry",
        title="LlamaIndex under OpenLLMetry (the workflow's call_tool step span)",
        when=(_is(n.TRACELOOP_SPAN_KIND, n.TL_KIND_TASK), _has(n.OI_TOOL_NAME)),
        tool_name=(attr(n.OI_TOOL_NAME),),
        arguments=(attr(n.TOOL_ARGUMENTS),),
        result=(attr(n.TRACELOOP_ENTITY_OUTPUT, "tool_output", "raw_output"),),
        error=(attr(n.TRACELOOP_ENTITY_OUTPUT, "tool_output", "is_error"),),
        call_id=(attr(n.TRACELOOP_ENTITY_OUTPUT, "tool_id"),),
        recorded_from="llama-index-core 0.14.25, opentelemetry-instrumentation-llamaindex 0.62.4",
    ),
    Convention(
        name="langchain_js_openllmetry",
        title="OpenLLMetry JS on LangChain.js / LangGraph.js (every tool named `DynamicStructuredTool`)",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_EXECUTE_TOOL), _is(n.TRACELOOP_SPAN_KIND, n.TL_KIND_TASK)),
        tool_name=(attr(n.TRACELOOP_ENTITY_OUTPUT, "kwargs", "name"), attr(n.GEN_AI_TOOL_NAME),
                   attr(n.TRACELOOP_ENTITY_NAME)),
        arguments=(attr(n.TRACELOOP_ENTITY_INPUT, "args", 0),),
        result=(attr(n.TRACELOOP_ENTITY_OUTPUT, "kwargs", "content"),),
        error=_ERROR_TYPE,
        call_id=(attr(n.TRACELOOP_ENTITY_OUTPUT, "kwargs", "tool_call_id"),),
        agent_name=(attr(n.TRACELOOP_WORKFLOW_NAME),),
        recorded_from="@traceloop/node-server-sdk 0.27.0, @langchain/langgraph 1.7.3",
    ),
    Convention(
        name="openllmetry",
        title="OpenLLMetry / Traceloop (Python): LangChain, LangGraph, openai-agents",
        when=(_is(n.TRACELOOP_SPAN_KIND, n.TL_KIND_TOOL),),
        tool_name=(attr(n.GEN_AI_TOOL_NAME), attr(n.TRACELOOP_ENTITY_NAME), span_name(strip_suffix=".tool")),
        arguments=(attr(n.GEN_AI_TOOL_CALL_ARGUMENTS), attr(n.TRACELOOP_ENTITY_INPUT)),
        result=(attr(n.GEN_AI_TOOL_CALL_RESULT), attr(n.TRACELOOP_ENTITY_OUTPUT)),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        agent_name=(attr(n.GEN_AI_AGENT_NAME), attr(n.TRACELOOP_WORKFLOW_NAME)),
        unwrap_arguments=("langchain_inputs",),
        unwrap_result=("tool_message",),
        recorded_from="opentelemetry-instrumentation-langchain 0.62.4, opentelemetry-instrumentation-openai-agents "
                      "0.62.4",
    ),
    Convention(
        name="beeai_final_answer",
        title="BeeAI under OpenInference: the run's `final_answer` tool (the answer, not a call)",
        when=(_is(n.OPENINFERENCE_SPAN_KIND, n.OI_KIND_TOOL), _is(n.BEEAI_TOOL_CLASS, n.BEEAI_FINAL_ANSWER_CLASS)),
        not_a_call=True,
        recorded_from=_BEEAI,
    ),
    Convention(
        name="beeai",
        title='BeeAI under OpenInference: tool input `{"input": {...}, "options": null}`',
        when=(_is(n.OPENINFERENCE_SPAN_KIND, n.OI_KIND_TOOL), _has(n.BEEAI_OUTPUT_CLASS)),
        tool_name=(attr(n.OI_TOOL_NAME), span_name()),
        arguments=(attr(n.OI_INPUT_VALUE),),
        result=(attr(n.OI_OUTPUT_VALUE),),
        error=_ERROR_TYPE,
        unwrap_arguments=("input_options",),
        recorded_from=_BEEAI,
    ),
    Convention(
        name="openinference",
        title="OpenInference: LangChain, openai-agents, AutoGen, smolagents, DSPy",
        when=(_is(n.OPENINFERENCE_SPAN_KIND, n.OI_KIND_TOOL),),
        tool_name=(attr(n.OI_TOOL_NAME), span_name(strip_suffix=".__call__")),
        arguments=(attr(n.OI_INPUT_VALUE),),
        result=(attr(n.OI_OUTPUT_VALUE),),
        error=_ERROR_TYPE,
        agent_name=(attr(n.OI_AGENT_NAME),),
        unwrap_arguments=("langchain_inputs", "python_call", "kwargs_only"),
        unwrap_result=("tool_message", "json_string"),
        recorded_from="openinference-instrumentation-langchain 0.1.80, -openai-agents 2.6.0, "
                      "-autogen-agentchat 0.1.22, -smolagents 0.1.43, -dspy 0.1.48",
    ),
    Convention(
        name="langfuse",
        title='Langfuse Python SDK v3 and later: `@observe(as_type="tool")`, '
              '`start_as_current_observation(as_type="tool")`',
        when=(_is(n.LANGFUSE_OBSERVATION_TYPE, n.LF_TYPE_TOOL),),
        arguments=(attr(n.LANGFUSE_INPUT),),
        result=(attr(n.LANGFUSE_OUTPUT),),
        error=_ERROR_TYPE,
        unwrap_arguments=("args_kwargs",),
        unwrap_result=("json_string",),
        recorded_from="langfuse 5.2.0",
    ),
    Convention(
        name="mlflow",
        title="MLflow tracing 3, native attributes: `@mlflow.trace(span_type=SpanType.TOOL)`",
        when=(_is(n.MLFLOW_SPAN_TYPE, n.ML_TYPE_TOOL),),
        arguments=(attr(n.MLFLOW_SPAN_INPUTS),),
        result=(attr(n.MLFLOW_SPAN_OUTPUTS),),
        error=_ERROR_TYPE,
        unwrap_result=("json_string",),
        recorded_from="mlflow 3.17.2",
    ),
    Convention(
        name="logfire_agents",
        title="Pydantic Logfire `instrument_openai_agents()`: OpenAI Agents SDK `Function: {name}` spans",
        when=(_is(n.LOGFIRE_MSG_TEMPLATE, n.LOGFIRE_FUNCTION_TEMPLATE),),
        tool_name=(attr(n.LOGFIRE_NAME),),
        arguments=(attr(n.LOGFIRE_INPUT),),
        result=(attr(n.LOGFIRE_OUTPUT),),
        error=(event(n.EVENT_EXCEPTION, n.EXCEPTION_TYPE), attr(n.LOGFIRE_ERROR, n.LOGFIRE_ERROR_MESSAGE)),
        recorded_from="logfire 5.4.0, openai-agents 0.24.0",
    ),
    Convention(
        name="openlit",
        title="OpenLIT `execute_tool` (LangChain, LangGraph): arguments as a Python dict's repr, result as a "
              "ToolMessage's repr",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_EXECUTE_TOOL), _has(n.OPENLIT_APPLICATION_NAME)),
        tool_name=(attr(n.GEN_AI_TOOL_NAME), span_name(strip_prefix="execute_tool ")),
        arguments=(attr(n.GEN_AI_TOOL_CALL_ARGUMENTS),),
        result=(attr(n.GEN_AI_TOOL_CALL_RESULT),),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        unwrap_arguments=("python_dict",),
        unwrap_result=("message_repr",),
        recorded_from=_OPENLIT,
    ),
    Convention(
        name="genai",
        title="OpenTelemetry GenAI `execute_tool`: pydantic-ai, openai-agents v2, LangGraph genai, AI SDK 7, "
              "Mastra 1.x, ADK default schema, AutoGen, MCP",
        when=(_is(n.GEN_AI_OPERATION_NAME, n.OP_EXECUTE_TOOL),),
        tool_name=(attr(n.GEN_AI_TOOL_NAME), span_name(strip_prefix="execute_tool ")),
        arguments=(attr(n.GEN_AI_TOOL_CALL_ARGUMENTS),),
        result=(attr(n.GEN_AI_TOOL_CALL_RESULT),),
        error=_ERROR_TYPE,
        call_id=(attr(n.GEN_AI_TOOL_CALL_ID),),
        agent_name=(attr(n.GEN_AI_AGENT_NAME),),
        recorded_from="pydantic-ai-slim 2.68.0, opentelemetry-instrumentation-openai-agents-v2 0.1.0, "
                      "opentelemetry-instrumentation-genai-langchain 1.3b0, @ai-sdk/otel 1.0.173, "
                      "@mastra/otel-exporter 1.4.0, google-adk 2.13.0, autogen-core 0.7.5",
    ),
    Convention(
        name="genai_span_name",
        title="a span named `execute_tool <tool>` without attributes (ADK for JS, when the tool raised)",
        when=(When(span_name_prefix=n.EXECUTE_TOOL_SPAN_PREFIX),),
        tool_name=(span_name(strip_prefix=n.EXECUTE_TOOL_SPAN_PREFIX),),
        recorded_from="@google/adk 2.0.0",
    ),
)


@dataclass(frozen=True)
class AgentSpans:
    """How one convention marks an agent (run) span, and where its name is."""

    name: str
    when: tuple[When, ...]
    agent_name: tuple[Source, ...]


#: Agent-span conventions. Attributes may arrive after the span starts (strands, ADK, OpenLLMetry): the processor
#: also recognises them when they end.
AGENT_SPANS: tuple[AgentSpans, ...] = (
    AgentSpans("genai", (_is(n.GEN_AI_OPERATION_NAME, n.OP_INVOKE_AGENT),),
               (attr(n.GEN_AI_AGENT_NAME), attr(n.GEN_AI_AGENT_ID))),
    AgentSpans("openinference", (_is(n.OPENINFERENCE_SPAN_KIND, n.OI_KIND_AGENT),),
               (attr(n.OI_AGENT_NAME), attr(n.OI_GRAPH_NODE_ID), span_name(strip_suffix=".run"))),
    AgentSpans("openllmetry", (_is(n.TRACELOOP_SPAN_KIND, n.TL_KIND_AGENT),),
               (attr(n.GEN_AI_AGENT_NAME), attr(n.TRACELOOP_ENTITY_NAME))),
    AgentSpans("mastra_legacy", (_is(n.GEN_AI_OPERATION_NAME, n.OP_MASTRA_AGENT_RUN),),
               (attr(n.GEN_AI_AGENT_NAME), attr(n.GEN_AI_AGENT_ID), attr(n.MASTRA_AGENT_ID))),
    AgentSpans("vercel_ai", (_is(n.AI_OPERATION_ID, *n.AI_RUN_OPERATIONS),), (attr(n.AI_TELEMETRY_FUNCTION_ID),)),
    AgentSpans("langfuse", (_is(n.LANGFUSE_OBSERVATION_TYPE, n.LF_TYPE_AGENT),), (span_name(),)),
    AgentSpans("mlflow", (_is(n.MLFLOW_SPAN_TYPE, n.ML_TYPE_AGENT),), (span_name(),)),
)


@dataclass(frozen=True)
class ModelSpans:
    """How one convention marks a model-call span, and where its token usage is.

    Attributes:
        usage: ``genai`` (``gen_ai.usage.*``) or ``openinference`` (``llm.token_count.*``).
        messages: readers of the tool calls in its output and their results in its input
            (:data:`~.model_calls.MESSAGE_READERS`), used when a trace has no tool span.
    """

    name: str
    when: tuple[When, ...]
    usage: str
    messages: tuple[str, ...] = ()


#: Model-call conventions (a run's totals repeated on an agent or root span are never read: those are agent spans).
MODEL_SPANS: tuple[ModelSpans, ...] = (
    # openai-v2 / genai-openai / genai-anthropic with SPAN_ONLY, OpenLLMetry >= 0.55, the anthropic SDK, LiteLLM.
    # Pydantic Logfire's instrument_openai (version 1: request_data / response_data) is read here too, and OpenLIT's
    # gen_ai.tool.name / gen_ai.tool.args (kept with content capture off).
    ModelSpans("genai", (_is(n.GEN_AI_OPERATION_NAME, *n.LLM_OPERATIONS),), "genai",
               ("genai_messages", "openllmetry_flat", "logfire_chat", "openlit_tools")),
    ModelSpans("openinference", (_is(n.OPENINFERENCE_SPAN_KIND, n.OI_KIND_LLM),), "openinference",
               ("openinference_messages",)),
    ModelSpans("vercel_ai", (_is(n.AI_OPERATION_ID, *n.AI_MODEL_OPERATIONS),), "genai"),
    # ADK's call_llm has no operation name; in Python it wraps a generate_content span with the same usage.
    ModelSpans("adk", (When(span_name_equals=n.ADK_CALL_LLM), _is(n.GEN_AI_SYSTEM, n.ADK_SYSTEM)), "genai"),
    # OpenLLMetry before the GenAI operation name (openai 0.54, anthropic 0.53): llm.request.type.
    ModelSpans("openllmetry_legacy", (_is(n.LLM_REQUEST_TYPE, "chat", "completion"),), "genai",
               ("openllmetry_flat",)),
    # LLM-observability SDKs: the request and the response in the OpenAI Chat Completions shape.
    ModelSpans("langfuse", (_is(n.LANGFUSE_OBSERVATION_TYPE, n.LF_TYPE_GENERATION),), "genai", ("langfuse_chat",)),
    ModelSpans("mlflow", (_is(n.MLFLOW_SPAN_TYPE, *n.ML_TYPE_MODELS),), "genai", ("mlflow_chat",)),
)
