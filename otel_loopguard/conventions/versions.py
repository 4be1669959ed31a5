"""A trace's versions: which release, agent version, model, prompt and tool set produced it.

When a shipped agent starts to misbehave the first question is what changed. Every verdict event and every task
metric therefore carries the trace's version attributes: ``service.version`` (a resource attribute),
``gen_ai.agent.version``, ``gen_ai.request.model``, the ``app.*.version`` stamps, and the names listed in the
configuration's ``version_attributes``. One value per name and trace: that of the earliest-starting span that has
it (span attributes before its resource), so a trace gets the same versions whatever order its spans arrive in (the
outer agent span's version, the first model call's model). Values are bounded by
:func:`~otel_loopguard.core.escape.bounded_name` (escaped, at most 128 characters); the names are few and fixed by
the configuration, so the metrics stay low-cardinality.

The processor and ``serve`` both call :func:`version_attributes` per span and keep a :class:`TraceVersions` per
trace; the verdict event takes :meth:`TraceVersions.values` as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.config import LoopGuardConfig
from ..core.escape import bounded_name
from . import names as n

__all__ = ["TraceVersions", "Versions", "version_attributes", "version_keys"]

#: (attribute name, bounded value) pairs, sorted by name.
Versions = tuple[tuple[str, str], ...]

_SCALARS = (str, bool, int, float)


def version_keys(config: LoopGuardConfig) -> tuple[str, ...]:
    """The attribute names read as versions: the fixed ones (:data:`~.names.READ_VERSION_ATTRIBUTES`), then the
    configuration's ``version_attributes`` (each once)."""
    return tuple(dict.fromkeys((*n.READ_VERSION_ATTRIBUTES, *config.version_attributes)))


def version_attributes(attrs: Mapping[str, Any], resource: Mapping[str, Any], keys: tuple[str, ...]) -> Versions:
    """The versions one span carries: (name, bounded value) for each of ``keys`` found in its attributes, else in
    its resource's. Only a scalar other than empty text is a version (a list, a map or "" is passed over)."""
    found = []
    for key in keys:
        value = attrs.get(key)
        if not _usable(value):
            value = resource.get(key)
            if not _usable(value):
                continue
        found.append((key, bounded_name(str(value))))
    return tuple(found)


def _usable(value: Any) -> bool:
    return value is not None and isinstance(value, _SCALARS) and value != ""


class TraceVersions:
    """The versions of one trace so far: per name, the value of the earliest-starting span that has it (ties: the
    lower span id), whatever order its spans are noted in. At most as many entries as names read."""

    __slots__ = ("_best",)

    def __init__(self) -> None:
        self._best: dict[str, tuple[tuple[int, int], str]] = {}

    def note(self, found: Versions, start_ns: int, span_id: int) -> None:
        """Take the versions one span carries (from :func:`version_attributes`)."""
        if not found:
            return
        best = self._best
        at = (start_ns, span_id)
        for key, value in found:
            known = best.get(key)
            if known is None or at < known[0]:
                best[key] = (at, value)

    def values(self) -> Versions:
        """The trace's versions, sorted by name."""
        best = self._best
        return tuple(sorted((key, value) for key, (_, value) in best.items())) if best else ()
