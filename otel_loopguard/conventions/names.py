"""Every attribute, event and metric name otel_loopguard reads or writes.

Keeping them in one module means a convention change (GenAI conventions are
still "Development") is a one-line edit, and tests can assert exact names.
"""

from __future__ import annotations

# --- OpenTelemetry GenAI semantic conventions (read) -------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_AGENT_VERSION = "gen_ai.agent.version"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
# Both spellings occur in the wild for cache writes.
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS = "gen_ai.usage.cache_write.input_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"

OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
#: The GenAI span name of a tool call is ``execute_tool {gen_ai.tool.name}``.
EXECUTE_TOOL_SPAN_PREFIX = "execute_tool "
# Span names of agent spans (GenAI `invoke_agent <name>`, OpenLLMetry `<name>.agent`).
INVOKE_AGENT_SPAN_PREFIX = "invoke_agent"
TRACELOOP_AGENT_SPAN_SUFFIX = ".agent"

# --- Framework-specific keys (read; see conventions/table.py) ----------------
# Vercel AI SDK (ai 6 experimental_telemetry, ai 7 LegacyOpenTelemetry).
AI_OPERATION_ID = "ai.operationId"
AI_OP_TOOL_CALL = "ai.toolCall"
AI_RUN_OPERATIONS = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")
AI_MODEL_OPERATIONS = ("ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate",
                       "ai.streamObject.doStream")
AI_TOOL_CALL_NAME = "ai.toolCall.name"
AI_TOOL_CALL_ID = "ai.toolCall.id"
AI_TOOL_CALL_ARGS = "ai.toolCall.args"
AI_TOOL_CALL_RESULT = "ai.toolCall.result"
AI_TELEMETRY_FUNCTION_ID = "ai.telemetry.functionId"
# Mastra 0.x AI tracing.
OP_MASTRA_TOOL_EXECUTE = "tool.execute"
OP_MASTRA_AGENT_RUN = "agent.run"
GEN_AI_TOOL_INPUT = "gen_ai.tool.input"
GEN_AI_TOOL_OUTPUT = "gen_ai.tool.output"
# Tool descriptions and schemas: content-like keys that never hold a call's content.
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOOL_JSON_SCHEMA = "gen_ai.tool.json_schema"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
OI_TOOL_PARAMETERS = "tool.parameters"
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
MASTRA_METADATA_BODY = "mastra.metadata.body"
# Older OpenLLMetry's flattened messages (gen_ai.completion.N.*, gen_ai.prompt.K.*); LiteLLM's first requested call.
GEN_AI_COMPLETION_PREFIX = "gen_ai.completion."
GEN_AI_PROMPT_PREFIX = "gen_ai.prompt."
LITELLM_FUNCTION_CALL_NAME = "gen_ai.completion.0.function_call.name"
LITELLM_FUNCTION_CALL_ARGUMENTS = "gen_ai.completion.0.function_call.arguments"
#: Prefixes of the model-span attribute keys named when a trace's tool calls cannot be read.
GENAI_KEY_PREFIXES = ("gen_ai.", "llm.", "ai.", "langfuse.observation.", "mlflow.span", "traceloop.")
MASTRA_INPUT = "input"
MASTRA_OUTPUT = "output"
MASTRA_ERROR = "error"
MASTRA_AGENT_ID = "agent.id"
# Google ADK (legacy schema; its call_llm spans).
ADK_TOOL_CALL_ARGS = "gcp.vertex.agent.tool_call_args"
ADK_TOOL_RESPONSE = "gcp.vertex.agent.tool_response"
ADK_LLM_REQUEST = "gcp.vertex.agent.llm_request"
ADK_LLM_RESPONSE = "gcp.vertex.agent.llm_response"
ADK_CALL_LLM = "call_llm"
ADK_SYSTEM = "gcp.vertex.agent"
ADK_MERGED_TOOLS = "(merged tools)"
# strands-agents (default conventions: content in span events).
STRANDS_SYSTEM = "strands-agents"
EVENT_GEN_AI_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_GEN_AI_CHOICE = "gen_ai.choice"
# LlamaIndex under OpenLLMetry: the call_tool step span.
TOOL_ARGUMENTS = "tool.arguments"
# OpenLLMetry before gen_ai.operation.name.
LLM_REQUEST_TYPE = "llm.request.type"

# --- LLM-observability SDKs (read; see conventions/table.py) -----------------
# Langfuse Python SDK v3 and later (OpenTelemetry-based): every observation is a span with a type.
LANGFUSE_OBSERVATION_TYPE = "langfuse.observation.type"
LANGFUSE_INPUT = "langfuse.observation.input"
LANGFUSE_OUTPUT = "langfuse.observation.output"
LF_TYPE_TOOL = "tool"
LF_TYPE_GENERATION = "generation"
LF_TYPE_AGENT = "agent"
# MLflow tracing 3, native attributes: the values are JSON text (the span type with its quotes).
MLFLOW_SPAN_TYPE = "mlflow.spanType"
MLFLOW_SPAN_INPUTS = "mlflow.spanInputs"
MLFLOW_SPAN_OUTPUTS = "mlflow.spanOutputs"
ML_TYPE_TOOL = '"TOOL"'
ML_TYPE_AGENT = '"AGENT"'
ML_TYPE_MODELS = ('"CHAT_MODEL"', '"LLM"')
# Pydantic Logfire instrument_openai(version=1): the request and response bodies as JSON text.
LOGFIRE_REQUEST_DATA = "request_data"
LOGFIRE_RESPONSE_DATA = "response_data"
# Pydantic Logfire instrument_openai_agents(): a function-tool span is named by its template, "Function: {name}"
# (unchanged since the integration's first release), the tool in ``name``, the arguments' JSON text in ``input``
# (LOGFIRE_INPUT), the result text in ``output`` (LOGFIRE_OUTPUT), a failure as the SDK's SpanError JSON in ``error``.
LOGFIRE_MSG_TEMPLATE = "logfire.msg_template"
LOGFIRE_FUNCTION_TEMPLATE = "Function: {name}"
LOGFIRE_NAME = "name"
LOGFIRE_ERROR = "error"
LOGFIRE_ERROR_MESSAGE = "message"
# Evidence that a model asked for tools, kept when content is not (conventions/model_calls.py, unread.py).
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
OI_LLM_FINISH_REASON = "llm.finish_reason"
#: A model refusal: OpenLLMetry's ``gen_ai.completion.<n>.refusal`` (an OpenAI message's ``refusal`` text), a part or
#: content item of this type (OpenAI Responses output; a GenAI output message part), an OpenAI message's field.
REFUSAL = "refusal"
REFUSAL_SUFFIX = ".refusal"
#: The tool name of a call known to have happened whose name was not recorded.
UNREAD_TOOL = "_unread_tool"
#: Tools offered to the model: OpenInference ``llm.tools.N.*``, OpenLLMetry ``llm.request.functions.N.*``, GenAI
#: ``gen_ai.tool.definitions``, Vercel AI ``ai.prompt.tools``, MLflow ``mlflow.chat.tools``. With a ``tool`` message
#: that has no content, they show that a tool ran though content capture is off.
TOOL_DEFINITION_PREFIXES = ("llm.tools.", "llm.request.functions.")
TOOL_DEFINITION_KEYS = ("gen_ai.tool.definitions", "ai.prompt.tools", "mlflow.chat.tools", "llm.openai.tools")
#: The role of a message that carries a tool's result.
TOOL_ROLE = "tool"
#: Counts of the tool calls a model asked for, kept on model spans when content is not.
TOOL_CALL_COUNT_KEYS = ("gen_ai.response.tool_calls.count",)

# --- OpenInference (read) ----------------------------------------------------
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
OI_KIND_TOOL = "TOOL"
OI_KIND_LLM = "LLM"
OI_KIND_AGENT = "AGENT"
OI_TOOL_NAME = "tool.name"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_LLM_MODEL_NAME = "llm.model_name"
OI_TOKEN_PROMPT = "llm.token_count.prompt"
OI_TOKEN_COMPLETION = "llm.token_count.completion"
OI_TOKEN_CACHE_READ = "llm.token_count.prompt_details.cache_read"
OI_TOKEN_CACHE_WRITE = "llm.token_count.prompt_details.cache_write"
OI_SESSION_ID = "session.id"
OI_AGENT_NAME = "agent.name"
OI_GRAPH_NODE_ID = "graph.node.id"

# BeeAI under OpenInference: its tool spans name the tool's and the output's classes; the run's final answer is a
# tool of its own (not a call of the agent's plan).
BEEAI_TOOL_CLASS = "metadata.class_name"
BEEAI_OUTPUT_CLASS = "metadata.output_class"
BEEAI_FINAL_ANSWER_CLASS = "FinalAnswerTool"

# OpenLIT: on a chat span, the tool calls asked for (kept with content capture off), each part joined by ", "; its
# spans carry the application name it was initialised with.
GEN_AI_TOOL_ARGS = "gen_ai.tool.args"
OPENLIT_APPLICATION_NAME = "gen_ai.application_name"
#: OpenLIT's separator between the calls of one model response in ``gen_ai.tool.name`` / ``.call.id`` / ``.args``.
OPENLIT_JOIN = ", "

# --- OpenLLMetry / Traceloop (read) ------------------------------------------
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
TL_KIND_TOOL = "tool"
TL_KIND_AGENT = "agent"
TL_KIND_TASK = "task"
TRACELOOP_WORKFLOW_NAME = "traceloop.workflow.name"
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"

# --- MCP client spans (read, to avoid double counting) -----------------------
MCP_METHOD_NAME = "mcp.method.name"

# --- Version stamps set on every span (write) --------------------------------
VERSION_ATTRIBUTES = {
    "prompt": "app.prompt.version",
    "tools": "app.tools.version",
    "model": "app.model.version",
    "harness": "app.harness.version",
}
#: OpenTelemetry resource attribute: the version of the service (the agent's release).
SERVICE_VERSION = "service.version"
#: The version attributes always read from a trace's spans (then their resource) and put on its verdict events and
#: task metrics: the release, the agent's version, the model asked for, and the stamps above. ``version_attributes``
#: in the configuration adds more (conventions/versions.py).
READ_VERSION_ATTRIBUTES = (SERVICE_VERSION, GEN_AI_AGENT_VERSION, GEN_AI_REQUEST_MODEL, *VERSION_ATTRIBUTES.values())

# --- Emitted by otel_loopguard ----------------------------------------------
INSTRUMENTATION_SCOPE = "otel_loopguard"
#: The Python logger of the human-readable verdict lines (the parent of every logger of the package).
CONSOLE_LOGGER = "otel_loopguard"

EVENT_VERDICT = "loopguard.verdict"

LOOPGUARD_VERDICT = "loopguard.verdict"
LOOPGUARD_VERDICT_PREVIOUS = "loopguard.verdict.previous"
LOOPGUARD_RULE = "loopguard.rule"
LOOPGUARD_PERIOD = "loopguard.period"
LOOPGUARD_REPETITIONS = "loopguard.repetitions"
LOOPGUARD_CYCLE_START = "loopguard.cycle.start"
LOOPGUARD_STEPS = "loopguard.steps"
LOOPGUARD_SIGNATURE = "loopguard.signature"
LOOPGUARD_INTERVENTION = "loopguard.intervention"
LOOPGUARD_NORMALIZER_VERSION = "loopguard.normalizer.version"
LOOPGUARD_MESSAGE = "loopguard.message"
LOOPGUARD_COST_USD = "loopguard.cost.usd"
#: On a ``serve`` event decided while the trace's spans arrived out of start order (judged again at its finish).
LOOPGUARD_PROVISIONAL = "loopguard.provisional"
#: On a ``serve`` event when the bearer token file names tenants: the tenant whose token sent the trace.
LOOPGUARD_TENANT = "loopguard.tenant"

# Metric names (final) and their units.
METRIC_VERDICTS = "loopguard.verdicts"
METRIC_INTERVENTIONS = "loopguard.interventions"
METRIC_TRACES_ACTIVE = "loopguard.traces.active"
METRIC_TOOL_CALLS = "loopguard.tool_calls"
#: ``serve``: tool and model spans received again for a trace that already had them (retried exports; counted once).
METRIC_SPANS_DUPLICATE = "loopguard.spans.duplicate"
METRIC_TRACE_STEPS = "loopguard.trace.steps"
METRIC_TRACE_COST = "loopguard.trace.cost"
METRIC_DETECTION_DELAY = "loopguard.detection.delay"
METRIC_AGENT_TOOL_CALLS = "gen_ai.invoke_agent.tool_calls"
METRIC_TRACES_EVICTED = "loopguard.traces.evicted"
METRIC_PROCESSOR_ERRORS = "loopguard.processor.errors"
METRIC_SPANS_UNREAD = "loopguard.spans.unread"
#: Attribute of ``loopguard.spans.unread``: why the spans could not be read (conventions/unread.py).
LOOPGUARD_UNREAD_REASON = "loopguard.unread.reason"

#: Finished tasks (traces), by outcome (success, error, stopped, refused), agent name and version stamps.
METRIC_TASK_OUTCOMES = "loopguard.task.outcomes"
#: Model calls, tool calls, model cost (USD, only when every call was priced) and seconds per finished task.
METRIC_TASK_TURNS = "loopguard.task.turns"
METRIC_TASK_TOOL_CALLS = "loopguard.task.tool_calls"
METRIC_TASK_COST = "loopguard.task.cost"
METRIC_TASK_DURATION = "loopguard.task.duration"
#: Tool calls that failed, per finished task (with ``loopguard.task.tool_calls``: the tool error rate).
METRIC_TASK_TOOL_ERRORS = "loopguard.task.tool_errors"
#: Attribute of the task metrics: how the task ended.
LOOPGUARD_OUTCOME = "loopguard.outcome"

UNIT_TRANSITION = "{transition}"
UNIT_INTERVENTION = "{intervention}"
UNIT_TRACE = "{trace}"
UNIT_TOOL_CALL = "{tool_call}"
UNIT_STEP = "{step}"
UNIT_USD = "USD"
UNIT_ERROR = "{error}"
UNIT_SPAN = "{span}"
UNIT_TASK = "{task}"
UNIT_TURN = "{turn}"
UNIT_SECOND = "s"

# Tool names beyond this many distinct values are reported as OTHER_TOOL so the
# metric stays low-cardinality whatever the agent invents.
OTHER_TOOL = "_OTHER"

# --- Set by the application on tool spans (read) -----------------------------
LOOPGUARD_PROGRESS = "loopguard.progress"
LOOPGUARD_WAIT_OWNER = "loopguard.wait.owner"
LOOPGUARD_WAIT_DEADLINE = "loopguard.wait.deadline"

LOOPGUARD_EVICTION_REASON = "loopguard.eviction.reason"
EVENT_EXCEPTION = "exception"
EXCEPTION_TYPE = "exception.type"

# --- Hand-offs between agents and model turns (read; conventions/agent_steps.py) -------------------------------------
#: OpenAI Agents SDK under OpenInference: a TOOL span ``handoff to <Agent>`` (from in input.value, to in output.value).
OI_HANDOFF_SPAN_PREFIX = "handoff to "
#: OpenAI Agents SDK under Logfire: ``Handoff: A → B`` spans with these attributes (no gen_ai.tool.*).
LOGFIRE_HANDOFF_SPAN_PREFIX = "Handoff: "
LOGFIRE_FROM_AGENT = "from_agent"
LOGFIRE_TO_AGENT = "to_agent"
#: Hand-off tools: OpenAI Agents SDK and LangGraph ``transfer_to_<agent>``, Google ADK ``transfer_to_agent``.
TRANSFER_TOOL_PREFIX = "transfer_to_"
ADK_TRANSFER_TOOL = "transfer_to_agent"
ADK_TRANSFER_AGENT_ARGUMENT = "agent_name"
#: CrewAI hierarchical delegation: a TOOL span whose input is ``{task, context, coworker}``.
CREWAI_DELEGATE_TOOL = "Delegate work to coworker"
CREWAI_COWORKER_ARGUMENT = "coworker"
# Model-turn text: OpenInference flattened messages, OpenLLMetry's gen_ai.completion.N / gen_ai.prompt.K.
OI_OUTPUT_MESSAGES_PREFIX = "llm.output_messages."
OI_INPUT_MESSAGES_PREFIX = "llm.input_messages."
#: OpenAI Responses objects as Logfire records them (``response``, or ``output`` for a streamed generation, whose
#: OpenInference span has it in ``output.value``) and their input items (``raw_input``, or chat messages ``input``).
LOGFIRE_RESPONSE = "response"
LOGFIRE_OUTPUT = "output"
LOGFIRE_RAW_INPUT = "raw_input"
LOGFIRE_INPUT = "input"

# --- Emitted for steps that are not tool calls ---------------------------------------------------------------------
#: The kind of the judged steps: ``tool``, ``handoff``, ``agent`` or ``model`` (low cardinality: four values). On
#: events of other kinds than ``tool``, and on every point of the verdict and intervention counters.
LOOPGUARD_STEP_KIND = "loopguard.step.kind"
#: The agent names of the repeated cycle (events only, never a metric attribute).
LOOPGUARD_AGENTS = "loopguard.agents"
#: A degenerate output: the repeated chunk's length in characters and its count (never its text).
LOOPGUARD_OUTPUT_CHUNK_LENGTH = "loopguard.output.chunk.length"
LOOPGUARD_OUTPUT_CHUNK_COUNT = "loopguard.output.chunk.count"
