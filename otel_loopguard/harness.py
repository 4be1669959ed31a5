"""Public helpers for agent harnesses: deliver nudges in tool results and stop runs loopguard stopped."""

from ._harness import guard_tool, with_nudge
from ._signature import NUDGE_MARKER

__all__ = ["NUDGE_MARKER", "guard_tool", "with_nudge"]
