"""Threshold calibration: replay labelled traces under a grid of settings and measure what each setting would do.

``otel-loopguard calibrate`` reads stored traces once into judge steps (:class:`CalibrationTrace`), then, for every
setting of a :class:`Grid`, judges every trace with a new :class:`~.engine.LoopEngine` for that setting and a
:class:`~.judge.TraceJudge` per trace, exactly as ``audit`` judges it (the processor and ``serve`` run the same
engine). Nothing is read or decoded again per setting.

Definitions (the documentation's ``calibrate`` page, docs/calibrate.md, says the same):

* **caught**: an incident trace that reached ``stuck`` after some call (the nudge is decided on that call).
* **stopped**: a trace stopped for a loop (a stop whose rule is ``period`` or ``frequency``). Stops for the step
  or cost budget do not depend on the swept settings; they are counted apart (``budget_stops``).
* **false stuck verdict** / **false stop**: a healthy trace that reached ``stuck`` / was stopped for a loop.
* **the loop's onset** of an incident: the index of the first call of the loop's first cycle — the
  ``cycle_start`` of the trace's first ``stuck`` verdict, taken as the earliest over every setting of the grid
  that catches the trace. One onset per trace, whatever setting is looked at, so delays of different settings
  compare; for a loop that starts cleanly (``A A A A``, ``A B A B``) every setting reports the same cycle start.
* **delay** from the onset to the verdict (or stop) after call ``k``: ``k - onset`` calls (the repeated calls made
  after the loop's first call, the one that caused the verdict included); the seconds from the end of the onset
  call to the end of call ``k``; and the priced model usage in between (the model calls that started after the
  onset call and before call ``k``), when prices are configured.
* **saved** by a stop after call ``k``: what the recorded trace did after it: its calls after ``k``, the seconds
  from the end of call ``k`` to the trace's last span end, and the priced model usage after call ``k``.

The recommendation (:func:`rank_key`): the setting with the fewest false stops (none, when any setting has none),
then the most incidents caught, then the shortest mean delay to ``stuck`` in calls, then the fewest false stuck
verdicts, then the most incidents stopped, then the shortest mean delay to the stop, then the first in the grid's
order. The trade-off (:func:`trade_off`): among the settings with more false stops than the recommendation that
catch more incidents or catch them sooner, the one that catches the most, with the fewest false stops, then soonest.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import math
import multiprocessing
import os
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from ..errors import ConfigError
from .agent_steps import NEWS_ONLY
from .config import LoopGuardConfig, ToolSettings, _optional_pattern, read_config_toml
from .cost import CostTotal
from .engine import LoopEngine
from .fastpath import sort_steps
from .judge import Step, TraceJudge
from .model import RULE_FREQUENCY, RULE_OUTPUT_REPETITION, RULE_PERIOD, STEP_KINDS, STEP_TOOL, STUCK

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_GRID",
    "GRID_KEYS",
    "HEALTHY",
    "INCIDENT",
    "MAX_SETTINGS",
    "TOOL_GRID_KEYS",
    "Calibration",
    "CalibrationTrace",
    "Grid",
    "Hit",
    "Outcome",
    "Setting",
    "SettingResult",
    "calibrate",
    "config_toml",
    "dump_toml",
    "evaluate",
    "first_onset",
    "onsets",
    "rank_key",
    "read_calibrate_table",
    "replay",
    "replay_all",
    "replay_judge",
    "sweep",
    "trade_off",
]

INCIDENT = "incident"
HEALTHY = "healthy"

#: Top-level settings a grid may sweep (the detector thresholds and the intervention ladder).
GRID_KEYS = ("window", "max_period", "min_repetitions", "frequency_limit", "hysteresis", "stop_after", "max_nudges")
#: Per-tool settings a grid may sweep, as ``tools.NAME.KEY``. The polled-tool wait (``wait_seconds``, seconds;
#: ``wait_until``, a result pattern) takes 0 and "" for "no wait", so a grid can compare waiting with exempting.
TOOL_GRID_KEYS = ("min_repetitions", "frequency_limit", "exempt", "wait_seconds", "wait_until")
#: The value of a wait axis that sets no wait.
_NO_WAIT: dict[str, Any] = {"wait_seconds": 0, "wait_until": ""}
#: The grid swept when none is given: 162 combinations, 108 of them valid (a window must hold
#: ``max_period * min_repetitions`` calls and at least ``frequency_limit``).
DEFAULT_GRID: dict[str, tuple[int, ...]] = {
    "window": (6, 10, 20),
    "max_period": (2, 3, 4),
    "min_repetitions": (2, 3, 4),
    "frequency_limit": (3, 4, 6),
    "hysteresis": (1, 2),
}
#: Settings swept at most (a grid with more combinations is refused).
MAX_SETTINGS = 10_000
#: Values one axis may hold at most.
MAX_AXIS_VALUES = 100
#: Stops caused by a loop (a degenerate output is one); other stops are the step and cost budgets.
LOOP_RULES = frozenset({RULE_PERIOD, RULE_FREQUENCY, RULE_OUTPUT_REPETITION})

_NONE = -1


# -- the grid --------------------------------------------------------------------------------------------------


def _axis_name(name: str) -> tuple[str | None, str]:
    """(tool or None, setting) of an axis name: ``window`` or ``tools.NAME.KEY`` (NAME may hold dots)."""
    if name.startswith("tools."):
        tool, _, key = name[len("tools."):].rpartition(".")
        if not tool or key not in TOOL_GRID_KEYS:
            raise ConfigError(
                f"grid axis {name!r}: a per-tool axis is tools.NAME.KEY with KEY one of {', '.join(TOOL_GRID_KEYS)}"
            )
        return tool, key
    if name not in GRID_KEYS:
        raise ConfigError(f"grid axis {name!r}: not a setting the grid sweeps (one of {', '.join(GRID_KEYS)}, "
                          f"or tools.NAME.KEY)")
    return None, name


def _check_values(name: str, values: Sequence[Any]) -> tuple[Any, ...]:
    _, key = _axis_name(name)
    if not values:
        raise ConfigError(f"grid axis {name}: needs at least one value")
    if len(values) > MAX_AXIS_VALUES:
        raise ConfigError(f"grid axis {name}: {len(values)} values, at most {MAX_AXIS_VALUES}")
    for value in values:
        if key == "exempt":
            if not isinstance(value, bool):
                raise ConfigError(f"grid axis {name}: values must be true or false, got {value!r}")
        elif key == "wait_until":
            if value != "":  # "" sets no pattern
                _optional_pattern(f"grid axis {name}", value)
        elif isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "wait_seconds" else 1):
            wanted = "non-negative integers (0: no wait)" if key == "wait_seconds" else "positive integers"
            raise ConfigError(f"grid axis {name}: values must be {wanted}, got {value!r}")
    # Duplicates would only sweep the same setting twice.
    return tuple(dict.fromkeys(values))


def parse_axis_text(text: str) -> tuple[str, tuple[Any, ...]]:
    """One ``--grid`` value: ``AXIS=V1,V2,...`` (integers; ``true``/``false`` for ``tools.NAME.exempt``; patterns
    for ``tools.NAME.wait_until``, an empty one for none: a pattern holding a comma goes in the ``[calibrate]`` table).

    Raises:
        ConfigError: the text is not ``AXIS=VALUES``, the axis is unknown, or a value is invalid.
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name or not raw.strip():
        raise ConfigError(f"--grid {text!r}: expected AXIS=V1,V2,... (e.g. window=6,10,20)")
    _, key = _axis_name(name)
    values: list[Any] = []
    for part in raw.split(","):
        word = part.strip().lower()
        if key == "exempt":
            if word not in ("true", "false"):
                raise ConfigError(f"--grid {name}: values must be true or false, got {part.strip()!r}")
            values.append(word == "true")
        elif key == "wait_until":
            values.append(part.strip())
        else:
            try:
                values.append(int(word))
            except ValueError:
                raise ConfigError(f"--grid {name}: values must be integers, got {part.strip()!r}") from None
    return name, _check_values(name, values)


def read_calibrate_table(path: str | os.PathLike[str]) -> dict[str, tuple[Any, ...]]:
    """The grid axes of the ``[calibrate]`` table of a TOML configuration file (empty when it has none).

    The table holds one key per swept setting, a list of values or one value (a fixed setting), and per-tool
    tables ``[calibrate.tools."NAME"]`` with ``min_repetitions``, ``frequency_limit``, ``exempt``, ``wait_seconds``
    or ``wait_until``.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or the table holds an unknown key or a bad value.
    """
    table = read_config_toml(path).get("calibrate", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [calibrate] must be a TOML table")
    axes: dict[str, tuple[Any, ...]] = {}
    try:
        for key, value in table.items():
            if key == "tools":
                if not isinstance(value, dict):
                    raise ConfigError("[calibrate.tools] must hold one table per tool")
                for tool, settings in value.items():
                    if not isinstance(settings, dict):
                        raise ConfigError(f'[calibrate.tools."{tool}"] must be a TOML table')
                    for name, values in settings.items():
                        axis = f"tools.{tool}.{name}"
                        axes[axis] = _check_values(axis, values if isinstance(values, list) else [values])
                continue
            axes[key] = _check_values(key, value if isinstance(value, list) else [value])
    except ConfigError as exc:
        raise ConfigError(f"{path}: [calibrate]: {exc}") from None
    return axes


@dataclass(frozen=True)
class Setting:
    """One point of the grid.

    Attributes:
        index: its position in the grid's order (valid settings only, from 0).
        values: (axis, value) of every axis of the grid, in the grid's order.
        config: the base configuration with these values.
    """

    index: int
    values: tuple[tuple[str, Any], ...]
    config: LoopGuardConfig

    def as_dict(self) -> dict[str, Any]:
        """The swept values by axis name."""
        return dict(self.values)

    def label(self) -> str:
        """``window=10 max_period=3 ...``."""
        return " ".join(f"{name}={_text(value)}" for name, value in self.values)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Grid:
    """The settings swept: axes (a setting name and its values) combined in every way.

    Args:
        axes: (axis name, values) in order: ``window``... or ``tools.NAME.KEY``.
    """

    def __init__(self, axes: Iterable[tuple[str, Sequence[Any]]]) -> None:
        checked = {}
        for name, values in axes:
            checked[name] = _check_values(name, values)
        self.axes: tuple[tuple[str, tuple[Any, ...]], ...] = tuple(checked.items())

    @classmethod
    def build(cls, file_axes: Mapping[str, Sequence[Any]] | None = None,
              cli_axes: Mapping[str, Sequence[Any]] | None = None) -> Grid:
        """The default grid, with the axes of the ``[calibrate]`` table and then of the command line replacing
        (or adding to) the default ones. Top-level axes come in :data:`GRID_KEYS` order, then per-tool axes."""
        merged: dict[str, Sequence[Any]] = dict(DEFAULT_GRID)
        merged.update(file_axes or {})
        merged.update(cli_axes or {})
        top = [(k, merged[k]) for k in GRID_KEYS if k in merged]
        tools = [(k, v) for k, v in merged.items() if k.startswith("tools.")]
        return cls([*top, *tools])

    @property
    def combinations(self) -> int:
        """Combinations of the axes, valid or not."""
        return math.prod(len(values) for _, values in self.axes)

    def tools(self) -> list[str]:
        """The tools named by per-tool axes."""
        return list(dict.fromkeys(t for t, _ in (_axis_name(n) for n, _ in self.axes) if t is not None))

    def as_dict(self) -> dict[str, list[Any]]:
        """The axes as JSON-ready lists."""
        return {name: list(values) for name, values in self.axes}

    def settings(self, base: LoopGuardConfig) -> tuple[list[Setting], list[tuple[dict[str, Any], str]]]:
        """Every valid setting, in order, and the combinations the configuration refuses (with the reason).

        Raises:
            ConfigError: the grid has more than :data:`MAX_SETTINGS` combinations.
        """
        if self.combinations > MAX_SETTINGS:
            raise ConfigError(f"the grid has {self.combinations} combinations; at most {MAX_SETTINGS} are swept")
        names = [name for name, _ in self.axes]
        parsed = [_axis_name(name) for name in names]
        settings: list[Setting] = []
        skipped: list[tuple[dict[str, Any], str]] = []
        for combo in itertools.product(*(values for _, values in self.axes)):
            top: dict[str, Any] = {}
            per_tool: dict[str, dict[str, Any]] = {}
            for (tool, key), value in zip(parsed, combo):
                if tool is None:
                    top[key] = value
                else:
                    per_tool.setdefault(tool, {})[key] = value
            try:
                if per_tool:
                    tools = dict(base.tools)
                    for tool, values in per_tool.items():
                        tools[tool] = dataclasses.replace(tools.get(tool) or ToolSettings(), **_tool_values(values))
                    top["tools"] = tools
                config = dataclasses.replace(base, **top)
            except ConfigError as exc:
                skipped.append((dict(zip(names, combo)), str(exc)))
                continue
            settings.append(Setting(len(settings), tuple(zip(names, combo)), config))
        return settings, skipped


def _tool_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Per-tool swept values as :class:`ToolSettings` takes them: a wait axis's "no wait" is None."""
    return {k: None if k in _NO_WAIT and v == _NO_WAIT[k] else v for k, v in values.items()}


# -- traces, read once -----------------------------------------------------------------------------------------


class CalibrationTrace:
    """One trace as the sweep needs it: its judge steps, read once and kept for every setting.

    Args:
        steps: the trace's steps as the assembler gives them to ``audit``'s judge: duplicates (one span id
            delivered twice) dropped, nested spans of one call joined, calls derived from model spans included.
        trace_id: hex trace id, or None (a steps file).
        source: where the trace came from (file names).
        label: :data:`INCIDENT`, :data:`HEALTHY` or None (unlabelled).
        observed_at: the observation time ``audit`` would judge it at (the last span end, or ``--at``).
        prices: USD per million tokens per model (for the dollars of delays and savings).
        max_steps: a steps file's own step budget (it overrides the configuration's, as in ``audit``).
        in_order: the steps are a steps file's, judged in the order given (their times may be absent).
        last_end: the end of the trace's last span, epoch seconds (default: the last end among its steps).

    The steps are put once in the order the judge judges them (:data:`~.judge.STEP_ORDER`), so each
    setting's judge finds them ready (joining nested spans is the assembler's, which knows the conventions: this
    layer may not import them). From the same order come the
    times and the cumulative model cost at each tool call, for the delays. The tool steps are also kept apart:
    without a cost budget, model usage changes no verdict, nudge or stop, so :func:`replay` judges only them.
    """

    __slots__ = ("call_ends", "cost_before", "end", "label", "lane_cost", "lane_ends", "max_steps", "observed_at",
                 "source", "steps", "tool_steps", "trace_id", "usd_total")

    def __init__(self, steps: Iterable[Step], *, trace_id: str | None, source: str, label: str | None,
                 observed_at: float | None, prices: Mapping[str, Any] | None = None, max_steps: int | None = None,
                 in_order: bool = False, last_end: float | None = None) -> None:
        ordered = list(steps)
        if not in_order:
            sort_steps(ordered)
        self.steps: tuple[Step, ...] = tuple(ordered)
        #: The tool steps alone: what a setting without a cost budget needs (model usage then decides nothing).
        self.tool_steps: tuple[Step, ...] = tuple(s for s in ordered if s.call is not None)
        self.trace_id = trace_id
        self.source = source
        self.label = label
        self.observed_at = observed_at
        self.max_steps = max_steps
        prices = prices or {}
        #: End (else start) of each tool call, epoch seconds, or None when the call has no times.
        self.call_ends: list[float | None] = []
        #: Priced model cost of the usage judged before each tool call (one more entry: the whole trace).
        self.cost_before: list[float] = []
        #: The same per other kind of step (hand-off, sub-agent, model turn): each kind is judged in a sequence of its
        #: own (its verdicts' step indices count its steps only), so its delays are measured along its own steps.
        self.lane_ends: dict[str, list[float | None]] = {}
        self.lane_cost: dict[str, list[float]] = {}
        cost = CostTotal()
        end: float | None = None
        for step in self.steps:
            call = step.call
            if call is not None:
                if step.kind == STEP_TOOL:
                    ends, costs = self.call_ends, self.cost_before
                elif call.tool != NEWS_ONLY:  # news for the next hand-off is never judged: no index of its own
                    ends, costs = self.lane_ends.setdefault(step.kind, []), self.lane_cost.setdefault(step.kind, [])
                else:
                    continue
                costs.append(cost.usd)
                at = call.end if call.end is not None else call.start
                ends.append(at)
                if at is not None and (end is None or at > end):
                    end = at
            elif step.usage is not None:
                cost = cost.add(step.model, step.usage, prices)
                if step.end_ns and (end is None or step.end_ns * 1e-9 > end):
                    end = step.end_ns * 1e-9
        for costs in (self.cost_before, *self.lane_cost.values()):
            costs.append(cost.usd)
        self.usd_total = cost.usd
        #: The trace's last time (what a stop saves runs to it): its last span's end.
        self.end = last_end if last_end is not None else end

    @property
    def calls(self) -> int:
        """Tool calls in the trace (after joining nested spans of one call)."""
        return len(self.call_ends)

    def ends(self, kind: str) -> list[float | None]:
        """End (else start) of each judged step of ``kind``, in its sequence's order."""
        return self.call_ends if kind == STEP_TOOL else self.lane_ends.get(kind, [])

    def costs(self, kind: str) -> list[float]:
        """Priced model cost judged before each step of ``kind`` (one more entry: the whole trace)."""
        return self.cost_before if kind == STEP_TOOL else self.lane_cost.get(kind, [self.usd_total])

    def tool_seconds(self, tool: str) -> float | None:
        """Seconds from the start of the first call of ``tool`` to the end of its last one (how long a polled tool
        was polled), or None without times."""
        times = [t for s in self.steps if s.call is not None and s.kind == STEP_TOOL and s.call.tool == tool
                 for t in (s.call.start, s.call.end) if t is not None]
        return max(times) - min(times) if times else None

    def ref(self) -> dict[str, Any]:
        """How a person finds the trace: its id and file(s)."""
        return {"trace_id": self.trace_id, "source": self.source}

    def __repr__(self) -> str:
        return f"CalibrationTrace({self.trace_id or self.source!r}, {self.label}, {self.calls} calls)"


# -- replay ----------------------------------------------------------------------------------------------------


class Outcome(NamedTuple):
    """What one setting did to one trace (-1: never; rules "" when none).

    Attributes:
        steps: tool calls judged.
        stuck_step: the call after which the trace first became ``stuck``.
        cycle_start: that verdict's cycle start (the first call of the repeated cycle).
        stuck_rule: that verdict's rule (``period`` or ``frequency``).
        nudge_step: the call after which the first nudge was decided.
        stop_step: the call after which the run was stopped (any rule; a stop stays).
        stop_rule: the stop's rule (``period``, ``frequency``, ``step_limit``, ``cost_limit``).
        stuck_tool: the repeated call's tool in that stuck verdict (the cycle's first call; for a hand-off
            ``from → to``).
        stop_tool: the repeated call's tool in the verdict the stop was decided on ("" for a budget stop).
        stuck_kind, stop_kind: the kind of step of that verdict and of the stop (``tool``, ``handoff``, ``agent``,
            ``model``; "" when none). Steps of each kind are counted in their own sequence, so ``stuck_step``,
            ``cycle_start`` and ``stop_step`` count steps of that kind.
    """

    steps: int
    stuck_step: int = _NONE
    cycle_start: int = _NONE
    stuck_rule: str = ""
    nudge_step: int = _NONE
    stop_step: int = _NONE
    stop_rule: str = ""
    stuck_tool: str = ""
    stop_tool: str = ""
    stuck_kind: str = ""
    stop_kind: str = ""

    @property
    def loop_stop(self) -> bool:
        """Stopped for a loop (not for a budget)."""
        return self.stop_step >= 0 and self.stop_rule in LOOP_RULES

    @property
    def budget_stop(self) -> bool:
        """Stopped for the step or cost budget."""
        return self.stop_step >= 0 and self.stop_rule not in LOOP_RULES


def replay_judge(trace: CalibrationTrace, engine: LoopEngine) -> TraceJudge:
    """The judge of one trace replayed with ``engine``, finished at the trace's observation time (see :func:`replay`
    for what is left out)."""
    judge = TraceJudge(engine, keep_steps=False, step_audit=False)
    add = judge.add
    for step in (trace.steps if engine.config.max_cost_usd is not None else trace.tool_steps):
        add(step)
    judge.finish(trace.observed_at)
    return judge


def replay(trace: CalibrationTrace, engine: LoopEngine) -> Outcome:
    """Judge one trace with ``engine`` as ``audit`` does (a new judge, every step, finished at its observation
    time) and return what happened.

    Three things ``audit`` does are left out because they cannot change the outcome: the step audit (it reports
    violations, never verdicts), keeping the steps for an exact re-judgement (every step is added before the
    judge judges, so none arrives out of order), and, without a cost budget, the model usage steps (usage only
    adds to the cost, which decides nothing without a budget). Duplicate spans were dropped when the trace was read.
    """
    judge = replay_judge(trace, engine)
    stuck_step = cycle_start = nudge_step = stop_step = _NONE
    stuck_rule = stop_rule = stuck_tool = stop_tool = stuck_kind = stop_kind = ""
    for transition in judge.transitions:
        verdict = transition.verdict
        if verdict.kind == STUCK:
            stuck_step, stuck_rule, stuck_tool = transition.step, verdict.rule, verdict.tool or ""
            cycle_start = verdict.cycle_start if verdict.cycle_start is not None else transition.step
            stuck_kind = verdict.step_kind
            break
    for intervention in judge.interventions:
        if intervention.action == "nudge" and nudge_step == _NONE:
            nudge_step = intervention.step
        elif intervention.action == "stop":
            stop_step, stop_rule = intervention.step, intervention.rule
            stop_kind = intervention.verdict.step_kind if intervention.verdict is not None else STEP_TOOL
            if intervention.verdict is not None and intervention.rule in LOOP_RULES:
                stop_tool = intervention.verdict.tool or ""
            break
    return Outcome(judge.steps, stuck_step, cycle_start, stuck_rule, nudge_step, stop_step, stop_rule, stuck_tool,
                   stop_tool, stuck_kind, stop_kind)


def replay_all(traces: Sequence[CalibrationTrace], config: LoopGuardConfig) -> list[Outcome]:
    """Judge every trace under one configuration: one engine, a judge per trace."""
    engine = LoopEngine(config)
    # A steps file's own step budget replaces the configuration's (as in audit): one engine per budget.
    engines: dict[int, LoopEngine] = {}
    out = []
    for trace in traces:
        budget = trace.max_steps
        if budget is None or budget == config.max_steps:
            out.append(replay(trace, engine))
            continue
        other = engines.get(budget)
        if other is None:
            other = engines[budget] = LoopEngine(dataclasses.replace(config, max_steps=budget))
        out.append(replay(trace, other))
    return out


# The sweep's work for a forked worker process: set before the pool is made, inherited by fork, never pickled.
_WORK: tuple[Sequence[CalibrationTrace], Sequence[Setting]] | None = None


def _replay_setting(index: int) -> tuple[int, list[Outcome]]:
    assert _WORK is not None
    traces, settings = _WORK
    return index, replay_all(traces, settings[index].config)


def sweep(traces: Sequence[CalibrationTrace], settings: Sequence[Setting], *, jobs: int = 1,
          progress: Callable[[int, int], None] | None = None) -> list[list[Outcome]]:
    """Judge every trace under every setting; ``result[s][t]`` is setting ``s``'s outcome for trace ``t``.

    Args:
        traces: the traces (read once; the same objects serve every setting).
        settings: the settings.
        jobs: worker processes. Above 1, settings are shared out among forked processes that inherit the traces
            (nothing is copied or decoded again); where processes cannot be forked, one process does it all.
        progress: called with (settings done, settings) after each setting.
    """
    global _WORK
    total = len(settings)
    results: list[list[Outcome] | None] = [None] * total
    jobs = max(1, min(jobs, total))
    if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
        _WORK = (traces, settings)
        # The traces' objects go to the permanent generation: the workers' garbage collector then never walks
        # them, so their memory pages stay shared with this process instead of being copied into each worker.
        gc.freeze()
        try:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for done, (index, outcomes) in enumerate(pool.imap_unordered(_replay_setting, range(total)), 1):
                    results[index] = outcomes
                    if progress is not None:
                        progress(done, total)
        finally:
            _WORK = None
            gc.unfreeze()
    else:
        for index, setting in enumerate(settings):
            results[index] = replay_all(traces, setting.config)
            if progress is not None:
                progress(index + 1, total)
    return [r if r is not None else [] for r in results]


# -- evaluation ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delay:
    """How long a caught (or stopped) incident ran in its loop before the verdict (or the stop).

    Attributes:
        trace: index of the trace.
        step: the call after which the verdict (or stop) came.
        calls: calls after the loop's first call, the one that caused the verdict included.
        seconds: from the end of the onset call to the end of call ``step``; None without times.
        usd: priced model usage between the two calls.
    """

    trace: int
    step: int
    calls: int
    seconds: float | None
    usd: float


@dataclass(frozen=True)
class Hit:
    """A verdict or a stop on a trace, for the lists of false positives: after which call, the rule, the tool
    of the repeated call ("" for a budget stop), and the kind of step (the call's index counts steps of that kind)."""

    trace: int
    step: int
    rule: str
    tool: str
    kind: str = STEP_TOOL


@dataclass(frozen=True)
class Saved:
    """What a stop after call ``step`` would have saved: the rest of the recorded trace."""

    trace: int
    calls: int
    seconds: float | None
    usd: float


@dataclass
class SettingResult:
    """What one setting does to the labelled traces.

    Attributes:
        setting: the setting.
        incidents: labelled incidents.
        healthy: labelled healthy traces.
        caught: delay to ``stuck`` of each caught incident.
        stopped: delay to the loop stop of each stopped incident.
        saved: what each loop stop of an incident would have saved.
        missed: incidents never ``stuck`` (trace indices).
        false_stuck: healthy traces that became ``stuck``.
        false_stops: healthy traces stopped for a loop.
        budget_stops: traces (either label) stopped for the step or cost budget.
        rank: 1 for the recommendation, then by :func:`rank_key`.
    """

    setting: Setting
    incidents: int
    healthy: int
    caught: list[Delay] = field(default_factory=list)
    stopped: list[Delay] = field(default_factory=list)
    saved: list[Saved] = field(default_factory=list)
    missed: list[int] = field(default_factory=list)
    false_stuck: list[Hit] = field(default_factory=list)
    false_stops: list[Hit] = field(default_factory=list)
    budget_stops: list[Hit] = field(default_factory=list)
    rank: int = 0

    @property
    def stuck_delay(self) -> Fraction | None:
        """Mean delay to ``stuck`` in calls over caught incidents (exact), None when none is caught."""
        return Fraction(sum(d.calls for d in self.caught), len(self.caught)) if self.caught else None

    @property
    def stop_delay(self) -> Fraction | None:
        """Mean delay to the loop stop in calls over stopped incidents (exact), None when none is stopped."""
        return Fraction(sum(d.calls for d in self.stopped), len(self.stopped)) if self.stopped else None

    def _share(self, count: int, of: int) -> float:
        return count / of if of else 0.0

    def delay_summary(self, delays: Sequence[Delay]) -> dict[str, Any] | None:
        """Mean, median and longest delay in calls; mean seconds (over delays with times) and mean and total USD."""
        if not delays:
            return None
        calls = [d.calls for d in delays]
        seconds = [d.seconds for d in delays if d.seconds is not None]
        usd = [d.usd for d in delays]
        return {
            "calls_mean": round(sum(calls) / len(calls), 6),
            "calls_median": statistics.median(calls),
            "calls_max": max(calls),
            "seconds_mean": None if not seconds else round(sum(seconds) / len(seconds), 6),
            "usd_mean": round(sum(usd) / len(usd), 6),
            "usd_total": round(sum(usd), 6),
        }

    def as_dict(self, traces: Sequence[CalibrationTrace], priced: bool) -> dict[str, Any]:
        """The JSON object of this setting (``calibrate --json``)."""

        def hits(items: Iterable[Hit]) -> list[dict[str, Any]]:
            # Tool-call hits keep the keys they always had; other kinds of step say which.
            return [{**traces[h.trace].ref(), "step": h.step, "rule": h.rule, "tool": h.tool,
                     **({"step_kind": h.kind} if h.kind != STEP_TOOL else {})} for h in items]

        stuck = self.delay_summary(self.caught)
        stop = self.delay_summary(self.stopped)
        if not priced:
            for summary in (stuck, stop):
                if summary is not None:
                    del summary["usd_mean"], summary["usd_total"]
        saved: dict[str, Any] = {
            "calls": sum(s.calls for s in self.saved),
            "seconds": round(sum(s.seconds for s in self.saved if s.seconds is not None), 6),
        }
        if priced:
            saved["usd"] = round(sum(s.usd for s in self.saved), 6)
        return {
            "rank": self.rank,
            "settings": self.setting.as_dict(),
            "incidents": self.incidents,
            "caught": len(self.caught),
            "caught_share": round(self._share(len(self.caught), self.incidents), 6),
            "stopped": len(self.stopped),
            "stopped_share": round(self._share(len(self.stopped), self.incidents), 6),
            "delay_to_stuck": stuck,
            "delay_to_stop": stop,
            "saved_by_stops": saved,
            "healthy": self.healthy,
            "false_stuck": len(self.false_stuck),
            "false_stuck_share": round(self._share(len(self.false_stuck), self.healthy), 6),
            "false_stops": len(self.false_stops),
            "false_stops_share": round(self._share(len(self.false_stops), self.healthy), 6),
            "budget_stops": len(self.budget_stops),
            "false_stuck_traces": hits(self.false_stuck),
            "false_stop_traces": hits(self.false_stops),
            "missed_traces": [traces[i].ref() for i in self.missed],
        }


_WORST = Fraction(10**18)


def rank_key(result: SettingResult) -> tuple[Any, ...]:
    """The order of settings, best first (see the module docstring): fewest false stops, most incidents caught,
    shortest mean delay to stuck (calls), fewest false stuck verdicts, most incidents stopped, shortest mean delay
    to the stop, first in the grid."""
    stuck_delay, stop_delay = result.stuck_delay, result.stop_delay
    return (
        len(result.false_stops),
        -len(result.caught),
        _WORST if stuck_delay is None else stuck_delay,
        len(result.false_stuck),
        -len(result.stopped),
        _WORST if stop_delay is None else stop_delay,
        result.setting.index,
    )


def trade_off(results: Sequence[SettingResult], chosen: SettingResult) -> SettingResult | None:
    """Among the settings with more false stops than ``chosen`` that catch more incidents or catch them sooner, the
    one that catches the most, with the fewest false stops, then the soonest (then :func:`rank_key`), or None."""
    best_delay = chosen.stuck_delay if chosen.stuck_delay is not None else _WORST

    def better(r: SettingResult) -> bool:
        delay = r.stuck_delay if r.stuck_delay is not None else _WORST
        return len(r.caught) > len(chosen.caught) or (len(r.caught) == len(chosen.caught) and delay < best_delay)

    candidates = [r for r in results if len(r.false_stops) > len(chosen.false_stops) and better(r)]
    if not candidates:
        return None
    return min(candidates, key=lambda r: (-len(r.caught), len(r.false_stops),
                                          r.stuck_delay if r.stuck_delay is not None else _WORST, rank_key(r)))


Onsets = dict[str, int]


def onsets(traces: Sequence[CalibrationTrace], outcomes: Sequence[Sequence[Outcome]]) -> list[Onsets]:
    """Each trace's loop onsets by kind of step: the earliest cycle start of its first ``stuck`` verdict over every
    setting whose first ``stuck`` verdict is of that kind (each kind counts its own steps, so onsets of two kinds
    never compare); empty when no setting catches the trace."""
    out: list[Onsets] = []
    for t in range(len(traces)):
        starts: Onsets = {}
        for o in outcomes:
            outcome = o[t]
            if outcome.stuck_step >= 0:
                kind = outcome.stuck_kind or STEP_TOOL
                starts[kind] = min(starts.get(kind, outcome.cycle_start), outcome.cycle_start)
        out.append(starts)
    return out


def first_onset(starts: Onsets) -> tuple[str, int] | None:
    """The onset reported for a trace: its tool calls', else the first kind's in :data:`STEP_KINDS` order."""
    for kind in STEP_KINDS:
        if kind in starts:
            return kind, starts[kind]
    return None


def _delay(trace: CalibrationTrace, index: int, onset: int, step: int, kind: str) -> Delay:
    ends, costs = trace.ends(kind), trace.costs(kind)
    start_at, end_at = ends[onset], ends[step]
    seconds = None if start_at is None or end_at is None else max(0.0, end_at - start_at)
    return Delay(index, step, step - onset, seconds, costs[step] - costs[onset])


def _saved(trace: CalibrationTrace, index: int, step: int, kind: str) -> Saved:
    """What a stop after step ``step`` of ``kind`` saves: the later steps of that kind, the time and the cost."""
    ends = trace.ends(kind)
    at = ends[step]
    seconds = None if at is None or trace.end is None else max(0.0, trace.end - at)
    return Saved(index, len(ends) - 1 - step, seconds, trace.usd_total - trace.costs(kind)[step])


def evaluate(traces: Sequence[CalibrationTrace], settings: Sequence[Setting], outcomes: Sequence[Sequence[Outcome]],
             starts: Sequence[Onsets] | None = None) -> list[SettingResult]:
    """Measure every setting on the labelled traces; returns the results ranked (best first, ``rank`` set).

    Args:
        traces: the labelled traces.
        settings: the settings.
        outcomes: ``outcomes[s][t]``, from :func:`sweep`.
        starts: each trace's loop onsets by kind of step (:func:`onsets` of ``outcomes`` when None).
    """
    if starts is None:
        starts = onsets(traces, outcomes)
    incidents = sum(1 for t in traces if t.label == INCIDENT)
    healthy = sum(1 for t in traces if t.label == HEALTHY)
    results = []
    for setting, per_trace in zip(settings, outcomes):
        r = SettingResult(setting, incidents, healthy)
        for index, (trace, outcome) in enumerate(zip(traces, per_trace)):
            if outcome.budget_stop:
                r.budget_stops.append(Hit(index, outcome.stop_step, outcome.stop_rule, ""))
            if trace.label == INCIDENT:
                _incident(r, trace, index, outcome, starts[index])
            elif trace.label == HEALTHY:
                if outcome.stuck_step >= 0:
                    r.false_stuck.append(Hit(index, outcome.stuck_step, outcome.stuck_rule, outcome.stuck_tool,
                                             outcome.stuck_kind))
                if outcome.loop_stop:
                    r.false_stops.append(Hit(index, outcome.stop_step, outcome.stop_rule, outcome.stop_tool,
                                             outcome.stop_kind))
        results.append(r)
    results.sort(key=rank_key)
    for rank, r in enumerate(results, 1):
        r.rank = rank
    return results


def _incident(r: SettingResult, trace: CalibrationTrace, index: int, outcome: Outcome, starts: Onsets) -> None:
    """Count one incident for a setting: caught (with its delay from the onset of its kind), stopped, or missed."""
    onset = starts.get(outcome.stuck_kind) if outcome.stuck_step >= 0 else None
    if onset is None:
        r.missed.append(index)
        return
    r.caught.append(_delay(trace, index, onset, outcome.stuck_step, outcome.stuck_kind))
    if outcome.loop_stop:
        # The stop may be decided in another kind's sequence than the first stuck verdict: measured along its own.
        stop_onset = starts.get(outcome.stop_kind)
        if stop_onset is not None and stop_onset <= outcome.stop_step:
            r.stopped.append(_delay(trace, index, stop_onset, outcome.stop_step, outcome.stop_kind))
        r.saved.append(_saved(trace, index, outcome.stop_step, outcome.stop_kind))


@dataclass
class Calibration:
    """The whole answer of a calibration.

    Attributes:
        grid: the grid swept.
        settings: its valid settings.
        skipped: combinations the configuration refuses, with the reason.
        traces: the labelled traces swept.
        unlabelled: traces without a label (judged under the recommendation only).
        results: one per setting, ranked.
        recommendation: the first of ``results`` (None without settings).
        trade_off: see :func:`trade_off`.
        unlabelled_outcomes: the recommendation's outcome for each unlabelled trace.
        priced: the configuration has prices (dollars are meaningful).
        onsets: each labelled trace's loop onsets by kind of step (see :func:`onsets`; empty for healthy and never
            caught traces).
    """

    grid: Grid
    settings: list[Setting]
    skipped: list[tuple[dict[str, Any], str]]
    traces: list[CalibrationTrace]
    unlabelled: list[CalibrationTrace]
    results: list[SettingResult]
    recommendation: SettingResult | None
    trade_off: SettingResult | None
    unlabelled_outcomes: list[Outcome]
    priced: bool
    onsets: list[Onsets] = field(default_factory=list)

    def tool_hints(self, limit: int = 3) -> list[tuple[str, str, int]]:
        """The tools whose repetition makes the false positives (of the recommendation, and the false stops of the
        trade-off), when the grid has no per-tool axis for them: (tool, the rule that fired most, healthy traces),
        most traces first. A per-tool setting for them may catch incidents without those false positives."""
        traces, rules = self._hint_traces()
        ranked = sorted(traces, key=lambda tool: (-len(traces[tool]), tool))[:limit]
        return [(tool, max(rules[tool], key=lambda rule: (rules[tool][rule], rule)), len(traces[tool]))
                for tool in ranked]

    def wait_hint(self, tool: str) -> int:
        """A ``wait_seconds`` worth sweeping for a polled ``tool`` of :meth:`tool_hints`: the longest it was polled
        in the healthy traces it made false positives on, rounded up to a whole minute (at least one)."""
        spans = [self.traces[t].tool_seconds(tool) for t in self._hint_traces()[0].get(tool, ())]
        longest = max((s for s in spans if s is not None), default=0.0)
        return 60 * max(1, math.ceil(longest / 60))

    def _hint_traces(self) -> tuple[dict[str, set[int]], dict[str, dict[str, int]]]:
        """The healthy traces of each tool blamed by :meth:`tool_hints`, and its hits by rule."""
        swept = set(self.grid.tools())
        hits: list[Hit] = []
        if self.recommendation is not None:
            hits += self.recommendation.false_stuck + self.recommendation.false_stops
        if self.trade_off is not None:
            hits += self.trade_off.false_stops
        traces: dict[str, set[int]] = {}
        rules: dict[str, dict[str, int]] = {}
        for h in hits:
            if h.tool and h.kind == STEP_TOOL and h.tool not in swept:  # per-tool settings are for tool calls
                traces.setdefault(h.tool, set()).add(h.trace)
                by_rule = rules.setdefault(h.tool, {})
                by_rule[h.rule] = by_rule.get(h.rule, 0) + 1
        return traces, rules

    def _incident(self, index: int, trace: CalibrationTrace) -> dict[str, Any]:
        """An incident in the JSON document: its tool calls and loop onset; for a loop of another kind of step than
        tool calls, that kind and the trace's steps of each kind besides tool calls."""
        first = first_onset(self.onsets[index]) if index < len(self.onsets) else None
        out: dict[str, Any] = {**trace.ref(), "calls": trace.calls, "onset": None if first is None else first[1]}
        if first is not None and first[0] != STEP_TOOL:
            out["onset_kind"] = first[0]
        if trace.lane_ends:
            out["steps"] = {kind: len(ends) for kind, ends in trace.lane_ends.items()}
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``calibrate --json``."""
        incidents = sum(1 for t in self.traces if t.label == INCIDENT)
        rec = self.recommendation
        unl = self.unlabelled_outcomes
        return {
            "traces": {"incidents": incidents, "healthy": len(self.traces) - incidents,
                       "unlabelled": len(self.unlabelled)},
            "grid": self.grid.as_dict(),
            "settings_swept": len(self.settings),
            "incidents": [self._incident(i, t) for i, t in enumerate(self.traces) if t.label == INCIDENT],
            "skipped_settings": [{"settings": values, "reason": reason} for values, reason in self.skipped],
            "recommendation": None if rec is None else rec.as_dict(self.traces, self.priced),
            "trade_off": None if self.trade_off is None else self.trade_off.as_dict(self.traces, self.priced),
            "settings": [r.as_dict(self.traces, self.priced) for r in self.results],
            "tool_hints": [{"tool": tool, "rule": rule, "healthy_traces": n} for tool, rule, n in self.tool_hints()],
            "unlabelled": {
                "traces": [t.ref() for t in self.unlabelled],
                "stuck": sum(1 for o in unl if o.stuck_step >= 0),
                "stopped": sum(1 for o in unl if o.loop_stop),
                "stuck_traces": [self.unlabelled[i].ref() for i, o in enumerate(unl) if o.stuck_step >= 0],
            },
        }


def calibrate(traces: Iterable[CalibrationTrace], grid: Grid, base: LoopGuardConfig, *, jobs: int = 1,
              progress: Callable[[int, int], None] | None = None) -> Calibration:
    """Sweep ``grid`` over the labelled traces, rank the settings, recommend one, judge the unlabelled traces
    under it.

    Raises:
        ConfigError: the grid is too large.
    """
    labelled: list[CalibrationTrace] = []
    unlabelled: list[CalibrationTrace] = []
    for trace in traces:
        (labelled if trace.label in (INCIDENT, HEALTHY) else unlabelled).append(trace)
    settings, skipped = grid.settings(base)
    outcomes = sweep(labelled, settings, jobs=jobs, progress=progress) if settings else []
    starts = onsets(labelled, outcomes)
    results = evaluate(labelled, settings, outcomes, starts)
    rec = results[0] if results else None
    other = trade_off(results, rec) if rec is not None else None
    unl = replay_all(unlabelled, rec.setting.config) if rec is not None and unlabelled else []
    return Calibration(grid, settings, skipped, labelled, unlabelled, results, rec, other, unl, bool(base.prices),
                       [s if t.label == INCIDENT else {} for t, s in zip(labelled, starts)])


# -- the recommendation as a configuration file ----------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # JSON string escapes are TOML basic-string escapes, except that TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "isoformat"):  # dates and times, as tomllib reads them
        return str(value.isoformat())
    raise ConfigError(f"cannot write {value!r} as TOML")


def dump_toml(data: Mapping[str, Any], header: Iterable[str] = ()) -> str:
    """A TOML document of ``data`` (what :mod:`tomllib` reads), after ``#`` comment lines of ``header``."""
    lines = [f"# {line}".rstrip() for line in header]

    def table(prefix: str, values: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in values.items() if not isinstance(v, dict)]
        tables = [(k, v) for k, v in values.items() if isinstance(v, dict)]
        if prefix and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append(f"[{prefix}]")
        for key, value in scalars:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
        for key, value in tables:
            table(f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key), value)

    table("", data)
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != dict(data) and not _has_nan(data):
        raise ConfigError("the configuration could not be written as TOML that reads back the same")
    return text


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nan(v) for v in value)
    return False


def config_toml(base_data: Mapping[str, Any], setting: Setting, header: Iterable[str] = ()) -> str:
    """The configuration file of a setting: the base file's tables (without ``[calibrate]``) with the swept
    values set, as TOML that ``LoopGuardConfig.load`` (the processor, ``audit``, ``serve``) reads.

    Args:
        base_data: the parsed base configuration file (``{}`` without one).
        setting: the setting to write.
        header: comment lines at the top.
    """
    data: dict[str, Any] = {k: v for k, v in base_data.items() if k != "calibrate"}
    top: dict[str, Any] = {}
    tools: dict[str, dict[str, Any]] = {}
    for name, value in setting.values:
        tool, key = _axis_name(name)
        if tool is None:
            top[key] = value
        else:
            tools.setdefault(tool, {})[key] = value
    # The swept values first, so a reader sees them at the top of the file.
    data = {**top, **{k: v for k, v in data.items() if k not in top}}
    if tools:
        merged = {name: dict(table) for name, table in data.get("tools", {}).items()}
        for tool, values in tools.items():
            table = merged.setdefault(tool, {})
            for key, value in _tool_values(values).items():
                if value is None:
                    table.pop(key, None)  # no wait: the key is left out (TOML has no null)
                else:
                    table[key] = value
        data["tools"] = {tool: table for tool, table in merged.items() if table}
    return dump_toml(data, header)
