"""Steps files: the simplest input ``otel-loopguard audit`` reads (a JSON list of tool calls)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from .model import Lease, ToolCall


@dataclass(frozen=True)
class StepsFile:
    """A parsed steps file.

    Attributes:
        steps: the raw steps (for the step audit, which signs raw arguments).
        calls: the same steps as engine tool calls.
        observed_at: observation time (epoch s); the last step's end (or start) when the file gives none.
        max_steps: the file's step budget, if it sets one.
        repeat_limit: the file's limit on identical consecutive calls (step audit), if it sets one.
    """

    steps: list[dict[str, Any]]
    calls: list[ToolCall]
    observed_at: float | None
    max_steps: int | None
    repeat_limit: int | None


def is_steps_document(doc: Any) -> bool:
    """True when a decoded JSON document is a steps file rather than OTLP."""
    return isinstance(doc, list) or (isinstance(doc, dict) and "steps" in doc and "resourceSpans" not in doc)


def _number(value: Any, where: str, source: str) -> float:
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            # An integer too large for a float (JSON allows 1 followed by 400 zeros) overflows here.
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    shown = repr(value)
    if len(shown) > 40 and isinstance(value, int):
        shown = f"an integer of {len(shown)} digits"
    raise InputError(f"expected a number of seconds, got {shown}", source=source, location=where)


def _count(value: Any, where: str, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"expected a non-negative integer, got {value!r}", source=source, location=where)
    return value


def _names(keys: set[str]) -> str:
    # Quoted when not printable, so a key holding a newline cannot split the one-line error message.
    return ", ".join(key if key.isprintable() else repr(key) for key in sorted(keys))


def _call(step: Any, where: str, source: str) -> ToolCall:
    """One step of a steps document as a tool call.

    Raises:
        InputError: naming the file and the step and field that are wrong.
    """
    if not isinstance(step, dict):
        raise InputError(f"a step must be an object, got {type(step).__name__}", source=source, location=where)
    unknown = set(step) - {"tool", "args", "args_captured", "result", "error", "progress", "start", "end", "wait"}
    if unknown:
        raise InputError(f"unknown key(s) {_names(unknown)}", source=source, location=where)
    tool = step.get("tool")
    if not isinstance(tool, str) or not tool:
        raise InputError(f"tool must be a non-empty string, got {tool!r}", source=source, location=where + ".tool")
    args = step.get("args")
    if args is not None and not isinstance(args, dict):
        raise InputError(f"args must be an object or null, got {args!r}", source=source, location=where + ".args")
    captured = step.get("args_captured", True)
    if not isinstance(captured, bool):
        raise InputError("args_captured must be true or false", source=source, location=where + ".args_captured")
    for name in ("error", "progress"):
        if step.get(name) is not None and not isinstance(step[name], str):
            raise InputError(f"{name} must be a string", source=source, location=f"{where}.{name}")
    start = _number(step["start"], where + ".start", source) if step.get("start") is not None else None
    end = _number(step["end"], where + ".end", source) if step.get("end") is not None else None
    return ToolCall(tool=tool, arguments=args or {}, arguments_captured=captured, result=step.get("result"),
                    result_captured="result" in step, error=step.get("error"), progress=step.get("progress"),
                    start=start, end=end, lease=_lease(step.get("wait"), where, source))


def _lease(wait: Any, where: str, source: str) -> Lease | None:
    """A step's ``wait`` object as a dependency lease (None when absent)."""
    if wait is None:
        return None
    if not isinstance(wait, dict) or "deadline" not in wait:
        raise InputError("wait must be an object with owner and deadline", source=source, location=where + ".wait")
    owner = wait.get("owner") or ""
    if not isinstance(owner, str):
        raise InputError("wait.owner must be a string", source=source, location=where + ".wait.owner")
    return Lease(owner, _number(wait["deadline"], where + ".wait.deadline", source))


def parse_steps(doc: Any, source: str) -> StepsFile:
    """Validate a decoded steps document.

    Raises:
        InputError: naming the file and the step and field that are wrong.
    """
    options: dict[str, Any] = {}
    if isinstance(doc, dict):
        unknown = set(doc) - {"observed_at", "max_steps", "repeat_limit", "steps"}
        if unknown:
            raise InputError(f"unknown key(s) {_names(unknown)}", source=source, location="top level")
        if "steps" not in doc:
            raise InputError("missing key 'steps'", source=source, location="top level")
        options, raw_steps = doc, doc["steps"]
    else:
        raw_steps = doc
    if not isinstance(raw_steps, list):
        raise InputError("steps must be a list", source=source, location="steps")
    calls = [_call(step, f"steps[{i}]", source) for i, step in enumerate(raw_steps)]
    steps: list[dict[str, Any]] = [{"tool": call.tool, "args": call.arguments} for call in calls]
    observed_at = None
    if options.get("observed_at") is not None:
        observed_at = _number(options["observed_at"], "observed_at", source)
    elif calls:
        last = calls[-1]
        observed_at = last.end if last.end is not None else last.start
    return StepsFile(
        steps, calls, observed_at,
        _count(options.get("max_steps"), "max_steps", source),
        _count(options.get("repeat_limit"), "repeat_limit", source),
    )


def load_steps(path: str) -> StepsFile:
    """Read and validate a steps file.

    Raises:
        InputError: the file cannot be read, is not JSON, or is not a valid steps document.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=path) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not valid JSON: {exc}", source=path) from None
    if not is_steps_document(doc):
        raise InputError("not a steps file (expected a list of steps or an object with 'steps')", source=path)
    return parse_steps(doc, path)
