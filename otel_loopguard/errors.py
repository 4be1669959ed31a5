"""The exceptions otel_loopguard raises, as one small tree.

Configuration, CLI and file readers raise these; processor hooks never do.
"""

from __future__ import annotations


class LoopGuardError(Exception):
    """Base class of every error otel_loopguard raises on purpose."""


class ConfigError(LoopGuardError, ValueError):
    """A setting has a bad value; the message names the setting and the value."""


class InputError(LoopGuardError, ValueError):
    """Input data (a steps file, an OTLP file or request) is malformed.

    Args:
        message: what is wrong.
        source: where it came from (a file name, "request", ...), if known.
        location: where in the source (for example "line 12" or "resourceSpans[0].scopeSpans[1]"), if known.
    """

    def __init__(self, message: str, *, source: str | None = None, location: str | None = None) -> None:
        self.message = message
        self.source = source
        self.location = location
        where = ":".join(part for part in (source, location) if part)
        super().__init__(f"{where}: {message}" if where else message)


class LoopStopped(LoopGuardError, RuntimeError):
    """Raised by a harness (see ``Intervention.raise_if_stop``) when loopguard says stop the run.

    Attributes:
        intervention: the ``Intervention`` that asked for the stop.
    """

    def __init__(self, intervention: object, message: str) -> None:
        self.intervention = intervention
        super().__init__(message)


class ReviewPending(LoopGuardError, RuntimeError):
    """Raised by a harness (see ``Intervention.raise_if_blocked``) while a review loopguard asked for is unanswered.

    The run pauses: the application shows the review to a person and answers with
    ``LoopGuardSpanProcessor.resolve``; until then ``check()`` keeps answering ``review``.

    Attributes:
        intervention: the ``Intervention`` that asked for the review.
    """

    def __init__(self, intervention: object, message: str) -> None:
        self.intervention = intervention
        super().__init__(message)
