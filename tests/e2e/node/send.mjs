// A looping agent in Node.js: one trace (an invoke_agent root and four identical execute_tool spans), exported with
// the real OpenTelemetry OTLP trace exporter named on the command line, then the process exits.
//
//   node send.mjs '{"protocol": "http/protobuf" | "http/json" | "grpc", "url": "...", "gzip": true,
//                   "ca": "ca.pem", "cert": "client.pem", "key": "client.key", "token": "...", "timeoutMillis": 10000}'
//
// Prints one JSON line: {"traceId", "toolSpanIds", "results": [export result codes]}; exits 1 if an export failed.
import { readFileSync } from "node:fs";

import * as grpc from "@grpc/grpc-js";
import { context, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as GrpcExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

const options = JSON.parse(process.argv[2]);
const read = (path) => (path ? readFileSync(path) : undefined);

function makeExporter() {
  const compression = options.gzip ? "gzip" : "none";
  const timeoutMillis = options.timeoutMillis ?? 10000;
  if (options.protocol === "grpc") {
    const metadata = new grpc.Metadata();
    if (options.token) metadata.set("authorization", `Bearer ${options.token}`);
    const credentials = options.ca
      ? grpc.credentials.createSsl(read(options.ca), read(options.key), read(options.cert))
      : grpc.credentials.createInsecure();
    return new GrpcExporter({ url: options.url, credentials, metadata, compression, timeoutMillis });
  }
  const config = {
    url: options.url,
    compression,
    timeoutMillis,
    headers: options.token ? { Authorization: `Bearer ${options.token}` } : {},
    httpAgentOptions: options.ca ? { ca: read(options.ca), cert: read(options.cert), key: read(options.key) } : {},
  };
  return options.protocol === "http/json" ? new JsonExporter(config) : new ProtoExporter(config);
}

// Records every export result, so a refused export makes this process fail instead of being only logged.
const inner = makeExporter();
const results = [];
const recording = {
  export(spans, done) {
    inner.export(spans, (result) => {
      results.push({ code: result.code, error: result.error ? String(result.error) : undefined });
      done(result);
    });
  },
  shutdown: () => inner.shutdown(),
  forceFlush: () => inner.forceFlush(),
};

const provider = new TracerProvider({
  resource: resourceFromAttributes({ "service.name": "node-looping-agent" }),
  spanProcessors: [new BatchSpanProcessor({ exporter: recording, scheduledDelayMillis: 50 })],
});
const tracer = provider.getTracer("node-agent");
const root = tracer.startSpan("invoke_agent researcher", {
  attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher" },
});
const parent = trace.setSpan(context.active(), root);
const toolSpanIds = [];
for (let i = 0; i < 4; i++) {
  const tool = tracer.startSpan("execute_tool search", {
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "search",
      "gen_ai.tool.call.arguments": JSON.stringify({ query: "weather in Paris" }),
      "gen_ai.tool.call.result": JSON.stringify({ hits: [] }),
    },
  }, parent);
  toolSpanIds.push(tool.spanContext().spanId);
  tool.end();
}
root.end();
try {
  await provider.shutdown();
} catch (error) {
  // A refused export rejects the flush; the results say what happened.
  results.push({ code: 1, error: String(error) });
}
console.log(JSON.stringify({ traceId: root.spanContext().traceId, toolSpanIds, results }));
process.exit(results.length > 0 && results.every((r) => r.code === 0) ? 0 : 1);
