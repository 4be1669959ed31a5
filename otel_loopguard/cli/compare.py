"""``report --compare A B``: what changed from group A to group B, each difference with a 95 % interval.

Shares (stuck, nudged, stopped traces; failed tool calls) are compared with Newcombe's hybrid score interval built
from two Wilson intervals, which holds for small groups and for shares near 0 or 1 where the normal approximation
fails. Means per trace (tool calls, cost) are compared with a percentile bootstrap of the difference of means
(2 000 resamples, a fixed seed, so the same input always prints the same interval). A change is *clear* when its
interval excludes zero.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["Change", "bootstrap_difference", "compare_groups", "format_changes", "newcombe", "wilson"]

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


def bootstrap_difference(a: Sequence[float], b: Sequence[float], rounds: int = ROUNDS,
                         seed: int = 0) -> tuple[float, float, float]:
    """The difference of means ``mean(b) - mean(a)`` with a 95 % percentile bootstrap interval."""
    if not a or not b:
        return math.nan, math.nan, math.nan
    rng = random.Random(seed)
    diffs = sorted(sum(rng.choices(b, k=len(b))) / len(b) - sum(rng.choices(a, k=len(a))) / len(a)
                   for _ in range(rounds))
    return sum(b) / len(b) - sum(a) / len(a), diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]


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


def compare_groups(a: Any, b: Any) -> list[Change]:
    """The changes from group ``a`` to group ``b`` (``GroupStats`` of ``report``)."""
    changes = []
    for metric, field, total in (("stuck share", "stuck", "traces"), ("nudged share", "nudged", "traces"),
                                 ("stopped share", "stopped", "traces"),
                                 ("tool error rate", "failed_calls", "tool_calls")):
        k1, n1, k2, n2 = getattr(a, field), getattr(a, total), getattr(b, field), getattr(b, total)
        d, low, high = newcombe(k1, n1, k2, n2)
        changes.append(Change(metric, k1 / n1 if n1 else 0.0, k2 / n2 if n2 else 0.0, d, low, high))
    means = [("tool calls per trace", a.trace_calls, b.trace_calls)]
    if a.cost_usd is not None and b.cost_usd is not None:
        means.append(("cost per trace (USD)", a.trace_costs, b.trace_costs))
    for metric, xs, ys in means:
        d, low, high = bootstrap_difference(xs, ys)
        changes.append(Change(metric, sum(xs) / len(xs) if xs else math.nan,
                              sum(ys) / len(ys) if ys else math.nan, d, low, high))
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
