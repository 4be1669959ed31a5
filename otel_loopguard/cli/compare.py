"""``report --compare A B``: what changed from group A to group B, each difference with a 95 % interval.

Shares (task outcomes; stuck and nudged traces; failed tool calls) are compared with Newcombe's hybrid score
interval built from two Wilson intervals, which holds for small groups and for shares near 0 or 1 where the normal
approximation fails. Figures per task (turns, tool calls and cost: median and 90th percentile; loop verdicts per
100 tasks: a mean) are compared with a percentile bootstrap of the difference (2 000 resamples, a fixed seed, so
the same input always prints the same interval). A change is *clear* when its interval excludes zero.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["Change", "bootstrap_difference", "compare_groups", "format_changes", "newcombe", "quantile", "wilson"]

#: The two-sided 95 % normal quantile.
Z95 = 1.959963984540054
#: Bootstrap resamples (a fixed seed makes the interval reproducible).
ROUNDS = 2000


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a share ``successes / n`` (``(0, 1)`` for an empty group)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """The difference of shares ``k2/n2 - k1/n1`` with Newcombe's hybrid score interval (method 10)."""
    p1 = k1 / n1 if n1 else 0.0
    p2 = k2 / n2 if n2 else 0.0
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p2 - p1
    return d, d - math.hypot(p2 - l2, u1 - p1), d + math.hypot(u2 - p2, p1 - l1)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by linear interpolation between order statistics (NaN when empty).

    The same definition as numpy's default and R's type 7: position ``(n - 1) * q`` in the sorted values, so the
    0.5 quantile is the usual median.
    """
    if not values:
        return math.nan
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (at - low) * (ordered[high] - ordered[low])


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (NaN when empty)."""
    return sum(values) / len(values) if values else math.nan


def bootstrap_difference(a: Sequence[float], b: Sequence[float], rounds: int = ROUNDS, seed: int = 0,
                         statistic: Callable[[Sequence[float]], float] = mean) -> tuple[float, float, float]:
    """The difference ``statistic(b) - statistic(a)`` (the mean unless given) with a 95 % percentile bootstrap
    interval; NaN when a group has no value."""
    if not a or not b:
        return math.nan, math.nan, math.nan
    rng = random.Random(seed)
    diffs = sorted(statistic(rng.choices(b, k=len(b))) - statistic(rng.choices(a, k=len(a))) for _ in range(rounds))
    return statistic(b) - statistic(a), diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]


@dataclass(frozen=True)
class Change:
    """One figure of two groups and their difference (B minus A) with its 95 % interval."""

    metric: str
    a: float
    b: float
    difference: float
    low: float
    high: float

    @property
    def clear(self) -> bool:
        """The interval excludes zero: the change is statistically clear at 95 %."""
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``report --compare --json``)."""
        return {"metric": self.metric, "a": _round(self.a), "b": _round(self.b),
                "difference": _round(self.difference), "low": _round(self.low), "high": _round(self.high),
                "clear": self.clear}


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


#: Shares compared (figure, GroupStats count, GroupStats total).
SHARES = (("success share", "succeeded", "traces"), ("error share", "errored", "traces"),
          ("refusal share", "refused", "traces"), ("stop share", "stopped", "traces"),
          ("stuck share", "stuck", "traces"), ("nudged share", "nudged", "traces"),
          ("tool error rate", "failed_calls", "tool_calls"))


def _median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def _p90(values: Sequence[float]) -> float:
    return quantile(values, 0.9)


def _per_100(values: Sequence[float]) -> float:
    return 100 * mean(values)


def compare_groups(a: Any, b: Any) -> list[Change]:
    """The changes from group ``a`` to group ``b`` (``GroupStats`` of ``report``): each share, then each figure
    per task (cost only when both groups are priced)."""
    changes = []
    for metric, count, total in SHARES:
        k1, n1, k2, n2 = getattr(a, count), getattr(a, total), getattr(b, count), getattr(b, total)
        d, low, high = newcombe(k1, n1, k2, n2)
        changes.append(Change(metric, k1 / n1 if n1 else 0.0, k2 / n2 if n2 else 0.0, d, low, high))
    figures = [("turns", "trace_turns"), ("tool calls", "trace_calls")]
    if a.cost_usd is not None and b.cost_usd is not None:
        figures.append(("cost (USD)", "task_costs"))
    per_task: list[tuple[str, Sequence[float], Sequence[float], Callable[[Sequence[float]], float]]] = []
    for name, field in figures:
        xs, ys = getattr(a, field), getattr(b, field)
        per_task += [(f"{name} median", xs, ys, _median), (f"{name} p90", xs, ys, _p90)]
    per_task.append(("loop verdicts per 100 tasks", a.trace_loops, b.trace_loops, _per_100))
    for metric, xs, ys, statistic in per_task:
        d, low, high = bootstrap_difference(xs, ys, statistic=statistic)
        changes.append(Change(metric, statistic(xs), statistic(ys), d, low, high))
    return changes


def format_changes(changes: list[Change], a: str, b: str, out: IO[str]) -> None:
    """Print the changes as a table; clear ones are marked ``*``."""
    rows = [["metric", a, b, "B - A", "95% interval", ""]]
    for c in changes:
        rows.append([c.metric, _figure(c.a), _figure(c.b), _figure(c.difference, signed=True),
                     f"[{_figure(c.low, signed=True)}, {_figure(c.high, signed=True)}]", "*" if c.clear else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        out.write("  ".join(cells).rstrip() + "\n")
    out.write("* the 95% interval excludes 0: a clear change\n")


def _figure(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"
