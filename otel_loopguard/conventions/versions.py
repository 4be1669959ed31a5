"""A trace's versions: which release, agent version, model, prompt and tool set produced it.

When a shipped agent starts to misbehave the first question is what changed. Every verdict event and every task
metric therefore carries the trace's version attributes: ``service.version`` (a resource attribute),
``gen_ai.agent.version``, ``gen_ai.request.model``, the ``app.*.version`` stamps, and the names listed in the
configuration's ``version_attributes``. One value per name and trace: that of the earliest-starting span that has
it (span attributes before its resource), so a trace gets the same versions whatever order its spans arrive in (the
outer agent span's version, the first model call's model). Values are bounded by
:func:`~otel_loopguard.core.escape.bounded_name` (escaped, at most 128 characters); the names are few and fixed by
the configuration, so the metrics stay low-cardinality.

The configuration's static stamps (``versions``) have one source, :func:`version_stamps`: the processor sets them on
every span as it starts, and they are read back from the spans like any other version, so a trace judged live, from
``serve`` or from a file gets the same versions. The processor and ``serve`` both call :func:`version_attributes` per
span and keep a :class:`TraceVersions` per trace; the verdict event takes :meth:`TraceVersions.values` as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.config import LoopGuardConfig
from ..core.escape import bounded_name
from . import names as n

__all__ = ["TraceVersions", "VersionReader", "Versions", "version_attributes", "version_keys", "version_stamps"]

#: (attribute name, bounded value) pairs, sorted by name.
Versions = tuple[tuple[str, str], ...]

_SCALARS = (str, bool, int, float)
_EMPTY: Mapping[str, Any] = {}


def version_stamps(config: LoopGuardConfig) -> dict[str, str]:
    """The ``app.*.version`` attributes set on every span: the configuration's ``versions`` by their attribute
    names (:data:`~.names.VERSION_ATTRIBUTES`), which :func:`version_keys` always reads back."""
    return {n.VERSION_ATTRIBUTES[key]: value for key, value in config.versions.items()}


def version_keys(config: LoopGuardConfig) -> frozenset[str]:
    """The attribute names read as versions: the fixed ones (:data:`~.names.READ_VERSION_ATTRIBUTES`) and the
    configuration's ``version_attributes`` (a set: a span's keys are intersected with it at C speed)."""
    return frozenset((*n.READ_VERSION_ATTRIBUTES, *config.version_attributes))


def version_attributes(attrs: Mapping[str, Any], resource: Mapping[str, Any], keys: frozenset[str]) -> Versions:
    """The versions one span carries, sorted by name: (name, bounded value) for each of ``keys`` found in its
    attributes, else in its resource's. Only a scalar other than empty text is a version (a list, a map or "" is
    passed over)."""
    if keys.isdisjoint(attrs) and keys.isdisjoint(resource):
        return ()  # most spans: two C-level passes
    found = []
    for key in sorted(keys.intersection(attrs).union(keys.intersection(resource))):
        value = attrs.get(key)
        if not _usable(value):
            value = resource.get(key)
            if not _usable(value):
                continue
        found.append((key, bounded_name(str(value))))
    return tuple(found)


def _usable(value: Any) -> bool:
    return value is not None and isinstance(value, _SCALARS) and value != ""


class VersionReader:
    """:func:`version_attributes` for a stream of spans: a resource's versions are read once per resource object
    (a process has one; a request to ``serve`` one per sender), a span's own on each span.

    Not locked: one reader per thread, or a benign race (the cached pair is replaced whole).
    """

    __slots__ = ("keys", "resource")

    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = keys
        self.resource: tuple[Any, Versions] = (None, ())

    def __call__(self, attrs: Mapping[str, Any], resource: Mapping[str, Any]) -> Versions:
        known = self.resource
        if resource is not known[0]:
            known = self.resource = (resource, version_attributes(_EMPTY, resource, self.keys))
        if self.keys.isdisjoint(attrs):
            return known[1]  # most spans: one C-level pass
        own = version_attributes(attrs, _EMPTY, self.keys)
        if not own or not known[1]:
            return own or known[1]
        names = {key for key, _ in own}
        return own + tuple(pair for pair in known[1] if pair[0] not in names)


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
