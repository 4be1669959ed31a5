"""Small builders shared by the core tests (plain functions, no fixtures)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from otel_loopguard.core.engine import LoopEngine, TraceState
from otel_loopguard.core.model import Observation, ToolCall

#: A fixed epoch time (2026-01-01T00:00:00Z) so replays are deterministic.
T0 = 1767225600.0

# A short alphabet of distinct calls for golden sequences: each letter is one signature.
_LETTER_CALLS = {
    "A": ("search", {"query": "weather in Paris"}),
    "B": ("read", {"url": "https://example.org/paris"}),
    "C": ("edit", {"path": "a.py"}),
    "D": ("run", {"cmd": "pytest"}),
}


def call(tool: str, args: Any = None, *, result: Any = "same result", at: float = 0.0, **kw: Any) -> ToolCall:
    """A tool call at ``T0 + at`` (half a second long) whose result is captured."""
    kw.setdefault("result_captured", True)
    return ToolCall(tool, args, result=result, start=T0 + at, end=T0 + at + 0.5, **kw)


def letters(sequence: str, *, noise_prefix: str = "noise") -> list[ToolCall]:
    """Calls for a letter sequence: A-D are fixed calls, lower-case letters are unique noise calls."""
    out = []
    for i, letter in enumerate(sequence):
        if letter in _LETTER_CALLS:
            tool, args = _LETTER_CALLS[letter]
            out.append(call(tool, dict(args), at=float(i)))
        else:
            out.append(call(noise_prefix, {"n": i, "letter": letter}, result=f"noise {i}", at=float(i)))
    return out


def observe_all(engine: LoopEngine, calls: Iterable[ToolCall], now: float | None = None) -> tuple[TraceState, list[Observation]]:
    """Feed ``calls`` to a fresh state and return it with every observation."""
    state = engine.new_state()
    return state, [engine.observe(state, c, now) for c in calls]


def first_index(observations: list[Observation], kind: str) -> int | None:
    """The index of the first observation whose verdict is ``kind``, or None."""
    return next((o.index for o in observations if o.verdict.kind == kind), None)


def kinds(observations: list[Observation]) -> list[str]:
    """The verdict kind after each call."""
    return [o.verdict.kind for o in observations]


def as_json_args(args: dict[str, Any]) -> str:
    """Arguments as a span carries them: a JSON string."""
    return json.dumps(args)
