"""A hand-written agent loop on the OpenAI client: stuck polling the same call, stopped by loopguard.

Only the model client is instrumented (opentelemetry-instrumentation-genai-openai, content on the spans): there is
no tool span, so loopguard reads the tool calls from the model spans (the requests in a call's output, the
results in the next call's input). The model is a scripted Chat Completions server on 127.0.0.1 that asks for the
same tool call on every turn, so this runs offline with no API key. The loop asks loopguard after every model call.

    pip install otel-loopguard openai opentelemetry-instrumentation-genai-openai
    python examples/openai_client_loop.py
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from openai import OpenAI
from opentelemetry import trace
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from otel_loopguard import LoopGuardSpanProcessor, LoopStopped, VerdictEvent

# loopguard compares tool arguments and results: the instrumentation records them on the spans only when asked.
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

tracer_provider = TracerProvider()
guard = LoopGuardSpanProcessor()
tracer_provider.add_span_processor(guard)
trace.set_tracer_provider(tracer_provider)
OpenAIInstrumentor().instrument()


def show(event: VerdictEvent) -> None:
    """Print every verdict change as one line (the events also leave through OTLP when providers are set)."""
    if event.transition is not None:
        print(f"loopguard: {event.tool}: {event.transition.previous} -> {event.verdict.kind} "
              f"(rule {event.verdict.rule}, call {event.steps})")


guard.add_listener(show)


class ScriptedModel(BaseHTTPRequestHandler):
    """Answers every Chat Completions request with the same tool call: check the deployment's status."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        turn = len(request["messages"])
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": "deploy_status", "arguments": '{"deployment": "api-v2"}'}}
        body = json.dumps({
            "id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 1767225600, "model": "scripted-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 100 + 20 * turn, "completion_tokens": 15, "total_tokens": 115 + 20 * turn},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def deploy_status(deployment: str) -> str:
    """The tool: the same answer every time, so repeating the call can never make progress."""
    return f"{deployment}: rollout blocked, waiting for approval"


server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="sk-scripted", max_retries=0)
tools = [{"type": "function", "function": {"name": "deploy_status", "description": "Status of a deployment.",
                                           "parameters": {"type": "object",
                                                          "properties": {"deployment": {"type": "string"}}}}}]
messages: list = [{"role": "user", "content": "Is the api-v2 deployment done?"}]
tracer = trace.get_tracer("examples.openai_client_loop")
with tracer.start_as_current_span("invoke_agent deploy_agent"):
    try:
        for _ in range(20):
            intervention = guard.check()  # the calls so far, judged
            intervention.raise_if_stop()
            if intervention.action == "nudge":
                messages.append({"role": "user", "content": intervention.message})
            message = client.chat.completions.create(model="scripted-model", messages=messages,
                                                     tools=tools).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                result = deploy_status(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    except LoopStopped as stop:
        print("run stopped:", stop)
server.shutdown()
tracer_provider.shutdown()
