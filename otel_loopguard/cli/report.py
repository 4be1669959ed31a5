"""``otel-loopguard report``: loop, intervention, error and cost rates of stored traces, per attribute value.

Traces are read and judged exactly as ``audit`` judges them (same readers, same
:class:`TraceEvaluator`); this module only adds the grouping and the counting.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

from ..conventions.span import SpanRecord
from ..conventions.traces import TraceCollector
from ..core.config import LoopGuardConfig
from ..core.engine import LoopEngine
from ..core.escape import escaped
from ..core.judge import TraceReport
from ..core.model import STUCK
from ..core.outcome import ERROR, REFUSED, STOPPED, SUCCESS, TaskOutcome, outcome_of
from ..errors import InputError
from ..otlp.read import DEFAULT_MAX_INPUT_BYTES, STDIN, read_spans
from .compare import compare_groups, format_changes, quantile
from .options import (
    DEFAULT_BUFFER_BYTES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EmptyInput,
    ErrorLine,
    detector_options,
    expand_paths,
    input_options,
    json_line,
    load_config,
)

__all__ = ["NO_GROUP", "GroupStats", "ReportBuilder", "group_reports", "register", "run", "run_report"]

_EXAMPLES = """examples:
  otel-loopguard report traces.jsonl --by app.prompt.version
  otel-loopguard report baseline.jsonl.gz canary.jsonl.gz --by service.version
  otel-loopguard report exports/ --by gen_ai.request.model --json --config loopguard.toml
  otel-loopguard report runs/ --by service.version --compare 1.0 1.1 --plot changes.png

The attribute is looked up on the trace's spans first, then on their resource; traces without it
form the group (none). Cost per trace needs prices in the configuration ([prices."MODEL"]).
"""


def register(commands: Any) -> None:
    """Add the ``report`` command: loop, intervention and error rates per attribute value."""
    report = commands.add_parser(
        "report",
        help="compare loop, nudge, stop and error rates across prompt versions, models or releases",
        description="Judge every trace of stored OTLP files and print, per value of an attribute: traces, tool "
                    "calls per trace, the share of traces that got stuck, were nudged or were stopped, the tool "
                    "call error rate and the cost per trace.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("paths", nargs="+", metavar="PATH", help="OTLP files (JSON, JSON Lines, gzip, protobuf), "
                        "directories of them, or - for standard input")
    report.add_argument("--by", default=DEFAULT_GROUPING, metavar="ATTRIBUTE",
                        help="span or resource attribute to group by, e.g. app.prompt.version "
                             f"(default: {DEFAULT_GROUPING})")
    report.add_argument("--json", action="store_true", help="one JSON object per group per line")
    report.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="compare two values of the attribute: each figure's change from A to B with a 95%% "
                             "interval, clear changes marked")
    report.add_argument("--plot", metavar="FILE.png|svg",
                        help="also draw the groups' outcome shares and figures per task, or with --compare each "
                             "change with its interval (needs the plot extra: pip install 'otel-loopguard[plot]')")
    report.add_argument("--at", type=float, metavar="EPOCH_S", help="observation time (default: each trace's last end)")
    detector_options(report)
    input_options(report)
    report.set_defaults(handler=run)


#: What ``report`` groups by without ``--by``: every OTLP exporter sets it (``unknown_service...`` at worst).
DEFAULT_GROUPING = "service.name"


def run(args: argparse.Namespace) -> int:
    """Run ``otel-loopguard report``; returns the exit status."""
    if args.plot is not None:
        from .calibrate_plot import check_plot  # noqa: PLC0415 - matplotlib only when a picture is asked for

        check_plot(args.plot)
    return run_report(args.paths, args.by, load_config(args), as_json=args.json, at=args.at,
                      max_input_bytes=args.max_input_bytes or None, max_buffer_bytes=args.max_buffer_mb << 20,
                      compare=args.compare, plot_to=args.plot)

#: The group of traces that lack the attribute.
NO_GROUP = "(none)"


@dataclass(frozen=True)
class GroupStats:
    """Totals of one group of traces (each trace is one task).

    Attributes:
        group: the attribute value (as text), or :data:`NO_GROUP`.
        traces: traces in the group.
        tool_calls: tool calls of those traces.
        failed_calls: tool calls that failed.
        stuck: traces that were judged ``stuck`` at some point.
        nudged: traces that got at least one nudge.
        stopped: traces that were stopped (loop, step budget or cost budget): the ``stopped`` outcome.
        cost_usd: priced model usage of the group, or None when no prices are configured.
        unpriced_tokens: tokens of models without a price.
        succeeded: traces whose outcome is ``success``.
        errored: traces whose outcome is ``error`` (an agent or root span ended in error).
        refused: traces whose outcome is ``refused`` (a model refused).
        trace_calls: tool calls of each trace.
        trace_turns: model calls of each trace.
        trace_loops: loop verdicts (changes to ``stuck``) of each trace.
        task_costs: the cost of each trace whose every model call was priced (others have no known cost).
    """

    group: str
    traces: int = 0
    tool_calls: int = 0
    failed_calls: int = 0
    stuck: int = 0
    nudged: int = 0
    stopped: int = 0
    cost_usd: float | None = None
    unpriced_tokens: int = 0
    succeeded: int = 0
    errored: int = 0
    refused: int = 0
    trace_calls: tuple[int, ...] = ()
    trace_turns: tuple[int, ...] = ()
    trace_loops: tuple[int, ...] = ()
    task_costs: tuple[float, ...] = ()

    def share(self, count: int) -> float:
        """``count`` as a share of the group's traces (0 for an empty group)."""
        return count / self.traces if self.traces else 0.0

    @property
    def calls_per_trace(self) -> float:
        """Mean tool calls per trace."""
        return self.share(self.tool_calls)

    @property
    def error_rate(self) -> float:
        """Failed tool calls per tool call."""
        return self.failed_calls / self.tool_calls if self.tool_calls else 0.0

    @property
    def cost_per_trace(self) -> float | None:
        """Mean priced cost per trace, or None without prices."""
        return None if self.cost_usd is None else self.share(self.cost_usd)  # type: ignore[arg-type]

    @property
    def loops_per_100(self) -> float:
        """Loop verdicts per 100 tasks."""
        return self.share(100 * sum(self.trace_loops))

    def as_dict(self, attribute: str) -> dict[str, Any]:
        """The JSON object ``report --json`` prints for this group."""
        out: dict[str, Any] = {
            "attribute": attribute,
            "group": self.group,
            "traces": self.traces,
            "tool_calls": self.tool_calls,
            "tool_calls_per_trace": round(self.calls_per_trace, 6),
            "stuck": self.stuck,
            "stuck_share": round(self.share(self.stuck), 6),
            "nudged": self.nudged,
            "nudged_share": round(self.share(self.nudged), 6),
            "stopped": self.stopped,
            "stopped_share": round(self.share(self.stopped), 6),
            "failed_calls": self.failed_calls,
            "error_rate": round(self.error_rate, 6),
            "success_share": round(self.share(self.succeeded), 6),
            "error_share": round(self.share(self.errored), 6),
            "refused_share": round(self.share(self.refused), 6),
            "loop_verdicts_per_100": round(self.loops_per_100, 6),
        }
        for name, values in (("turns", self.trace_turns), ("tool_calls", self.trace_calls)):
            out[f"{name}_median"], out[f"{name}_p90"] = _rounded(quantile(values, 0.5)), _rounded(quantile(values, 0.9))
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 6)
            out["cost_per_trace_usd"] = round(self.cost_per_trace or 0.0, 6)
            out["unpriced_tokens"] = self.unpriced_tokens
            out["cost_median_usd"] = _rounded(quantile(self.task_costs, 0.5))
            out["cost_p90_usd"] = _rounded(quantile(self.task_costs, 0.9))
        return out


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def _group_key(value: Any) -> str:
    if value is None:
        return NO_GROUP
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return json.dumps(list(value), default=str)
    return str(value)


class ReportBuilder:
    """Adds judged traces to their groups.

    Args:
        attribute: the grouping attribute.
        priced: True when the configuration has prices (cost columns are shown).
    """

    def __init__(self, attribute: str, priced: bool) -> None:
        self.attribute = attribute
        self.priced = priced
        self._groups: dict[str, dict[str, Any]] = {}

    def add(self, report: TraceReport, failed_calls: int | None = None) -> None:
        """Count one trace (its failed calls: ``report.failed_calls`` unless given)."""
        if failed_calls is None:
            failed_calls = report.failed_calls
        key = _group_key(report.attributes.get(self.attribute))
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = {"traces": 0, "tool_calls": 0, "failed_calls": 0, "stuck": 0, "nudged": 0,
                                     "stopped": 0, "cost_usd": 0.0, "unpriced_tokens": 0, "succeeded": 0,
                                     "errored": 0, "refused": 0, "trace_calls": [], "trace_turns": [],
                                     "trace_loops": [], "task_costs": []}
        g["traces"] += 1
        g["tool_calls"] += report.steps_used
        g["failed_calls"] += failed_calls
        loops = sum(1 for t in report.transitions if t.verdict.kind == STUCK)
        g["stuck"] += loops > 0 or report.verdict.kind == STUCK
        actions = {i.action for i in report.interventions}
        g["nudged"] += "nudge" in actions
        g["trace_calls"].append(report.steps_used)
        g["trace_loops"].append(loops)
        task = report.task
        if task is None:  # a report made without the conventions layer: its outcome from the verdicts alone
            task = TaskOutcome(outcome=outcome_of(stopped="stop" in actions, error=False, refused=False))
        g[_COUNTS[task.outcome]] += 1
        g["trace_turns"].append(task.turns)
        if task.cost_usd is not None:
            g["task_costs"].append(task.cost_usd)
        if report.cost is not None:
            g["cost_usd"] += report.cost.usd
            g["unpriced_tokens"] += report.cost.unpriced_tokens

    def groups(self) -> list[GroupStats]:
        """Every group, sorted by value with :data:`NO_GROUP` last."""
        out = []
        for key in sorted(self._groups, key=lambda k: (k == NO_GROUP, k)):
            g: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v
                                 for name, v in self._groups[key].items()}
            if not self.priced:
                g["cost_usd"] = None
            out.append(GroupStats(key, **g))
        return out


#: The ``GroupStats`` count of each outcome.
_COUNTS = {SUCCESS: "succeeded", ERROR: "errored", REFUSED: "refused", STOPPED: "stopped"}


def group_reports(
    spans: Iterable[SpanRecord], attribute: str, config: LoopGuardConfig, source: str,
    builder: ReportBuilder, observed_at: float | None = None,
) -> int:
    """Judge every trace of ``spans`` and add it to ``builder``; returns the number of traces."""
    collector = TraceCollector(LoopEngine(config), group_by=[attribute], observed_at=observed_at)
    count = 0
    for report in [*collector.add_all(spans, source), *collector.finish()]:
        builder.add(report)
        count += 1
    return count


def _percent(part: float) -> str:
    return f"{100 * part:.1f}%"


def _number(value: float, money: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"${value:.4f}" if money else f"{value:.1f}"


def _row(g: GroupStats, priced: bool) -> list[str]:
    """One group's cells: outcome shares, loop shares, tool errors, then figures per task."""
    row = [g.group, str(g.traces), *(_percent(g.share(k)) for k in (g.succeeded, g.errored, g.refused, g.stopped,
                                                                    g.stuck, g.nudged)), _percent(g.error_rate)]
    for values in (g.trace_turns, g.trace_calls):
        row += [_number(quantile(values, 0.5)), _number(quantile(values, 0.9))]
    row.append(_number(g.loops_per_100))
    if priced:
        star = "*" if g.unpriced_tokens else ""
        row += [_number(quantile(g.task_costs, q), money=True) + star for q in (0.5, 0.9)]
    return row


def format_table(groups: list[GroupStats], attribute: str, out: IO[str]) -> None:
    """Print the groups as an aligned table."""
    headers = [escaped(attribute), "tasks", "success", "error", "refused", "stopped", "stuck", "nudged",
               "tool errors", "turns p50", "turns p90", "calls p50", "calls p90", "loops/100"]
    priced = any(g.cost_usd is not None for g in groups)
    if priced:
        headers += ["cost p50", "cost p90"]
    rows = [[escaped(cell) for cell in _row(g, priced)] for g in groups]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for line in [headers, *rows]:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        out.write("  ".join(cells).rstrip() + "\n")
    if priced and any(g.unpriced_tokens for g in groups):
        out.write("* some model usage had no price in the configuration; the cost is of the tasks whose every "
                  "model call was priced\n")


def run_report(paths: list[str], attribute: str, config: LoopGuardConfig, *, as_json: bool = False,
               at: float | None = None, out: IO[str] | None = None,
               max_input_bytes: int | None = DEFAULT_MAX_INPUT_BYTES,
               max_buffer_bytes: int = DEFAULT_BUFFER_BYTES, compare: list[str] | None = None,
               plot_to: str | None = None) -> int:
    """Run ``otel-loopguard report``; returns the exit status (2 when an input could not be read, 130 when
    interrupted)."""
    out = out if out is not None else sys.stdout
    builder = ReportBuilder(attribute, priced=bool(config.prices))
    on_error = ErrorLine()

    # One collector for every file: a trace spread over several files is one trace (see TraceCollector).
    collector = TraceCollector(LoopEngine(config), group_by=[attribute], observed_at=at,
                               max_buffer_bytes=max_buffer_bytes)
    try:
        for path in expand_paths(paths):
            name = "<stdin>" if path == STDIN else path
            empty = EmptyInput(name, on_error)
            try:
                spans = empty.spans(read_spans(path, on_error=empty.on_error, max_bytes=max_input_bytes))
                for report in collector.add_all(spans, name):
                    builder.add(report)
                if empty.error is not None:
                    on_error(empty.error)
            except MemoryError:
                on_error(InputError("out of memory while reading it (try --max-input-bytes or --max-buffer-mb)",
                                    source=name))
        for report in collector.finish():
            builder.add(report)
    except KeyboardInterrupt:
        out.flush()
        sys.stderr.write("otel-loopguard: interrupted\n")
        return EXIT_INTERRUPTED
    groups = builder.groups()
    if compare is not None:
        return _print_comparison(groups, compare, attribute, as_json, out, on_error.failed, plot_to)
    if plot_to is not None:
        from .report_plot import plot_groups  # noqa: PLC0415 - the optional plot extra

        plot_groups(groups, attribute, plot_to)
    if as_json:
        for g in groups:
            out.write(json_line(g.as_dict(attribute)) + "\n")
    elif groups:
        format_table(groups, attribute, out)
    else:
        out.write("no traces found\n")
    out.flush()
    return EXIT_ERROR if on_error.failed else EXIT_OK


def _print_comparison(groups: list[GroupStats], compare: list[str], attribute: str, as_json: bool, out: IO[str],
                      failed: bool, plot_to: str | None = None) -> int:
    """Print ``--compare A B`` (a table, or one JSON object per figure); 2 when a group has no trace."""
    by_name = {g.group: g for g in groups}
    missing = [name for name in compare if name not in by_name]
    if missing:
        sys.stderr.write(f"otel-loopguard: error: report --compare: no trace has {escaped(attribute)} = "
                         f"{escaped(missing[0])} (values seen: {escaped(', '.join(by_name) or 'none')})\n")
        return EXIT_ERROR
    a, b = compare
    changes = compare_groups(by_name[a], by_name[b])
    if plot_to is not None:
        from .report_plot import plot_changes  # noqa: PLC0415 - the optional plot extra

        plot_changes(changes, a, b, plot_to)
    if as_json:
        for change in changes:
            out.write(json.dumps({"attribute": attribute, "a": a, "b": b, **change.as_dict()}) + "\n")
    else:
        format_changes(changes, escaped(a), escaped(b), out)
    out.flush()
    return EXIT_ERROR if failed else EXIT_OK
