"""``otel-loopguard audit``: judge stored traces with the same engine the processor uses."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import IO, Any

from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.judge import TraceReport, replay_calls
from ..core.model import VERDICT_KINDS
from ..core.steps import is_steps_document, load_steps
from ..errors import ConfigError, InputError
from .options import EXIT_ERROR, EXIT_FOUND, EXIT_OK, detector_options, load_config, painter, write_error

_EXAMPLES = """examples:
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
    audit.add_argument("files", nargs="+", metavar="FILE", help="trace files to judge")
    detector_options(audit)
    audit.add_argument("--json", action="store_true", help="one JSON object per trace per line")
    audit.add_argument("--fail-on", choices=VERDICT_KINDS, default="stuck",
                       help="exit 1 when a trace reached this verdict (default: stuck)")
    audit.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: the trace's last end)")
    audit.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard audit``; returns the exit status."""
    config = load_config(args)
    failed = False
    status = EXIT_OK

    def on_error(exc: InputError) -> None:
        nonlocal failed
        failed = True
        write_error(exc)

    options = AuditOptions(at=args.at, on_error=on_error)
    color = sys.stdout.isatty() and not args.json
    progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
    for item in audit_paths(args.files, config, options):
        if isinstance(item, InputError):
            if progress:
                progress.clear()
            on_error(item)
            continue
        if progress:
            progress.tick(item.source)
        if args.json:
            print(report_json(item), flush=False)
        else:
            format_report(item, sys.stdout, color)
        reached = item.verdict.kind == args.fail_on or any(t.verdict.kind == args.fail_on for t in item.transitions)
        if reached:
            status = EXIT_FOUND
    sys.stdout.flush()
    if progress:
        progress.clear()
    return EXIT_ERROR if failed else status


class _Progress:
    """A one-line count of audited traces on a terminal, redrawn at most five times a second."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._traces = 0
        self._drawn = 0.0
        self._shown = False

    def tick(self, source: str) -> None:
        self._traces += 1
        now = time.monotonic()
        if now - self._drawn >= 0.2:
            self._drawn = now
            self._stream.write(f"\r\x1b[Kaudited {self._traces} trace(s); reading {source}")
            self._stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False


class AuditOptions:
    """What the command line adds to the configuration for an audit.

    Args:
        at: the observation time of every trace (default: each trace's last span end).
        on_error: called with each input error (the default raises it).
        max_buffer_bytes: what the traces held until the input ends may take, at most (estimated bytes).
    """

    def __init__(self, at: float | None = None, on_error: Callable[[InputError], None] | None = None,
                 max_buffer_bytes: int = 1 << 30) -> None:
        self.at = at
        self.on_error = on_error
        self.max_buffer_bytes = max_buffer_bytes


def audit_steps_file(path: str, config: LoopGuardConfig, options: AuditOptions) -> TraceReport:
    """Audit one steps file; the file's max_steps/repeat_limit override the configuration's."""
    steps = load_steps(path)
    if steps.max_steps is not None or steps.repeat_limit is not None:
        try:
            config = replace(
                config,
                max_steps=steps.max_steps if steps.max_steps is not None else config.max_steps,
                repeat_limit=steps.repeat_limit if steps.repeat_limit is not None else config.repeat_limit,
            )
        except ConfigError as exc:
            # A value the file may hold but the configuration refuses (0): name the file, not just the setting.
            raise InputError(str(exc), source=path) from None
    observed_at = options.at if options.at is not None else steps.observed_at
    # A steps file is judged in its own order (its times may be absent).
    judge = replay_calls(LoopEngine(config), steps.calls, observed_at)
    return judge.report(path, None, with_cost=False)


_JSON_WHITESPACE = b" \t\n\r"
_CHUNK = 1 << 16


def _sniff_steps(path: str) -> bool:
    """True when ``path`` holds a steps document (cheap: only small plain-JSON files are candidates).

    A file whose first line is a whole JSON value followed by more values (JSON Lines, the usual shape of
    large exports) cannot be one JSON document, so it is told apart without reading the rest of the file.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            if head[:2] == b"\x1f\x8b":
                return False
            fh.seek(0)
            prefix_is_json_space = True
            line = fh.readline()
            while line and not line.strip():
                prefix_is_json_space = prefix_is_json_space and not line.strip(_JSON_WHITESPACE)
                line = fh.readline()
            stripped = line.lstrip()
            if stripped[:1] == b"[":
                return True
            if stripped[:1] != b"{":
                return False
            if not prefix_is_json_space:
                return False  # whitespace JSON does not allow (form feed, vertical tab) before the value
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                doc = None  # maybe a document over several lines: parse the whole file below
            if doc is not None:
                while True:
                    chunk = fh.read(_CHUNK)
                    if not chunk:
                        return is_steps_document(doc)
                    if chunk.strip(_JSON_WHITESPACE):
                        return False  # a second value: not one JSON document
            fh.seek(0)
            text = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=path) from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return False  # maybe JSON Lines; the OTLP reader reports what is wrong
    return is_steps_document(doc)


def audit_paths(
    paths: list[str], config: LoopGuardConfig, options: AuditOptions
) -> Iterator[TraceReport | InputError]:
    """Audit every path; an unreadable or invalid file yields its error and the rest go on.

    A steps file is reported as soon as it is read. The traces of OTLP files are held until every file is read
    (a trace may be spread over several files), then reported once each: see
    :class:`~otel_loopguard.conventions.traces.TraceCollector` for the release rule.
    """
    collector = None
    for path in paths:
        try:
            if _sniff_steps(path):
                yield audit_steps_file(path, config, options)
                continue
            if collector is None:
                from ..conventions.traces import TraceCollector  # noqa: PLC0415 - only for OTLP input

                collector = TraceCollector(LoopEngine(config), observed_at=options.at,
                                           max_buffer_bytes=options.max_buffer_bytes)
            from ..otlp.read import read_spans  # noqa: PLC0415

            yield from collector.add_all(read_spans(path, on_error=options.on_error), path)
        except InputError as exc:
            yield exc
    if collector is not None:
        yield from collector.finish()


def _escaping_writer(out: IO[str]) -> Callable[[str], object]:
    """``out.write`` that backslash-escapes what ``out`` cannot encode instead of raising half-way through."""
    encoding = getattr(out, "encoding", None)
    if not encoding:
        return out.write
    # Tool names may hold lone surrogates (JSON "\\ud800" escapes) and file names undecodable bytes; a terminal
    # may not show every character.
    return lambda text: out.write(text.encode(encoding, "backslashreplace").decode(encoding))


def format_report(report: TraceReport, out: IO[str], color: bool = False) -> None:
    """Print the readable form of one trace's report."""
    write = _escaping_writer(out)
    v = report.verdict
    name = report.source + (f" trace {report.trace_id}" if report.trace_id else "")
    detail = f" (rule {v.rule}" + (f", period {v.period}" if v.period else "") + ")"
    paint = painter(color)
    write(f"{name}: {paint(v.kind)}{detail} after {report.steps_used} tool call(s)\n")
    if report.cost is not None:
        extra = f", {report.cost.unpriced_tokens} unpriced tokens" if report.cost.unpriced_tokens else ""
        write(f"  cost: ${report.cost.usd:.4f}{extra}\n")
    write(f"  seed-000 audit: {'ok' if report.ok else 'violations: ' + ', '.join(report.violations)}\n")
    for t in report.transitions:
        period = f", period {t.verdict.period}" if t.verdict.period else ""
        write(f"  after call {t.step}: {t.previous} -> {paint(t.verdict.kind)} (rule {t.verdict.rule}{period})\n")
    for i in report.interventions:
        write(f"  after call {i.step}: {paint(i.action)}: {i.message}\n")
    for unread in report.unread:
        write(f"  unread: {unread['message']}\n")


if c_make_encoder is not None:
    # json.dumps builds a C encoder on every call, which costs more than encoding one report; this is the encoder
    # it builds with its default options (", " and ": ", ASCII escapes), made once. Without the circular-reference
    # check: a report's dict is built fresh from values and cannot contain itself.
    _encode_report = c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, None, ": ", ", ",
                                    False, False, True)

    def report_json(report: TraceReport) -> str:
        """One line of ``audit --json`` output (exactly ``json.dumps(report.as_dict())``)."""
        return "".join(_encode_report(report.as_dict(), 0))

else:  # pragma: no cover - interpreters without the C accelerator

    def report_json(report: TraceReport) -> str:
        """One line of ``audit --json`` output."""
        return json.dumps(report.as_dict())
