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

OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})

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

# --- OpenLLMetry / Traceloop (read) ------------------------------------------
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
TL_KIND_TOOL = "tool"
TL_KIND_AGENT = "agent"
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

# --- Emitted by otel_loopguard ----------------------------------------------
INSTRUMENTATION_SCOPE = "otel_loopguard"

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

# Metric names (final) and their units.
METRIC_VERDICTS = "loopguard.verdicts"
METRIC_INTERVENTIONS = "loopguard.interventions"
METRIC_TRACES_ACTIVE = "loopguard.traces.active"
METRIC_TOOL_CALLS = "loopguard.tool_calls"
METRIC_TRACE_STEPS = "loopguard.trace.steps"
METRIC_TRACE_COST = "loopguard.trace.cost"
METRIC_DETECTION_DELAY = "loopguard.detection.delay"
METRIC_AGENT_TOOL_CALLS = "gen_ai.invoke_agent.tool_calls"
METRIC_TRACES_EVICTED = "loopguard.traces.evicted"
METRIC_PROCESSOR_ERRORS = "loopguard.processor.errors"

UNIT_TRANSITION = "{transition}"
UNIT_INTERVENTION = "{intervention}"
UNIT_TRACE = "{trace}"
UNIT_TOOL_CALL = "{tool_call}"
UNIT_STEP = "{step}"
UNIT_USD = "USD"
UNIT_ERROR = "{error}"

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
