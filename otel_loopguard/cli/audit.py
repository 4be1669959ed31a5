"""``otel-loopguard audit``: judge stored traces with the same engine the processor uses."""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.escape import escaped
from ..core.judge import TraceReport, replay_calls
from ..core.model import VERDICT_KINDS
from ..core.steps import is_steps_document, load_steps, parse_steps
from ..errors import ConfigError, InputError
from ..otlp.read import DEFAULT_MAX_INPUT_BYTES, STDIN, Input, InputTooLarge, read_spans
from .options import (
    DEFAULT_BUFFER_BYTES,
    EXIT_ERROR,
    EXIT_FOUND,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EmptyInput,
    ErrorLine,
    StatusLine,
    detector_options,
    encodable_writer,
    input_options,
    json_line,
    load_config,
    painter,
)

# The example traces shipped in the wheel, found from the installed package (not from a checkout).
_EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"

_EXAMPLES = """examples:
  otel-loopguard audit --example stuck-search           a trace shipped with the package (exit 1: it is stuck)
  otel-loopguard audit trace.json
  otel-loopguard audit traces.jsonl.gz --json --fail-on stuck
  otel-loopguard audit export.pb --config loopguard.toml --at 1767225600
"""


def register(commands: Any) -> None:
    """Add the ``audit`` command to the parser."""
    audit = commands.add_parser(
        "audit",
        help="judge stored traces (steps files, OTLP/JSON, JSON Lines, gzip, OTLP/protobuf)",
        description="Replay stored traces through the loop engine and report verdicts, transitions and interventions.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("files", nargs="*", metavar="FILE", help="trace files to judge (- for standard input)")
    audit.add_argument("--example", choices=example_names(), metavar="NAME",
                       help=f"also judge a trace shipped with the package ({', '.join(example_names())})")
    detector_options(audit)
    input_options(audit)
    audit.add_argument("--json", action="store_true", help="one JSON object per trace per line")
    audit.add_argument("--fail-on", choices=VERDICT_KINDS, default="stuck",
                       help="exit 1 when a trace reached this verdict (default: stuck)")
    audit.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: the trace's last end)")
    audit.set_defaults(handler=run)


def example_names() -> list[str]:
    """The example traces shipped in the package (``otel_loopguard/examples/*.json``), by name without ``.json``."""
    return sorted(path.name[:-5] for path in _EXAMPLES_DIR.iterdir() if path.name.endswith(".json"))


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard audit``; returns the exit status."""
    if args.example:
        args.files = [*args.files, str(_EXAMPLES_DIR / f"{args.example}.json")]
    if not args.files:
        raise InputError("audit: name a trace FILE, - for standard input, or --example stuck-search")
    config = load_config(args)
    status = EXIT_OK
    on_error = ErrorLine()
    options = AuditOptions(at=args.at, on_error=on_error, max_buffer_bytes=args.max_buffer_mb << 20,
                           max_input_bytes=args.max_input_bytes or None)
    color = sys.stdout.isatty() and not args.json
    write = encodable_writer(sys.stdout)
    progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
    # The cyclic garbage collector stays paused for the whole command, not only while traces are collected and
    # judged (see TraceCollector): re-enabled in between, its first pass walked every object held so far, once
    # after the input was read and once after the traces were judged.
    paused = gc.isenabled()
    gc.disable()
    try:
        for item in audit_paths(args.files, config, options):
            if isinstance(item, InputError):
                if progress:
                    progress.clear()
                on_error(item)
                continue
            if progress:
                progress.tick(item.source)
            # One write per report, of whole lines: an interruption never leaves half a line.
            write(report_json(item) + "\n" if args.json else format_report(item, color))
            reached = item.verdict.kind == args.fail_on or any(t.verdict.kind == args.fail_on
                                                               for t in item.transitions)
            if reached:
                status = EXIT_FOUND
    except KeyboardInterrupt:
        if progress:
            progress.clear()
        sys.stdout.flush()
        sys.stderr.write("otel-loopguard: interrupted\n")
        return EXIT_INTERRUPTED
    finally:
        if paused:
            gc.enable()
    sys.stdout.flush()
    if progress:
        progress.clear()
    return EXIT_ERROR if on_error.failed else status


class _Progress(StatusLine):
    """A one-line count of audited traces on a terminal."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self._traces = 0

    def tick(self, source: str) -> None:
        self._traces += 1
        if self.due():
            self.draw(f"audited {self._traces} trace(s); reading {source}")


class AuditOptions:
    """What the command line adds to the configuration for an audit.

    Args:
        at: the observation time of every trace (default: each trace's last span end).
        on_error: called with each input error (the default raises it).
        max_buffer_bytes: what the traces held until the input ends may take, at most (estimated bytes).
        max_input_bytes: the most bytes read from one input, after decompression (None: no cap).
    """

    def __init__(self, at: float | None = None, on_error: Callable[[InputError], None] | None = None,
                 max_buffer_bytes: int = DEFAULT_BUFFER_BYTES,
                 max_input_bytes: int | None = DEFAULT_MAX_INPUT_BYTES) -> None:
        self.at = at
        self.on_error = on_error
        self.max_buffer_bytes = max_buffer_bytes
        self.max_input_bytes = max_input_bytes


def audit_steps_file(path: str | Input, config: LoopGuardConfig, options: AuditOptions) -> TraceReport:
    """Audit one steps file; the file's max_steps/repeat_limit override the configuration's.

    Args:
        path: the file, or an :class:`~otel_loopguard.otlp.read.Input` already opened (and sniffed).
    """
    if isinstance(path, Input):
        steps = parse_steps(_steps_document(path), path.name)
        source = path.name
    else:
        steps = load_steps(path)
        source = path
    if steps.max_steps is not None or steps.repeat_limit is not None:
        try:
            config = replace(
                config,
                max_steps=steps.max_steps if steps.max_steps is not None else config.max_steps,
                repeat_limit=steps.repeat_limit if steps.repeat_limit is not None else config.repeat_limit,
            )
        except ConfigError as exc:
            # A value the file may hold but the configuration refuses (0): name the file, not just the setting.
            raise InputError(str(exc), source=source) from None
    observed_at = options.at if options.at is not None else steps.observed_at
    # A steps file is judged in its own order (its times may be absent).
    judge = replay_calls(LoopEngine(config), steps.calls, observed_at)
    return judge.report(source, None, with_cost=False)


def _steps_document(opened: Input) -> Any:
    try:
        # Strict UTF-8 (json.loads of bytes would let lone surrogates through).
        return json.loads(opened.stream.read().decode("utf-8"))
    except InputTooLarge as exc:
        raise exc.input_error(opened.name) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not valid JSON: {exc}", source=opened.name) from None


# The top-level keys of a steps document (an OTLP request's first key is resourceSpans or resource_spans).
_STEPS_KEYS = frozenset({"steps", "observed_at", "max_steps", "repeat_limit"})
_FIRST_KEY = re.compile(rb'\{\s*"([A-Za-z_]{1,32})"\s*:')


def looks_like_steps(head: bytes, complete: bool) -> bool:
    """Whether content starting with ``head`` is a steps document rather than OTLP (``head``: at most 64 KB).

    A list is a steps file. An object is one when it is the whole content and has ``steps`` (parsed: exactly),
    or, when the content is longer than ``head``, when its first key is one of a steps document's.
    """
    stripped = head.lstrip()
    if stripped[:1] == b"[":
        return True
    if stripped[:1] != b"{":
        return False
    if complete:
        try:
            return is_steps_document(json.loads(head))
        except (ValueError, RecursionError):
            return False  # maybe JSON Lines; the OTLP reader reports what is wrong
    if head[: len(head) - len(stripped)].strip(b" \t\n\r"):
        return False  # whitespace JSON does not allow (form feed, vertical tab) before the value
    match = _FIRST_KEY.match(stripped)
    return match is not None and match.group(1).decode() in _STEPS_KEYS


def _sniff_steps(path: str) -> bool:
    """True when ``path`` holds a steps document (looking at its first 64 KB at most)."""
    try:
        with Input(path) as opened:
            return not opened.gzipped and looks_like_steps(opened.head, opened.complete)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=path) from None


def audit_paths(
    paths: list[str], config: LoopGuardConfig, options: AuditOptions
) -> Iterator[TraceReport | InputError]:
    """Audit every path (``-``: standard input); an unreadable, invalid or oversized file yields its error and
    the rest go on.

    A steps file is reported as soon as it is read. The traces of OTLP files are held until every file is read
    (a trace may be spread over several files), then reported once each: see
    :class:`~otel_loopguard.conventions.traces.TraceCollector` for the release rule.
    """
    collector = None
    for path in paths:
        name = "<stdin>" if path == STDIN else path
        try:
            with Input(path, options.max_input_bytes) as opened:
                if not opened.gzipped and looks_like_steps(opened.head, opened.complete):
                    yield audit_steps_file(opened, config, options)
                    continue
                if collector is None:
                    from ..conventions.traces import TraceCollector  # noqa: PLC0415 - only for OTLP input

                    collector = TraceCollector(LoopEngine(config), observed_at=options.at,
                                               max_buffer_bytes=options.max_buffer_bytes)
                empty = EmptyInput(name, options.on_error)
                yield from collector.add_all(
                    empty.spans(read_spans(opened, on_error=empty.on_error, max_bytes=options.max_input_bytes)), name)
                if empty.error is not None:
                    yield empty.error
        except InputError as exc:
            yield exc
        except MemoryError:
            yield InputError("out of memory while reading it (try --max-input-bytes or --max-buffer-mb)",
                             source=name)
        except InputTooLarge as exc:
            yield exc.input_error(name)
        except OSError as exc:
            yield InputError(f"cannot read: {exc.strerror or exc}", source=name)
    if collector is not None:
        yield from collector.finish()


# Worst first: the verdict a headline names besides the final one.
_SEVERITY = {"stuck": 4, "uncertain": 3, "retrying": 2, "waiting": 1, "working": 0}
_BUDGETS = {"step_limit": "step budget", "cost_limit": "cost budget"}


def _calls(first: int, last: int) -> str:
    return f"call {first}" if first == last else f"calls {first}-{last}"


def _episodes(report: TraceReport, kind: str) -> list[tuple[int, int]]:
    """The stretches of calls (numbered from 1) during which the trace's verdict was ``kind``."""
    out = []
    start: int | None = None
    for t in report.transitions:
        if t.verdict.kind == kind and start is None:
            start = t.step + 1
        elif t.verdict.kind != kind and start is not None:
            # The transition after call t.step + 1 left the verdict: the stretch ended with the call before it.
            out.append((start, max(start, t.step)))
            start = None
    if start is not None:
        out.append((start, max(start, report.steps_used)))
    return out


def headline(report: TraceReport) -> str:
    """The final verdict, then the worst verdict reached with where, and the nudges and stops.

    E.g. ``working after 8 tool calls; stuck at calls 3-5, nudged at call 3, stopped at call 5``.
    """
    v = report.verdict
    detail = "" if v.rule == "none" else f" ({_rules(report)}" + (f", period {report.stuck_period}"
                                                                  if report.stuck_period else "") + ")"
    calls = report.steps_used
    text = f"{v.kind}{detail} after {calls} tool call{'' if calls == 1 else 's'}"
    parts = []
    reached = {t.verdict.kind for t in report.transitions} - {"working"}
    if reached:
        worst = max(reached, key=_SEVERITY.__getitem__)
        parts.append(f"{worst} at " + " and ".join(_calls(a, b).removeprefix("call ").removeprefix("calls ")
                                                   if i else _calls(a, b)
                                                   for i, (a, b) in enumerate(_episodes(report, worst))))
    for action, word in (("nudge", "nudged"), ("stop", "stopped")):
        steps = [i for i in report.interventions if i.action == action]
        if steps:
            where = ", ".join(str(i.step + 1) for i in steps)
            reason = f" ({_BUDGETS[steps[0].rule]})" if action == "stop" and steps[0].rule in _BUDGETS else ""
            parts.append(f"{word} at call{'s' if len(steps) > 1 else ''} {where}{reason}")
    if report.partial:
        parts.append("partial: a memory bound released it before the input ended")
    return text + ("; " + ", ".join(parts) if parts else "")


def _rules(report: TraceReport) -> str:
    """``rule period``, or ``rules frequency then period`` when the final verdict's kind was first reached by
    another rule (as the timeline shows it): the headline and the timeline use the same words."""
    v = report.verdict
    rules = [t.verdict.rule for t in report.transitions if t.verdict.kind == v.kind]
    ordered = list(dict.fromkeys([*rules[-1:], v.rule]))
    return f"rule {v.rule}" if len(ordered) == 1 else f"rules {' then '.join(ordered)}"


def _step_audit_text(report: TraceReport) -> str:
    """The step audit in words. Identical consecutive calls that the verdict explained as progress (a paginating
    trace, working by rule progress) are said to be so, not shown as a failure (``--json`` keeps the raw
    ``ok`` and ``violations``)."""
    if report.ok:
        return "ok"
    progress = report.verdict.kind == "working" and report.verdict.rule == "progress"
    problems, explained = [], []
    for violation in report.violations:
        kind, _, rest = violation.partition(":")
        if kind == "step_limit":
            problems.append(f"{rest} tool calls, over the step limit")
        elif kind == "repeat_loop":
            signature, _, index = rest.rpartition("@")
            start = int(index) + 1 if index.isdigit() else index
            if progress:
                explained.append(f"identical consecutive calls from call {start} made progress")
            else:
                problems.append(f"identical consecutive calls from call {start}: {signature}")
        else:
            problems.append(violation)
    if not problems:
        return f"ok ({'; '.join(explained)})"
    return "; ".join(problems + explained)


def format_report(report: TraceReport, color: bool = False) -> str:
    """The readable form of one trace's report: whole lines, control characters from span data escaped.

    The headline gives the final verdict, the worst one reached and where; then the cost, the step audit (the
    step limit and identical consecutive calls) and one timeline of verdict changes and interventions, each at
    its call, numbered from 1 as ``loopguard.steps`` counts them.
    """
    paint = painter(color)
    name = escaped(report.source + (f" trace {report.trace_id}" if report.trace_id else ""))
    head = headline(report)
    kind = report.verdict.kind
    lines = [f"{name}: {paint(kind)}{head[len(kind):]}"]
    cost = report.cost
    if cost is not None:
        unpriced = ""
        if cost.unpriced_tokens:
            models = escaped(", ".join(sorted(cost.unpriced_models)))
            unpriced = f"{cost.unpriced_tokens} tokens of models without a price ({models})"
        if cost.unpriced_tokens and not cost.usd:
            lines.append(f"  cost: unknown: {unpriced}")
        else:
            lines.append(f"  cost: ${cost.usd:.4f}" + (f", plus {unpriced}" if unpriced else ""))
    lines.append(f"  step audit: {escaped(_step_audit_text(report))}")
    timeline: list[tuple[int, int, str]] = []
    for t in report.transitions:
        period = f", period {t.verdict.period}" if t.verdict.kind == "stuck" and t.verdict.period else ""
        timeline.append((t.step, 0, f"  call {t.step + 1}: {t.previous} -> {paint(t.verdict.kind)} "
                                    f"(rule {t.verdict.rule}{period})"))
    for i in report.interventions:
        timeline.append((i.step, 1, f"  call {i.step + 1}: {paint(i.action)}: {escaped(i.message)}"))
    timeline.sort(key=lambda item: item[:2])
    lines.extend(text for _, _, text in timeline)
    # Why spans that look like an agent's could not be read (keys and documentation page; no attribute values).
    lines.extend(f"  unread: {escaped(unread['message'])}" for unread in report.unread)
    return "\n".join(lines) + "\n"


def report_json(report: TraceReport) -> str:
    """One line of ``audit --json`` output (``json.dumps(report.as_dict())``: ASCII, so any byte is escaped)."""
    return json_line(report.as_dict())
