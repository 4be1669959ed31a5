"""The picture of ``otel-loopguard calibrate --plot``: detection delay against false positives, one point per setting.

Needs matplotlib (``pip install 'otel-loopguard[plot]'``); imported only when a picture is asked for. Drawn on a
:class:`matplotlib.figure.Figure` without pyplot, so no global backend is chosen for the caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..core.calibrate import Calibration, SettingResult
from ..errors import ConfigError

__all__ = ["FORMATS", "check_plot", "plot", "save_figure"]

#: Picture formats by file extension.
FORMATS = {".png": "png", ".svg": "svg"}
_INSTALL = "pip install 'otel-loopguard[plot]'"


def check_plot(path: str) -> None:
    """Fail early, before the sweep, when the picture cannot be drawn.

    Raises:
        ConfigError: the extension is not .png or .svg, or matplotlib is not installed.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ConfigError(f"--plot {path}: the file name must end in .png or .svg")
    try:
        import matplotlib  # noqa: F401, PLC0415 - the optional plot extra
    except ImportError:
        raise ConfigError(f"--plot needs matplotlib, which is not installed: {_INSTALL}") from None


_SHORT = {"window": "window", "max_period": "period", "min_repetitions": "reps", "frequency_limit": "freq",
          "hysteresis": "hyst", "stop_after": "stop_after", "max_nudges": "nudges"}


def _label(r: SettingResult) -> str:
    parts = []
    for name, value in r.setting.values:
        short = name[len("tools."):] if name.startswith("tools.") else _SHORT.get(name, name)
        parts.append(f"{short} {str(value).lower()}")
    # Three settings a line keeps the note narrow.
    return "\n".join(", ".join(parts[i:i + 3]) for i in range(0, len(parts), 3))


def _points(results: Sequence[SettingResult], x_of: Callable[[SettingResult], float],
            y_of: Callable[[SettingResult], float | None],
            c_of: Callable[[SettingResult], float]) -> dict[tuple[float, float, float], int]:
    """Settings drawn at the same place are one point, sized by how many they are."""
    points: dict[tuple[float, float, float], int] = {}
    for r in results:
        y = y_of(r)
        if y is None:
            continue
        key = (round(x_of(r), 6), round(y, 6), round(c_of(r), 6))
        points[key] = points.get(key, 0) + 1
    return points


def _size(count: int) -> float:
    return 30.0 + 18.0 * min(count, 20)


def _panel(ax: Any, result: Calibration, *, stop: bool, cmap: Any, norm: Any) -> Any:
    results = result.results

    def x_of(r: SettingResult) -> float:
        hits = r.false_stops if stop else r.false_stuck
        return 100.0 * len(hits) / r.healthy if r.healthy else 0.0

    def y_of(r: SettingResult) -> float | None:
        mean = r.stop_delay if stop else r.stuck_delay
        return None if mean is None else float(mean)

    def c_of(r: SettingResult) -> float:
        count = len(r.stopped) if stop else len(r.caught)
        return 100.0 * count / r.incidents if r.incidents else 0.0

    points = _points(results, x_of, y_of, c_of)
    scatter = None
    if points:
        scatter = ax.scatter([p[0] for p in points], [p[1] for p in points], c=[p[2] for p in points],
                             s=[_size(n) for n in points.values()], cmap=cmap, norm=norm, alpha=0.85,
                             edgecolors="#333333", linewidths=0.6, zorder=2)
    what = "stop" if stop else "stuck verdict"
    ax.set_xlabel(f"false {'stops' if stop else 'stuck verdicts'} on healthy traces (% of {results[0].healthy})")
    ax.set_ylabel(f"mean delay to the {what} (calls after the loop's first call)")
    ax.set_title(f"delay to the {what} vs false {'stops' if stop else 'stuck verdicts'}", fontsize=11)
    ax.grid(True, color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    left, right = ax.get_xlim()
    left, right = min(left, -2.0), max(right, 10.0)
    bottom, top = ax.get_ylim()
    # Headroom above the points for the notes, which sit in the top corners with an arrow to their point.
    bottom, top = min(bottom, 0.0), top + 0.45 * (top - min(bottom, 0.0))
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    marks = [(result.recommendation, "recommended", "*", "#d62728", (0.02, 0.98), "left"),
             (result.trade_off, "trade-off", "D", "#ff7f0e", (0.98, 0.98), "right")]
    for r, title, marker, color, corner, align in marks:
        if r is None:
            continue
        at = y_of(r)
        if at is None:
            continue
        x, y = x_of(r), at
        ax.scatter([x], [y], marker=marker, s=280 if marker == "*" else 120, facecolors="none", edgecolors=color,
                   linewidths=2.2, zorder=3)
        ax.annotate(f"{title}\n{_label(r)}", (x, y), xytext=corner, textcoords="axes fraction", fontsize=8,
                    color=color, ha=align, va="top",
                    arrowprops={"arrowstyle": "->", "color": color, "lw": 1.2, "shrinkB": 8},
                    bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": color, "alpha": 0.9}, zorder=4)
    missing = sum(1 for r in results if y_of(r) is None)
    if missing:
        ax.text(0.99, 0.01, f"{missing} setting(s) never {'stop' if stop else 'catch'} an incident: not drawn",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="#666666")
    return scatter


def plot(result: Calibration, path: str) -> None:
    """Draw detection delay against false positives per setting, as PNG or SVG (by the file's extension).

    Raises:
        ConfigError: the file cannot be written.
    """
    from matplotlib.colors import Normalize  # noqa: PLC0415 - the optional plot extra
    from matplotlib.figure import Figure  # noqa: PLC0415

    if not result.results:
        raise ConfigError("--plot: no valid setting to draw")
    fig = Figure(figsize=(14, 6.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    norm = Normalize(vmin=0, vmax=100)
    cmap = "viridis"
    drawn = _panel(left, result, stop=False, cmap=cmap, norm=norm)
    _panel(right, result, stop=True, cmap=cmap, norm=norm)
    if drawn is not None:
        bar = fig.colorbar(drawn, ax=[left, right], shrink=0.85, pad=0.01)
        bar.set_label("incidents caught (left) / stopped (right), %")
    sizes = [left.scatter([], [], s=_size(n), c="#cccccc", edgecolors="#333333", linewidths=0.6) for n in (1, 5, 20)]
    fig.legend(sizes, ["1 setting", "5 settings", "20 or more"], loc="outside lower center", ncols=3, fontsize=8,
               title="settings with the same numbers are one point", title_fontsize=8, frameon=False)
    rec = result.results[0]
    fig.suptitle(f"otel-loopguard calibrate: {rec.incidents} incidents, {rec.healthy} healthy traces, "
                 f"{len(result.results)} settings", fontsize=12)
    save_figure(fig, path)


def save_figure(fig: Any, path: str) -> None:
    """Write a matplotlib figure as PNG or SVG, by the file's extension (checked by :func:`check_plot`).

    Raises:
        ConfigError: the file cannot be written.
    """
    from matplotlib import rc_context  # noqa: PLC0415 - the optional plot extra

    ext = os.path.splitext(path)[1].lower()
    try:
        # SVG text stays text (selectable, searchable, small) instead of glyph outlines.
        with rc_context({"svg.fonttype": "none"}):
            fig.savefig(path, format=FORMATS[ext], dpi=130)
    except OSError as exc:
        raise ConfigError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None
