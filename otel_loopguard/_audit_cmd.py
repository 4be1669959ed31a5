"""``otel-loopguard audit``: judge stored traces with the same engine the processor uses."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import IO, Callable, Iterator

from ._audit import audit_trace
from ._config import LoopGuardConfig
from ._engine import LoopEngine
from ._errors import ConfigError, InputError
from ._replay import TraceReport, replay_calls
from ._steps import is_steps_document, load_steps

OtlpAuditor = Callable[[str, LoopGuardConfig, "AuditOptions"], Iterator[TraceReport]]


class AuditOptions:
    """What the command line adds to the configuration for an audit."""

    def __init__(self, at: float | None = None, on_error: Callable[[InputError], None] | None = None) -> None:
        self.at = at
        self.on_error = on_error


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
    replay = replay_calls(LoopEngine(config), steps.calls, observed_at)
    seed = audit_trace(steps.steps, config.max_steps, config.repeat_limit)
    return replay.report(path, None, seed, with_cost=False)


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
    paths: list[str], config: LoopGuardConfig, options: AuditOptions, otlp: OtlpAuditor | None
) -> Iterator[TraceReport | InputError]:
    """Audit every path; an unreadable or invalid file yields its error and the rest go on."""
    for path in paths:
        try:
            if _sniff_steps(path):
                yield audit_steps_file(path, config, options)
            elif otlp is None:
                raise InputError("OTLP input is not supported in this build", source=path)
            else:
                yield from otlp(path, config, options)
        except InputError as exc:
            yield exc


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
    paint = _painter(color)
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


_COLORS = {"stuck": "31", "stop": "31;1", "nudge": "33", "uncertain": "35", "retrying": "36", "waiting": "34",
           "working": "32"}


def _painter(color: bool) -> Callable[[str], str]:
    if not color:
        return lambda text: text
    return lambda text: f"\x1b[{_COLORS.get(text, '0')}m{text}\x1b[0m"


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


def write_error(exc: InputError, err: IO[str] | None = None) -> None:
    """Print an input error as one line (to the current ``sys.stderr`` unless ``err`` is given)."""
    # Looked up at call time: a default bound at import would keep writing to a replaced (maybe closed) stream.
    (err if err is not None else sys.stderr).write(f"otel-loopguard: error: {exc}\n")
