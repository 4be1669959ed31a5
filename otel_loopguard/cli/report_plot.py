"""The picture of ``otel-loopguard report --plot``: each group's figures, or the changes of ``--compare A B``.

Needs matplotlib (the ``plot`` extra, as ``calibrate --plot``); imported only when a picture is asked for, drawn on
a :class:`matplotlib.figure.Figure` without pyplot. Labels come from the input (attribute values): they are escaped
and bounded like every other string the command prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..core.escape import escaped
from ..errors import ConfigError
from .calibrate_plot import save_figure
from .compare import SHARES, Change, quantile

__all__ = ["plot_changes", "plot_groups"]

#: Longest group label drawn (longer values are cut with an ellipsis).
_MAX_LABEL = 40
_CLEAR, _UNCLEAR = "#d62728", "#7f7f7f"


def _label(text: str) -> str:
    return escaped(text, _MAX_LABEL)


def plot_groups(groups: Sequence[Any], attribute: str, path: str) -> None:
    """Draw each group's outcome shares (stacked bars) and its turns and tool calls per task (median, p90).

    Raises:
        ConfigError: no group to draw, or the file cannot be written.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - the optional plot extra

    if not groups:
        raise ConfigError("--plot: no traces to draw")
    fig = Figure(figsize=(13, 5.2), layout="constrained")
    shares, figures = fig.subplots(1, 2)
    names = [_label(g.group) for g in groups]
    bottom = [0.0] * len(groups)
    for label, count, color in (("success", "succeeded", "#2ca02c"), ("error", "errored", "#d62728"),
                                ("refused", "refused", "#9467bd"), ("stopped", "stopped", "#ff7f0e")):
        values = [100 * g.share(getattr(g, count)) for g in groups]
        shares.bar(names, values, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    shares.set_ylabel("tasks, %")
    shares.set_title("task outcomes", fontsize=11)
    shares.legend(fontsize=8)
    width = 0.2
    for i, (label, field, q) in enumerate((("turns p50", "trace_turns", 0.5), ("turns p90", "trace_turns", 0.9),
                                           ("tool calls p50", "trace_calls", 0.5),
                                           ("tool calls p90", "trace_calls", 0.9))):
        xs = [j + (i - 1.5) * width for j in range(len(groups))]
        figures.bar(xs, [_finite(quantile(getattr(g, field), q)) for g in groups], width, label=label)
    figures.set_xticks(range(len(groups)), names)
    figures.set_ylabel("per task")
    figures.set_title("turns and tool calls per task", fontsize=11)
    figures.legend(fontsize=8)
    fig.suptitle(f"otel-loopguard report by {_label(attribute)}", fontsize=12)
    save_figure(fig, path)


def _finite(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def plot_changes(changes: Sequence[Change], a: str, b: str, path: str) -> None:
    """Draw each change from A to B with its 95 % interval, clear changes in red: shares and loop verdicts in
    points per 100 tasks (left), figures per task relative to A (right; left out when A's figure is 0).

    Raises:
        ConfigError: the file cannot be written.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - the optional plot extra

    fig = Figure(figsize=(13, 5.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    shares = {metric for metric, _, _ in SHARES}
    points = [(c.metric, 100 * c.difference, 100 * c.low, 100 * c.high, c.clear) for c in changes
              if c.metric in shares]
    points += [(c.metric, c.difference, c.low, c.high, c.clear) for c in changes if c.metric.startswith("loop")]
    relative = [(c.metric, 100 * c.difference / c.a, 100 * c.low / c.a, 100 * c.high / c.a, c.clear)
                for c in changes if c.metric not in shares and not c.metric.startswith("loop")
                and c.a and not math.isnan(c.difference)]
    _forest(left, points, "B - A, points per 100 tasks", "shares and loop verdicts")
    _forest(right, relative, "(B - A) / A, %", "figures per task")
    fig.suptitle(f"otel-loopguard report --compare: {_label(a)} -> {_label(b)} (95% intervals; red: clear)",
                 fontsize=12)
    save_figure(fig, path)


def _forest(ax: Any, rows: list[tuple[str, float, float, float, bool]], xlabel: str, title: str) -> None:
    """One row per figure: its difference as a dot and its interval as a line, zero as a dashed line."""
    for y, (_, d, low, high, clear) in enumerate(reversed(rows)):
        color = _CLEAR if clear else _UNCLEAR
        ax.plot([low, high], [y, y], color=color, linewidth=2)
        ax.plot([d], [y], "o", color=color)
    ax.set_yticks(range(len(rows)), [name for name, *_ in reversed(rows)])
    ax.axvline(0, color="#333333", linestyle="--", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="x", color="#dddddd", linewidth=0.6)
