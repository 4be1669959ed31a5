"""``otel-loopguard demo``: a scripted agent walks through every verdict, judged live by the real processor.

Every scenario is its own trace, made of real SDK spans (an ``invoke_agent`` root, ``chat``
model spans with token usage, ``execute_tool`` spans in the GenAI conventions) on a real
``TracerProvider`` with :class:`LoopGuardSpanProcessor`. Time is simulated: every span gets
explicit start and end timestamps from a clock that only moves forward when the script says
so, so the demo runs in about a second while backoff gaps and approval deadlines are real in
the data (and in the ``--out`` file that ``audit`` reads back).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..conventions import names as n
from ..conventions.verdicts import VerdictEvent
from ..core.config import LoopGuardConfig, config_values
from ..core.model import Intervention
from ..errors import ConfigError, LoopStopped
from ..harness import with_nudge
from ..sdk.otlp_write import write_otlp_json
from ..sdk.processor import LoopGuardSpanProcessor
from ..sdk.providers import otlp_exporter
from .options import COLORS as _COLORS

__all__ = ["DEMO_CONFIG_PATH", "DEMO_CONFIG_TOML", "DemoResult", "ScenarioResult", "demo_config", "run_demo"]

#: The demo's configuration file, shipped with the package: default detectors, a price table and a cost budget.
#: ``audit`` of the ``--out`` file with it as ``--config`` reproduces every verdict and intervention; without it,
#: everything but the cost stop (no prices, so no cost).
DEMO_CONFIG_PATH = Path(__file__).resolve().parent.parent / "examples" / "demo-prices.toml"
DEMO_CONFIG_TOML = DEMO_CONFIG_PATH.read_text(encoding="utf-8")

_SMALL_MODEL = "gpt-4.1-mini"
_LARGE_MODEL = "gpt-4.1"
_SERVICE_NAME = "otel-loopguard-demo"
_SCOPE = "otel_loopguard.demo"
_NS = 1_000_000_000


def demo_config() -> LoopGuardConfig:
    """The configuration the demo runs with (the shipped file :data:`DEMO_CONFIG_PATH`)."""
    return LoopGuardConfig(**config_values(tomllib.loads(DEMO_CONFIG_TOML)))


@dataclass(frozen=True)
class ScenarioResult:
    """How one scripted run ended.

    Attributes:
        key: short identifier (``loop``, ``ping_pong``, ...).
        title: what the scenario shows.
        trace_id: the trace id, 32 hex digits.
        calls: tool calls made.
        verdict: the verdict kind just before the run ended.
        rule: the rule behind that verdict.
        period: the cycle length, when the verdict found one.
        interventions: the actions loopguard asked for, in order (``nudge``, ``stop``).
        stop_rule: the rule of the stop, when the run was stopped.
        cost_usd: model usage cost of the run at the demo's prices.
        status: how the run ended, in words.
        transitions: every verdict kind the run went through, in order (starting with ``working``).
    """

    key: str
    title: str
    trace_id: str
    calls: int
    verdict: str
    rule: str
    period: int | None
    interventions: tuple[str, ...]
    stop_rule: str | None
    cost_usd: float
    status: str
    transitions: tuple[str, ...]


@dataclass(frozen=True)
class DemoResult:
    """Everything the demo produced.

    Attributes:
        scenarios: one result per scenario, in order.
        spans: every finished span of the demo.
        config: the configuration the processor ran with.
    """

    scenarios: tuple[ScenarioResult, ...]
    spans: tuple[ReadableSpan, ...]
    config: LoopGuardConfig = field(repr=False)


class _ReproducibleIds(IdGenerator):
    """Trace and span ids from a reproducible generator, so ``--run N`` reproduces a run exactly."""

    def __init__(self, variant: int) -> None:
        self._random = random.Random(variant)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


class _Clock:
    """Simulated time in ns since the epoch; it moves only when the script advances it."""

    def __init__(self, start_ns: int, rng: random.Random) -> None:
        self.start = self.now = start_ns
        self._rng = rng

    def advance(self, seconds: float) -> int:
        self.now += int(seconds * _NS)
        return self.now

    def jitter(self, low: float, high: float) -> float:
        return round(self._rng.uniform(low, high), 3)

    def offset(self) -> float:
        return (self.now - self.start) / _NS


class _Palette:
    """ANSI colours, or none; verdict and action words use the same colours as ``audit``."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def word(self, text: str) -> str:
        return self._wrap(_COLORS.get(text, "0"), text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def tool(self, text: str) -> str:
        return self._wrap("36", text)

    def error(self, text: str) -> str:
        return self._wrap("31", text)

    def stopped(self, text: str) -> str:
        return self._wrap(_COLORS["stop"], text)


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Run:
    """One scripted agent run: an ``invoke_agent`` root span and its model and tool spans."""

    def __init__(self, demo: _Demo, key: str, title: str, agent: str, task: str) -> None:
        self.demo = demo
        self.key = key
        self.title = title
        self.agent = agent
        clock = demo.clock
        self.root = demo.tracer.start_span(
            f"{n.OP_INVOKE_AGENT} {agent}",
            start_time=clock.now,
            attributes={n.GEN_AI_OPERATION_NAME: n.OP_INVOKE_AGENT, n.GEN_AI_AGENT_NAME: agent},
        )
        self.context = trace.set_span_in_context(self.root)
        self.trace_id = self.root.get_span_context().trace_id
        self.calls = 0
        self.cost = 0.0
        self.pending = Intervention()
        self.last_verdict: tuple[str, str, int | None] = ("working", "none", None)
        self.status = "finished"
        demo.out.write(f"\n{demo.paint.bold(f'[{demo.index}/{demo.total}] {title}')}  "
                       f"{demo.paint.dim(f'{agent} | trace {self.trace_id:032x}')}\n")
        demo.out.write(f"  {demo.paint.dim('task:')} {task}\n")

    # -- spans -------------------------------------------------------------

    def chat(self, input_tokens: int, output_tokens: int, model: str = _SMALL_MODEL) -> None:
        """One model call; a cost stop it triggers ends the run (raises LoopStopped)."""
        clock = self.demo.clock
        start = clock.advance(0.05)
        span = self.demo.tracer.start_span(
            f"chat {model}",
            context=self.context,
            start_time=start,
            attributes={
                n.GEN_AI_OPERATION_NAME: "chat",
                n.GEN_AI_REQUEST_MODEL: model,
                n.GEN_AI_RESPONSE_MODEL: model,
                n.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
                n.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens,
            },
        )
        prices = self.demo.config.prices[model]
        self.cost += (input_tokens * prices.input + output_tokens * prices.output) / 1_000_000
        span.end(end_time=clock.advance(clock.jitter(0.8, 2.4)))
        self._check()

    def tool(
        self,
        name: str,
        args: Mapping[str, Any] | None,
        result: str | None,
        *,
        error: str | None = None,
        gap: float | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """One tool call, judged when its span ends; a stop raises LoopStopped.

        ``args``/``result`` None means the content was not recorded (capture disabled), not empty.
        ``gap`` is the exact pause before the call (a backoff); a small jitter otherwise.
        """
        demo = self.demo
        clock = demo.clock
        start = clock.advance(gap if gap is not None else clock.jitter(0.05, 0.3))
        self.calls += 1
        attrs: dict[str, Any] = {
            n.GEN_AI_OPERATION_NAME: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: name,
            n.GEN_AI_TOOL_CALL_ID: f"call_{demo.rng.getrandbits(48):012x}",
        }
        if args is not None:
            attrs[n.GEN_AI_TOOL_CALL_ARGUMENTS] = json.dumps(dict(args), separators=(",", ":"))
        if result is not None:
            # What the model sees: the tool's result, with a pending nudge appended after the marker.
            attrs[n.GEN_AI_TOOL_CALL_RESULT] = with_nudge(result, self.pending)
        if error is not None:
            attrs[n.ERROR_TYPE] = error
        if attributes:
            attrs.update(attributes)
        span = demo.tracer.start_span(f"{n.OP_EXECUTE_TOOL} {name}", context=self.context, start_time=start,
                                      attributes=attrs)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        end = clock.advance(clock.jitter(0.2, 1.2))
        paint = demo.paint
        shown_args = paint.dim("(arguments not recorded)") if args is None else _short(args, 56)
        if error is not None:
            outcome = paint.error(error)
        elif result is None:
            outcome = paint.dim("(result not recorded)")
        else:
            outcome = _short(result, 40)
        if self.pending.action == "nudge":
            demo.out.write(f"  {'':>8}  {paint.word('nudge')} delivered in this tool result; "
                           f"the scripted model ignores it\n")
        demo.out.write(f"  {paint.dim(f't+{clock.offset():7.1f}s')}  {paint.tool(name)} {shown_args} "
                       f"{paint.dim('->')} {outcome}\n")
        span.end(end_time=end)
        self._check()

    def _check(self) -> None:
        demo = self.demo
        verdict = demo.processor.verdict(self.trace_id)
        if verdict is not None:
            self.last_verdict = (verdict.kind, verdict.rule, verdict.period)
        intervention = demo.processor.check(self.trace_id)
        if intervention.action != "stop":
            self.pending = intervention
        intervention.raise_if_stop()

    # -- ending ------------------------------------------------------------

    def answer(self, text: str) -> None:
        """The model's final answer ends the run."""
        self.chat(1_800, 220)
        self.status = text

    def finish(self) -> ScenarioResult:
        """End the root span and summarise the run."""
        demo = self.demo
        events = demo.events.pop(self.trace_id, [])
        self.root.end(end_time=demo.clock.advance(0.01))
        kind, rule, period = self.last_verdict
        interventions = tuple(e.intervention.action for e in events if e.intervention is not None)
        stops = [e.intervention for e in events if e.intervention is not None and e.intervention.action == "stop"]
        kinds = ["working"] + [e.transition.verdict.kind for e in events if e.transition is not None]
        demo.out.write(f"  {demo.paint.dim('status:')} {self.status}\n")
        demo.clock.advance(5.0)
        return ScenarioResult(
            key=self.key, title=self.title, trace_id=f"{self.trace_id:032x}", calls=self.calls, verdict=kind,
            rule=rule, period=period, interventions=interventions, stop_rule=stops[0].rule if stops else None,
            cost_usd=self.cost, status=self.status, transitions=tuple(kinds),
        )


# -- the scripts ---------------------------------------------------------------


def _same_call_loop(run: _Run) -> None:
    run.chat(2_400, 120)
    run.tool("get_ticket", {"ticket_id": 4182}, '{"subject": "2FA codes rejected", "plan": "pro"}')
    for _ in range(5):
        run.chat(2_900, 90)
        run.tool("search_kb", {"query": "2FA code rejected after phone change"}, "No matching articles.")
    run.answer("the model answered without a stop (unexpected)")


def _ping_pong(run: _Run) -> None:
    for _ in range(3):
        run.chat(3_100, 110)
        run.tool("web_search", {"q": "ACME Corp Q3 2025 revenue"},
                 "1. ACME investor relations - acme.example/ir/q3 ...")
        if run.calls >= 5:
            break
        run.chat(3_600, 90)
        run.tool("read_page", {"url": "https://acme.example/ir/q3"}, "This page has moved. Search for it instead.")
    run.answer("answered from what it had after the nudge: 'Q3 revenue not found'")


def _pagination(run: _Run) -> None:
    pages = 4
    for page in range(1, pages + 1):
        run.chat(2_200 + 400 * page, 80)
        first = 100 + 20 * (page - 1)
        # The same call each time (the API hands out the next page): only the result shows the progress.
        run.tool("list_open_issues", {"repo": "acme/api", "label": "bug"},
                 f"page {page} of {pages}: issues #{first}-#{first + 19}")
    run.answer("summarised 80 open bugs; the same call returned a new page each time: progress, not a loop")


def _rate_limited(run: _Run) -> None:
    run.chat(2_000, 70)
    policy = run.demo.config.retry
    for attempt in range(policy.max_attempts + 1):
        # Backoff as the policy expects: interval * rate**(n-1) before retry n, plus a little slack.
        gap = None if attempt == 0 else (
            policy.interval_seconds * policy.backoff_rate ** (attempt - 1) + run.demo.clock.jitter(0, 0.3))
        run.tool("get_invoice", {"invoice_id": "INV-2291"}, None, error="RateLimitError", gap=gap)
    run.status = "paused: the invoice API still answers 429; the harness retries later"


def _approval_wait(run: _Run) -> None:
    run.chat(2_600, 150)
    run.tool("request_approval", {"change": "deploy api v2.4.1 to production"}, '{"request": "CHG-7731"}')
    deadline = run.demo.clock.now / _NS + 30 * 60
    for _ in range(4):
        run.tool(
            "check_approval", {"request": "CHG-7731"}, '{"status": "pending"}', gap=20.0,
            attributes={n.LOOPGUARD_WAIT_OWNER: "alice@acme.example", n.LOOPGUARD_WAIT_DEADLINE: deadline},
        )
    run.status = "parked: waiting for alice@acme.example to approve CHG-7731 (deadline in 29 min)"


def _unrecorded(run: _Run) -> None:
    run.chat(2_100, 60)
    for _ in range(4):
        run.tool("run_sql", None, None)
    run.answer("finished; loopguard could not tell progress from a loop (content capture is off)")


def _cost_budget(run: _Run) -> None:
    for i, path in enumerate(("src/billing/ledger.py", "src/billing/tax.py", "src/billing/export.py",
                              "src/billing/report.py")):
        run.chat(42_000 + 3_000 * i, 900, model=_LARGE_MODEL)
        run.tool("read_file", {"path": path}, f"# {path}\n... {180 + 40 * i} lines ...")
    run.answer("the model answered without a stop (unexpected)")


_SCENARIOS: tuple[tuple[str, str, str, str, Callable[[_Run], None]], ...] = (
    ("loop", "same-call loop: nudged, then stopped", "support-bot",
     "why are a customer's 2FA codes rejected?", _same_call_loop),
    ("ping_pong", "search/read ping-pong", "research-bot", "find ACME's Q3 revenue", _ping_pong),
    ("pagination", "pagination that makes progress", "triage-bot", "list every open bug", _pagination),
    ("retry", "rate-limited call retried with backoff", "billing-bot", "fetch invoice INV-2291", _rate_limited),
    ("waiting", "approval wait with an owner and a deadline", "deploy-bot", "deploy api v2.4.1", _approval_wait),
    ("uncertain", "repeated calls whose content is not recorded", "ops-bot", "check replication lag",
     _unrecorded),
    ("cost", "a run that exceeds its cost budget", "analyst-bot", "review the billing module", _cost_budget),
)

#: The final verdict (and interventions) each scenario is written to reach.
EXPECTED = {
    "loop": ("stuck", ("nudge", "stop")),
    "ping_pong": ("stuck", ("nudge",)),
    "pagination": ("working", ()),
    "retry": ("retrying", ()),
    "waiting": ("waiting", ()),
    "uncertain": ("uncertain", ()),
    "cost": ("working", ("stop",)),
}


class _Demo:
    def __init__(self, processor: LoopGuardSpanProcessor, tracer: Any, clock: _Clock, rng: random.Random,
                 out: IO[str], paint: _Palette) -> None:
        self.processor = processor
        self.config = processor.config
        self.tracer = tracer
        self.clock = clock
        self.rng = rng
        self.out = out
        self.paint = paint
        self.events: dict[int, list[VerdictEvent]] = {}
        self.index = 0
        self.total = len(_SCENARIOS)

    def on_event(self, event: VerdictEvent) -> None:
        """Listener: print transitions and interventions as the processor decides them."""
        self.events.setdefault(event.trace_id, []).append(event)
        paint = self.paint
        pad = " " * 12
        t = event.transition
        if t is not None:
            v = t.verdict
            # A period is shown only while stuck, as audit and the verdict events do.
            detail = f"rule {v.rule}" + (f", period {v.period}" if v.kind == "stuck" and v.period else "")
            if v.repetitions and v.rule in ("period", "frequency", "retry", "evidence"):
                detail += f", {v.repetitions}x"
            self.out.write(f"{pad}{paint.dim('verdict')} {paint.word(t.previous)} {paint.dim('->')} "
                           f"{paint.word(v.kind)} {paint.dim(f'({detail})')}\n")
        i = event.intervention
        if i is not None:
            self.out.write(f"{pad}{paint.word(i.action)}: {i.message}\n")


def _exporters(environ: Mapping[str, str]) -> tuple[Any, Any, Any] | None:
    """OTLP span, log and metric exporters when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (they read it themselves)."""
    if not environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    return otlp_exporter("traces", environ), otlp_exporter("logs", environ), otlp_exporter("metrics", environ)


def _otlp_providers(resource: Resource, exporters: Any) -> list[Any]:
    """A logger and a meter provider exporting through the OTLP exporters (owned by the demo: it shuts them down)."""
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporters[1]))
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(exporters[2])])
    return [logger_provider, meter_provider]


def _run_scenarios(demo: _Demo, paint: _Palette, variant: int) -> list[ScenarioResult]:
    """Run every scripted scenario in turn, after a title line; a run stopped by loopguard says so in its status."""
    demo.out.write(paint.bold("otel-loopguard demo") + paint.dim(
        f": {len(_SCENARIOS)} scripted agent runs, judged live by LoopGuardSpanProcessor "
        f"(simulated time, variant {variant})") + "\n")
    results: list[ScenarioResult] = []
    for index, (key, title, agent, task, script) in enumerate(_SCENARIOS, 1):
        demo.index = index
        run = _Run(demo, key, title, agent, task)
        try:
            script(run)
        except LoopStopped as stopped:
            rule = getattr(stopped.intervention, "rule", "?")
            run.status = paint.stopped(f"stopped by loopguard ({rule})") + "; the harness caught LoopStopped"
        results.append(run.finish())
    return results


def run_demo(
    *,
    meter_provider: Any = None,
    logger_provider: Any = None,
    out: str | None = None,
    stream: IO[str] | None = None,
    color: bool = False,
    variant: int = 7,
    environ: Mapping[str, str] | None = None,
) -> DemoResult:
    """Run every scenario through a real ``TracerProvider`` with :class:`LoopGuardSpanProcessor`.

    Args:
        meter_provider: receives loopguard's metrics; when None, an OTLP one if
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else the global provider.
        logger_provider: receives the verdict events; chosen like ``meter_provider``.
        out: write every span as OTLP/JSON to this file (JSON Lines when it ends in ``.jsonl``).
        stream: where the timeline and summary go (standard output when None).
        color: use ANSI colours.
        variant: picks the ids and timing jitter: the same variant reproduces a run exactly.
        environ: the environment to read ``OTEL_EXPORTER_OTLP_*`` from (``os.environ`` when None).

    Returns:
        The outcome of every scenario and the finished spans.
    """
    env = os.environ if environ is None else environ
    stream = stream if stream is not None else sys.stdout
    owned: list[Any] = []
    exporters = _exporters(env) if meter_provider is None and logger_provider is None else None
    resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {"service.name": _SERVICE_NAME})
    if exporters is not None:
        logger_provider, meter_provider = owned = _otlp_providers(resource, exporters)

    config = demo_config()
    processor = LoopGuardSpanProcessor(config, logger_provider=logger_provider, meter_provider=meter_provider)
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource, id_generator=_ReproducibleIds(variant))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporters is not None:
        provider.add_span_processor(BatchSpanProcessor(exporters[0]))
    tracer = provider.get_tracer(_SCOPE)

    rng = random.Random(variant)
    # Simulated runs end an hour before now, so exported data lands in the recent past of any backend.
    clock = _Clock((int(time.time()) - 3600) * _NS, rng)
    paint = _Palette(color)
    demo = _Demo(processor, tracer, clock, rng, stream, paint)
    processor.add_listener(demo.on_event)

    try:
        results = _run_scenarios(demo, paint, variant)
    finally:
        provider.shutdown()
        for owner in owned:
            owner.shutdown()
    spans = tuple(memory.get_finished_spans())
    _tell(results, spans, stream, paint, out, env["OTEL_EXPORTER_OTLP_ENDPOINT"] if exporters is not None else None)
    return DemoResult(tuple(results), spans, config)


def _tell(results: list[ScenarioResult], spans: tuple[Any, ...], stream: IO[str], paint: _Palette, out: str | None,
          endpoint: str | None) -> None:
    """The summary, then where the spans were written and where the telemetry was exported, if anywhere."""
    _summary(results, stream, paint)
    if out is not None:
        _write_spans(spans, out)
        stream.write(f"\nwrote {len(spans)} spans to {out}; replay them with: otel-loopguard audit {out}\n"
                     f"(add --config {DEMO_CONFIG_PATH} for the demo's prices, costs and cost stop)\n")
    if endpoint is not None:
        stream.write(f"\nexported spans, verdict events and metrics to {endpoint}\n")
    stream.flush()


def _write_spans(spans: tuple[Any, ...], out: str) -> None:
    """Write the demo's spans to ``--out``; a failure is one error line (a full disk, a file size limit: a checked
    path can still fail to take the data)."""
    try:
        write_otlp_json(spans, out, lines=out.endswith(".jsonl"))
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write: {exc.strerror or exc}") from None


def _summary(results: list[ScenarioResult], out: IO[str], paint: _Palette) -> None:
    headers = ("scenario", "calls", "verdict", "rule/period", "interventions", "cost")
    rows = []
    for r in results:
        rule = r.rule + (f"/{r.period}" if r.verdict == "stuck" and r.period else "")
        actions = ", ".join(r.interventions) + (f" ({r.stop_rule})" if r.stop_rule else "") if r.interventions else "-"
        rows.append((r.title.split(":")[0], str(r.calls), r.verdict, rule, actions, f"${r.cost_usd:.4f}"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    out.write("\n" + paint.bold("summary") + "\n")
    line = "  ".join(h.ljust(w) if i != 1 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    out.write(paint.dim(line.rstrip()) + "\n")
    for row in rows:
        cells = []
        for i, (cell, w) in enumerate(zip(row, widths)):
            padded = cell.rjust(w) if i in (1, 5) else cell.ljust(w)
            if i == 2:
                padded = paint.word(cell) + " " * (w - len(cell))
            elif i == 4 and cell != "-":
                padded = ", ".join(paint.word(a) for a in cell.split(" (")[0].split(", ")) + (
                    " (" + cell.split(" (", 1)[1] if " (" in cell else "") + " " * (w - len(cell))
            cells.append(padded)
        out.write("  ".join(cells).rstrip() + "\n")
