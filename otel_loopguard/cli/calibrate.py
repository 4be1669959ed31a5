"""``otel-loopguard calibrate``: choose thresholds from your own incidents, with detection delay and false positives.

Reads labelled stored traces once (every format ``audit`` reads), sweeps a grid of settings over them with the
engine and judge ``audit`` uses (:mod:`otel_loopguard.core.calibrate`), and prints per setting the incidents caught,
the detection delay and the false positives on healthy traces; recommends a setting and writes it as a
configuration file the processor, ``audit`` and ``serve`` load.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import IO, Any

from ..core.calibrate import (
    HEALTHY,
    INCIDENT,
    MAX_SETTINGS,
    Calibration,
    CalibrationTrace,
    Grid,
    Hit,
    SettingResult,
    calibrate,
    config_toml,
    parse_axis_text,
    read_calibrate_table,
)
from ..core.config import LoopGuardConfig, read_config_toml
from ..core.escape import escaped
from ..core.judge import Step
from ..core.steps import load_steps
from ..errors import ConfigError, InputError
from .options import EXIT_ERROR, EXIT_OK, ErrorLine, EscapedLines, StatusLine, expand_paths, json_line

__all__ = ["LabelRules", "read_manifest", "read_traces", "register", "run"]

_EXAMPLES = """examples:
  otel-loopguard calibrate --incidents runs/incidents --healthy runs/healthy
  otel-loopguard calibrate runs/ --label-attribute app.run.label --write loopguard.toml --plot calibrate.png
  otel-loopguard calibrate exports/*.jsonl.gz --manifest labels.csv --grid window=8,12 --grid hysteresis=1,2,3
  otel-loopguard calibrate --incidents bad/ --healthy good/ --grid tools.fetch_page.frequency_limit=3,5 --json

A label says whether the agent was looping in that run: "incident" (it was) or "healthy" (it was not).
Labels come from directories (--incidents, --healthy), a span or resource attribute (--label-attribute), or a
manifest file (--manifest); the manifest wins over the attribute, which wins over the directory.
Manifest: CSV lines "trace_id,label" (a header line "trace_id,label" and # comments allowed), or JSON: an object
{"<trace id>": "<label>"} or a list of {"trace_id": ..., "label": ...}. A steps file (no trace id) is named by
its path or file name.

Grid axes (each --grid replaces one axis of the default grid; the [calibrate] table of --config does the same):
  window, max_period, min_repetitions, frequency_limit, hysteresis, stop_after, max_nudges,
  tools.NAME.min_repetitions, tools.NAME.frequency_limit, tools.NAME.exempt (true,false),
  tools.NAME.wait_seconds (seconds, 0: no wait), tools.NAME.wait_until (result patterns, empty: none)
Default: window=6,10,20 max_period=2,3,4 min_repetitions=2,3,4 frequency_limit=3,4,6 hysteresis=1,2.

Delay: from the loop's first call (the first call of the first cycle a stuck verdict reports, the earliest over
the grid) to the call after which the trace became stuck (or was stopped): calls, seconds, and dollars of model
usage when the configuration has prices.
"""

# Rows of the table shown by default, and traces listed per list in the readable output.
_TOP = 10
_LISTED = 5


def register(commands: Any) -> None:
    """Add the ``calibrate`` command to the parser."""
    cal = commands.add_parser(
        "calibrate",
        help="choose thresholds from labelled incidents and healthy runs (detection delay, false positives)",
        description="Replay labelled stored traces under a grid of settings with the engine audit uses, and "
                    "print per setting the incidents caught, the detection delay and the false stuck verdicts "
                    "and stops on healthy traces; recommend the setting with no false stop that catches the "
                    "most incidents soonest.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument("paths", nargs="*", metavar="PATH",
                     help="trace files or directories, labelled by --label-attribute or --manifest")
    # One path per flag (repeat the flag for more): a list would swallow the unlabelled PATHs after it. No list
    # default: the parser is shared by every call of main, and a default list would be shared with it.
    cal.add_argument("--incidents", action="append", metavar="PATH",
                     help="a file or directory of runs where the agent was looping (repeatable)")
    cal.add_argument("--healthy", action="append", metavar="PATH",
                     help="a file or directory of runs where it was not (repeatable)")
    cal.add_argument("--label-attribute", metavar="NAME",
                     help="span or resource attribute holding each trace's label (earliest span that has it)")
    cal.add_argument("--incident-value", action="append", metavar="VALUE",
                     help="a label value meaning incident (repeatable; default: incident)")
    cal.add_argument("--healthy-value", action="append", metavar="VALUE",
                     help="a label value meaning healthy (repeatable; default: healthy)")
    cal.add_argument("--manifest", metavar="FILE", help="labels by trace id (CSV trace_id,label or JSON)")
    cal.add_argument("--grid", action="append", metavar="AXIS=V1,V2",
                     help="values of one setting to sweep, e.g. window=6,10,20 (repeatable)")
    cal.add_argument("--config", metavar="FILE.toml",
                     help="base configuration (prices, retry, tools...) and its [calibrate] grid table")
    cal.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: each trace's last end)")
    cal.add_argument("--jobs", type=int, metavar="N",
                     help="worker processes for the sweep (default: the CPUs this process may use)")
    cal.add_argument("--top", type=int, default=_TOP, metavar="N",
                     help=f"rows of the table (default {_TOP}; 0: every setting)")
    cal.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    cal.add_argument("--write", metavar="FILE.toml", help="write the recommended setting as a configuration file")
    cal.add_argument("--plot", metavar="FILE.png|svg",
                     help="draw detection delay against false positives per setting (needs the plot extra)")
    cal.set_defaults(handler=run)


# -- labels ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelRules:
    """How label values are read (compared case-insensitively)."""

    incident_values: tuple[str, ...] = (INCIDENT,)
    healthy_values: tuple[str, ...] = (HEALTHY,)

    def label(self, value: Any) -> str | None:
        """:data:`INCIDENT`, :data:`HEALTHY` or None for an attribute or manifest value."""
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            return None
        else:
            text = str(value)
        folded = text.strip().casefold()
        if folded in (v.casefold() for v in self.incident_values):
            return INCIDENT
        if folded in (v.casefold() for v in self.healthy_values):
            return HEALTHY
        return None


def _trace_key(text: str) -> str:
    """A manifest key: a hex trace id as 32 lowercase digits; anything else (a steps file's path) as given."""
    word = text.strip()
    if 0 < len(word) <= 32:
        try:
            return f"{int(word, 16):032x}"
        except ValueError:
            pass
    return word


def read_manifest(path: str, rules: LabelRules) -> dict[str, str]:
    """Labels by trace id (or steps file path) from a CSV or JSON manifest.

    Raises:
        InputError: the file cannot be read or parsed, or a label is neither an incident nor a healthy value.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read manifest: {getattr(exc, 'strerror', None) or exc}", source=path) from None
    entries: list[tuple[str, Any, str]] = []  # (trace id, label, location)
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not valid JSON: {exc}", source=path) from None
        if isinstance(doc, dict):
            entries = [(str(k), v, f"key {k!r}") for k, v in doc.items()]
        elif isinstance(doc, list):
            for i, item in enumerate(doc):
                if not isinstance(item, dict) or "trace_id" not in item or "label" not in item:
                    raise InputError("expected an object with trace_id and label", source=path, location=f"[{i}]")
                entries.append((str(item["trace_id"]), item["label"], f"[{i}]"))
        else:
            raise InputError("expected an object or a list", source=path)
    else:
        for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 2:
                raise InputError("expected trace_id,label", source=path, location=f"line {number}")
            if [c.strip().casefold() for c in row[:2]] == ["trace_id", "label"]:
                continue
            entries.append((row[0], row[1], f"line {number}"))
    labels: dict[str, str] = {}
    for trace_id, value, where in entries:
        label = rules.label(value)
        if label is None:
            wanted = ", ".join((*rules.incident_values, *rules.healthy_values))
            raise InputError(f"label {value!r} is not one of {wanted}", source=path, location=where)
        labels[_trace_key(trace_id)] = label
    return labels


# -- reading ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    """One trace read, before it is labelled."""

    steps: Sequence[Step]
    trace_id: str | None
    source: str
    names: tuple[str, ...]
    dir_labels: frozenset[str]
    attribute: Any
    observed_at: float | None
    last_end: float | None
    max_steps: int | None = None
    in_order: bool = False


@dataclass
class Reading:
    """The traces read, with how they got their labels.

    Attributes:
        traces: every trace, in order of first appearance.
        by_source: labels given by each source: ``directory``, ``attribute``, ``manifest``.
        overridden: traces whose label from a lower source was replaced by a higher one's different label.
        unlabelled_reasons: unlabelled traces per reason.
        unmatched: manifest entries that named no trace read.
        errors: input errors met (each also reported through ``on_error``).
        seconds: time spent reading.
    """

    traces: list[CalibrationTrace]
    by_source: dict[str, int]
    overridden: int
    unlabelled_reasons: dict[str, int]
    unmatched: int
    errors: int
    seconds: float


def _steps_file(path: str, config: LoopGuardConfig, at: float | None, dir_label: str | None) -> _Read:
    """A steps file as one trace, judged in the order given, with its own step budget."""
    doc = load_steps(path)
    budget = doc.max_steps
    if budget is not None:
        try:
            replace(config, max_steps=budget)
        except ConfigError as exc:
            raise InputError(str(exc), source=path) from None
    steps = [Step(span_id=i + 1, start_ns=i, end_ns=i, call=call) for i, call in enumerate(doc.calls)]
    return _Read(steps, None, path, (path, os.path.basename(path)), frozenset((dir_label,) if dir_label else ()),
                 None, at if at is not None else doc.observed_at, None, budget, in_order=True)


def _span_trace(trace: Any, dir_labels: set[str], label_attribute: str | None, at: float | None) -> _Read:
    """A trace of stored spans, as the shared collector assembled it for ``audit``."""
    trace_id = f"{trace.trace_id:032x}"
    end = trace.max_end_ns * 1e-9 if trace.max_end_ns else None
    attributes = trace.attributes
    attribute = attributes.get(label_attribute) if attributes and label_attribute else None
    return _Read(trace.steps, trace_id, trace.source, (trace_id,), frozenset(dir_labels), attribute,
                 at if at is not None else end, end)


def _read_all(labelled_paths: Sequence[tuple[str, str | None]], config: LoopGuardConfig,
              label_attribute: str | None, at: float | None, report: Callable[[InputError], None]) -> list[_Read]:
    """Every trace of every path, in order of first appearance: span traces through ``audit``'s collector."""
    from ..conventions.traces import StepCollector  # noqa: PLC0415 - OTLP reading only when a command runs
    from ..core.engine import LoopEngine  # noqa: PLC0415
    from ..otlp.read import read_spans  # noqa: PLC0415
    from .audit import _sniff_steps  # noqa: PLC0415

    collector = StepCollector(LoopEngine(config), group_by=(label_attribute,) if label_attribute else ())
    files: dict[str, _Read] = {}
    order: list[int | str] = []
    dir_labels: dict[int, set[str]] = {}
    assembled: dict[int, list[Any]] = {}
    for top, dir_label in labelled_paths:
        for path in expand_paths([top]):
            try:
                if _sniff_steps(path):
                    if path not in files:
                        order.append(path)
                    files[path] = _steps_file(path, config, at, dir_label)
                    continue
                spans = _labelled(read_spans(path, on_error=report), dir_label, dir_labels, order)
                released: Iterable[Any] = collector.add_all(spans, path)  # AssembledTrace values
                for early in released:
                    assembled.setdefault(early.trace_id, []).append(early)
            except InputError as exc:
                report(exc)
    finished: list[Any] = collector.finish()
    for trace in finished:
        assembled.setdefault(trace.trace_id, []).append(trace)
    out = []
    for key in order:
        if isinstance(key, str):
            out.append(files[key])
        else:
            out += [_span_trace(t, dir_labels[key], label_attribute, at) for t in assembled.pop(key, ())]
    return out


def _labelled(spans: Any, dir_label: str | None, dir_labels: dict[int, set[str]], order: list[int | str]) -> Any:
    """The spans, noting each trace's first appearance and the directory labels its spans were read under."""
    for span in spans:
        labels = dir_labels.get(span.trace_id)
        if labels is None:
            labels = dir_labels[span.trace_id] = set()
            order.append(span.trace_id)
        if dir_label is not None:
            labels.add(dir_label)
        yield span


class _Labeller:
    """Labels traces (directory, then attribute, then manifest, the later winning) and counts how."""

    def __init__(self, rules: LabelRules, manifest: dict[str, str]) -> None:
        self.rules = rules
        self.manifest = manifest
        self.by_source = {"directory": 0, "attribute": 0, "manifest": 0}
        self.reasons: dict[str, int] = {}
        self.overridden = 0
        self.matched: set[str] = set()

    def __call__(self, read: _Read) -> str | None:
        label: str | None = None
        reason = "no label"
        if len(read.dir_labels) == 1:
            label = next(iter(read.dir_labels))
            self.by_source["directory"] += 1
        elif len(read.dir_labels) > 1:
            reason = "read from both --incidents and --healthy"
        if read.attribute is not None:
            value = self.rules.label(read.attribute)
            if value is not None:
                self.overridden += label is not None and label != value
                label = value
                self.by_source["attribute"] += 1
            elif label is None:
                reason = "label attribute holds another value"
        for name in read.names:
            if name in self.manifest:
                value = self.manifest[name]
                self.overridden += label is not None and label != value
                label = value
                self.by_source["manifest"] += 1
                self.matched.add(name)
                break
        if label is None:
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        return label


def read_traces(labelled_paths: Sequence[tuple[str, str | None]], config: LoopGuardConfig, *,
                label_attribute: str | None = None, manifest: dict[str, str] | None = None,
                rules: LabelRules = LabelRules(), at: float | None = None,
                on_error: Callable[[InputError], None] | None = None) -> Reading:
    """Read every path once into calibration traces, labelled, with the steps ``audit`` judges for each trace.

    Args:
        labelled_paths: (path, directory label or None); directories are walked.
        config: the base configuration (conventions, ``max_argument_bytes``, prices for dollars).
        label_attribute: span or resource attribute holding the label.
        manifest: labels by trace key (:func:`read_manifest`).
        rules: label values.
        at: the observation time of every trace (default: each trace's last span end).
        on_error: called with each :class:`InputError` (a bad file is reported and the rest read).
    """
    started = time.perf_counter()
    errors = 0

    def report(exc: InputError) -> None:
        nonlocal errors
        errors += 1
        if on_error is not None:
            on_error(exc)

    reads = _read_all(labelled_paths, config, label_attribute, at, report)
    manifest = manifest or {}
    labeller = _Labeller(rules, manifest)
    traces = [CalibrationTrace(r.steps, trace_id=r.trace_id, source=r.source, label=labeller(r),
                               observed_at=r.observed_at, prices=config.prices, max_steps=r.max_steps,
                               in_order=r.in_order, last_end=r.last_end) for r in reads]
    return Reading(traces, labeller.by_source, labeller.overridden, labeller.reasons,
                   len(set(manifest) - labeller.matched), errors, time.perf_counter() - started)


# -- the command -----------------------------------------------------------------------------------------------


class _Progress(StatusLine):
    """A one-line count of swept settings on a terminal."""

    def __call__(self, done: int, total: int) -> None:
        if self.due(force=done == total):
            self.draw(f"swept {done} of {total} settings")


def _default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _config_path(args: argparse.Namespace) -> str | None:
    path: str | None = args.config or os.environ.get("LOOPGUARD_CONFIG") or None
    return path


def _base_data(path: str | None) -> dict[str, Any]:
    return {} if path is None else read_config_toml(path)


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard calibrate``; returns the exit status."""
    if not (args.paths or args.incidents or args.healthy):
        raise InputError("no input: give trace files or directories (PATH, --incidents, --healthy)")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs must be a positive integer, got {args.jobs}")
    if args.top < 0:
        raise ConfigError(f"--top must be 0 or more, got {args.top}")
    plot_to = args.plot
    if plot_to is not None:
        from .calibrate_plot import check_plot  # noqa: PLC0415 - matplotlib only when a picture is asked for

        check_plot(plot_to)
    config_path = _config_path(args)
    config = LoopGuardConfig.load(config_path)
    grid = _grid(args, config_path, config)
    rules = LabelRules(tuple(args.incident_value or (INCIDENT,)), tuple(args.healthy_value or (HEALTHY,)))
    manifest = read_manifest(args.manifest, rules) if args.manifest else None

    on_error = ErrorLine()
    inputs: list[tuple[str, str | None]] = [(p, INCIDENT) for p in args.incidents or ()]
    inputs += [(p, HEALTHY) for p in args.healthy or ()]
    inputs += [(p, None) for p in args.paths]
    reading = read_traces(inputs, config, label_attribute=args.label_attribute, manifest=manifest, rules=rules,
                          at=args.at, on_error=on_error)
    labelled = [t for t in reading.traces if t.label is not None]
    if not labelled:
        raise InputError(f"no labelled traces among the {len(reading.traces)} read: label them with --incidents/"
                         f"--healthy, --label-attribute or --manifest")
    jobs = args.jobs if args.jobs is not None else _default_jobs()
    progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
    started = time.perf_counter()
    try:
        result = calibrate(reading.traces, grid, config, jobs=jobs, progress=progress)
    finally:
        if progress is not None:
            progress.clear()
    swept = time.perf_counter() - started
    _warn_unknown_tools(grid, reading)

    written = _write(args.write, result, config_path)
    if plot_to is not None:
        from .calibrate_plot import plot  # noqa: PLC0415

        plot(result, plot_to)

    out: Any = sys.stdout
    if args.json:
        out.write(json_line(_json_doc(result, reading, swept, jobs, written, plot_to)) + "\n")
    else:
        # Tool names, trace names and file names from the input appear all over the text: escape every line.
        out = EscapedLines(out)
        format_calibration(result, reading, out, top=args.top, seconds=swept, jobs=jobs)
        if written:
            out.write(f"wrote the recommended configuration to {written}\n")
        if plot_to:
            out.write(f"drew the picture in {plot_to}\n")
    out.flush()
    return EXIT_ERROR if on_error.failed else EXIT_OK


def _warn_unknown_tools(grid: Any, reading: Reading) -> None:
    """Warn about each tool the grid names that no trace calls (a typo sweeps nothing)."""
    known_tools = {s.call.tool for t in reading.traces for s in t.steps if s.call is not None}
    for tool in grid.tools():
        if tool not in known_tools:
            print(f"otel-loopguard: warning: the grid names tool {escaped(repr(tool))}, which no trace calls",
                  file=sys.stderr)


def _json_doc(result: Calibration, reading: Reading, swept: float, jobs: int, written: str | None,
              plot_to: str | None) -> dict[str, Any]:
    """The ``--json`` document: the calibration, how the traces were labelled, the times and what was written."""
    doc = result.as_dict()
    doc["labels"] = {"by_source": reading.by_source, "overridden": reading.overridden,
                     "unlabelled_reasons": reading.unlabelled_reasons, "manifest_entries_unmatched": reading.unmatched}
    doc["seconds"] = {"read": round(reading.seconds, 3), "sweep": round(swept, 3)}
    doc.update(jobs=jobs, written=written, plot=plot_to)
    return doc


def _grid(args: argparse.Namespace, config_path: str | None, config: LoopGuardConfig) -> Grid:
    """The grid to sweep (the file's [calibrate] table, then --grid), checked before anything is read."""
    file_axes = read_calibrate_table(config_path) if config_path else {}
    cli_axes = dict(parse_axis_text(text) for text in args.grid or ())
    grid = Grid.build(file_axes, cli_axes)
    if grid.combinations > MAX_SETTINGS:
        raise ConfigError(f"the grid has {grid.combinations} combinations; at most {MAX_SETTINGS} are swept")
    valid, refused = grid.settings(config)
    if not valid:
        raise ConfigError(f"no combination of the grid is a valid configuration, e.g. {refused[0][1]}")
    return grid


def _write(path: str | None, result: Calibration, config_path: str | None) -> str | None:
    """Write the recommended setting as a configuration file when asked; returns the path written, if any."""
    if not path or result.recommendation is None:
        return None
    text = config_toml(_base_data(config_path), result.recommendation.setting, _file_header(result, config_path))
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


def _file_header(result: Calibration, config_path: str | None) -> list[str]:
    rec = result.recommendation
    assert rec is not None
    lines = [
        "Written by otel-loopguard calibrate: the recommended setting of "
        f"{len(result.settings)} swept over {rec.incidents} incident(s) and {rec.healthy} healthy trace(s).",
        f"{rec.setting.label()}",
        f"Caught {len(rec.caught)} of {rec.incidents} incidents, "
        f"{_calls(rec.stuck_delay)} after the loop's first call on average; "
        f"{len(rec.false_stops)} false stop(s), {len(rec.false_stuck)} false stuck verdict(s) on healthy traces.",
    ]
    if config_path:
        lines.append(f"The other settings are those of {config_path} (without its [calibrate] table).")
    lines.append("Load it with --config (audit, report, serve), LOOPGUARD_CONFIG or LoopGuardConfig.load().")
    return lines


# -- the readable output ---------------------------------------------------------------------------------------

_SHORT = {"window": "window", "max_period": "period", "min_repetitions": "reps", "frequency_limit": "freq",
          "hysteresis": "hyst", "stop_after": "stop_after", "max_nudges": "nudges"}


def _short(axis: str) -> str:
    if axis.startswith("tools."):
        return axis[len("tools."):]
    return _SHORT.get(axis, axis)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _calls(mean: Any) -> str:
    return "-" if mean is None else f"{float(mean):.1f} calls"


def _delay_cell(r: SettingResult, stop: bool, priced: bool) -> str:
    delays = r.stopped if stop else r.caught
    if not delays:
        return "-"
    summary = r.delay_summary(delays)
    assert summary is not None
    cell = f"{summary['calls_mean']:.1f}"
    if summary["seconds_mean"] is not None:
        cell += f" {summary['seconds_mean']:.1f}s"
    if priced:
        cell += f" ${summary['usd_mean']:.4f}"
    return cell


def _count_cell(count: int, whole: int) -> str:
    return f"{count} {_pct(count, whole)}"


def format_table(result: Calibration, out: IO[str], top: int) -> None:
    """The settings as an aligned table, best first (``top`` rows, 0 for all; the trade-off always shown)."""
    axes = [name for name, _ in result.grid.axes]
    rows = result.results if top == 0 else result.results[:top]
    extra = result.trade_off
    headers = ["rank", *(_short(a) for a in axes), "caught", "delay to stuck", "stopped", "delay to stop",
               "false stuck", "false stops"]

    def row(r: SettingResult) -> list[str]:
        values = r.setting.as_dict()
        mark = "*" if r is result.recommendation else ("+" if r is extra else "")
        return [
            f"{r.rank}{mark}", *(_text(values[a]) for a in axes),
            _count_cell(len(r.caught), r.incidents), _delay_cell(r, False, result.priced),
            _count_cell(len(r.stopped), r.incidents), _delay_cell(r, True, result.priced),
            _count_cell(len(r.false_stuck), r.healthy), _count_cell(len(r.false_stops), r.healthy),
        ]

    table = [row(r) for r in rows]
    if extra is not None and extra not in rows:
        table.append(["..."] + [""] * (len(headers) - 1))
        table.append(row(extra))
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    for line in [headers, *table]:
        out.write("  ".join(c.rjust(w) for c, w in zip(line, widths)).rstrip() + "\n")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _trace_name(trace: CalibrationTrace) -> str:
    return trace.source + (f" trace {trace.trace_id}" if trace.trace_id else "")


def _list(out: IO[str], items: Sequence[str], total: int) -> None:
    for item in items[:_LISTED]:
        out.write(f"    {item}\n")
    if total > _LISTED:
        out.write(f"    ... and {total - _LISTED} more (--json lists them all)\n")


def _describe(result: Calibration, r: SettingResult, out: IO[str]) -> None:
    traces = result.traces
    priced = result.priced
    if r.caught:
        s = r.delay_summary(r.caught)
        assert s is not None
        extra = []
        if s["seconds_mean"] is not None:
            extra.append(f"{s['seconds_mean']:.1f} s")
        if priced:
            extra.append(f"${s['usd_mean']:.4f}")
        more = f" ({', '.join(extra)})" if extra else ""
        out.write(f"  catches {len(r.caught)} of {r.incidents} incidents ({_pct(len(r.caught), r.incidents)}), "
                  f"{s['calls_mean']:.1f} calls{more} after the loop's first call on average "
                  f"(median {s['calls_median']:g}, longest {s['calls_max']})\n")
    else:
        out.write(f"  catches none of the {r.incidents} incidents\n")
    if r.stopped:
        s = r.delay_summary(r.stopped)
        assert s is not None
        saved_calls = sum(x.calls for x in r.saved)
        saved_s = sum(x.seconds for x in r.saved if x.seconds is not None)
        saving = f"{saved_calls} calls, {saved_s:.0f} s" + (f", ${sum(x.usd for x in r.saved):.4f}" if priced else "")
        out.write(f"  stops {len(r.stopped)} ({_pct(len(r.stopped), r.incidents)}) {s['calls_mean']:.1f} calls after "
                  f"it on average; the stops would have saved {saving} of the recorded runs\n")
    if r.missed:
        out.write(f"  misses {len(r.missed)} incident(s):\n")
        _list(out, [_trace_name(traces[i]) for i in r.missed], len(r.missed))
    if r.false_stops:
        out.write(f"  stops {len(r.false_stops)} of {r.healthy} healthy traces ({_pct(len(r.false_stops), r.healthy)})"
                  ":\n")
        _list(out, [f"{_trace_name(traces[h.trace])}: stopped after {_step_name(h)} ({h.tool}, rule {h.rule})"
                    for h in r.false_stops], len(r.false_stops))
    else:
        out.write(f"  no false stop on the {r.healthy} healthy traces\n")
    if r.false_stuck:
        out.write(f"  false stuck verdicts (a nudge, an alert) on {len(r.false_stuck)} of {r.healthy} healthy traces "
                  f"({_pct(len(r.false_stuck), r.healthy)}):\n")
        _list(out, [f"{_trace_name(traces[h.trace])}: stuck after {_step_name(h)} ({h.tool}, rule {h.rule})"
                    for h in r.false_stuck], len(r.false_stuck))
    else:
        out.write("  no false stuck verdict\n")
    if r.budget_stops:
        out.write(f"  {len(r.budget_stops)} trace(s) stopped by the step or cost budget (not counted above)\n")


#: How a hit's step is named by its kind (each kind counts its own steps).
_STEP_NAMES = {"handoff": "hand-off", "agent": "sub-agent call", "model": "model turn"}


def _step_name(hit: Hit) -> str:
    """``call 4``, or ``hand-off 6`` / ``model turn 3`` for a loop of another kind of step."""
    return f"{_STEP_NAMES.get(hit.kind, 'call')} {hit.step}"


def _hints(result: Calibration, rec: SettingResult, out: IO[str]) -> None:
    """Name the tools the recommendation's false positives repeat, with the per-tool grid to sweep for them."""
    hints = result.tool_hints()
    if not hints:
        return
    rec_values = rec.setting.config
    grids = []
    for tool, rule, _ in hints:
        if rule == "frequency":
            low = rec_values.frequency_limit
            grids.append(f"--grid tools.{tool}.frequency_limit={low},{min(2 * low, rec_values.window)}")
        else:
            # A poller caught by the period rule: waiting for it catches a poll that never ends, exempting never.
            grids.append(f"--grid tools.{tool}.exempt=false,true --grid tools.{tool}.wait_seconds=0,"
                         f"{result.wait_hint(tool)}")
    named = ", ".join(f"{tool} ({n} healthy trace{'s' if n > 1 else ''}, rule {rule})" for tool, rule, n in hints)
    out.write(f"\nhint: the false positives above repeat {named}; sweep per-tool settings for them too, e.g. "
              f"{' '.join(grids)}\n")


def format_calibration(result: Calibration, reading: Reading, out: IO[str], *, top: int = _TOP,
                       seconds: float = 0.0, jobs: int = 1) -> None:
    """Print the readable answer: the summary, the table, the recommendation and its trade-off."""
    incidents = sum(1 for t in result.traces if t.label == INCIDENT)
    healthy = len(result.traces) - incidents
    calls = sum(t.calls for t in result.traces)
    out.write(f"otel-loopguard calibrate: {incidents} incident(s) and {healthy} healthy trace(s), {calls} tool calls, "
              f"read once in {reading.seconds:.1f} s; {len(result.settings)} settings swept in {seconds:.1f} s "
              f"({jobs} process{'es' if jobs > 1 else ''})\n")
    labels = ", ".join(f"{n} by {src}" for src, n in reading.by_source.items() if n)
    if labels:
        note = f" ({reading.overridden} replaced a label of a lower source)" if reading.overridden else ""
        out.write(f"labels: {labels}{note}\n")
    if result.skipped:
        out.write(f"{len(result.skipped)} combinations of the grid skipped: the configuration refuses them "
                  f"(e.g. {result.skipped[0][1]})\n")
    if reading.unmatched:
        out.write(f"{reading.unmatched} manifest entries named no trace read\n")
    out.write("\n")
    if not result.results:
        out.write("no valid setting in the grid\n")
        return
    short = [f"{_short(a)} = {a}" for a, _ in result.grid.axes if _short(a) != a]
    format_table(result, out, top)
    out.write("(* recommended, + trade-off; delays: mean calls after the loop's first call, seconds"
              f"{', dollars' if result.priced else ''}; {'; '.join(short)})\n\n")
    rec = result.recommendation
    assert rec is not None
    clean = "" if not rec.false_stops else " (every setting stops some healthy trace: this one the fewest)"
    out.write(f"recommended{clean}: {rec.setting.label()}\n")
    _describe(result, rec, out)
    other = result.trade_off
    if other is not None:
        gain = len(other.caught) - len(rec.caught)
        what = (f"catches {gain} more incident(s)" if gain > 0 else
                f"catches them {float((rec.stuck_delay or 0) - (other.stuck_delay or 0)):.1f} calls sooner")
        out.write(f"\ntrade-off (rank {other.rank}): {other.setting.label()}\n"
                  f"  {what}, at the price of {len(other.false_stops)} false stop(s):\n")
        _describe(result, other, out)
    else:
        out.write("\nno setting catches more incidents or catches them sooner, even with false stops\n")
    _hints(result, rec, out)
    if result.unlabelled:
        unl = result.unlabelled_outcomes
        why = ", ".join(f"{n} {reason}" for reason, n in reading.unlabelled_reasons.items())
        out.write(f"\nunlabelled: {len(result.unlabelled)} trace(s) ({why}), not counted above; under the "
                  f"recommendation {sum(1 for o in unl if o.stuck_step >= 0)} become stuck and "
                  f"{sum(1 for o in unl if o.loop_stop)} are stopped:\n")
        _list(out, [_trace_name(t) for t in result.unlabelled], len(result.unlabelled))
