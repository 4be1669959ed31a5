"""What every command shares: exit statuses, detector options, loading the configuration, input paths, error
lines, colours, a progress line."""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

from ..core.config import LoopGuardConfig
from ..core.escape import escaped
from ..errors import InputError
from ..otlp.read import STDIN

T = TypeVar("T")

EXIT_OK, EXIT_FOUND, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

#: What ``audit`` and ``report`` hold at most while reading their inputs (MiB, ``--max-buffer-mb``).
DEFAULT_BUFFER_MB = 1024
DEFAULT_BUFFER_BYTES = DEFAULT_BUFFER_MB << 20
#: The most bytes read from one input, after decompression (``--max-input-bytes``): 4 GiB.
DEFAULT_MAX_INPUT_BYTES = 4 << 30

# The detector settings a command line may override, as (flag, type, help).
_DETECTOR_FLAGS = (
    ("window", int, "recent tool calls searched for repetition"),
    ("max-period", int, "longest cycle searched for (calls)"),
    ("min-repetitions", int, "cycles needed before a repetition counts"),
    ("frequency-limit", int, "times one call may appear in the window"),
    ("max-steps", int, "step budget per trace (tool calls)"),
    ("repeat-limit", int, "consecutive identical calls the step audit allows"),
)


def detector_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and the detector flags that override the configuration."""
    parser.add_argument("--config", metavar="FILE.toml", help="configuration file (see README, Configuration)")
    for flag, kind, text in _DETECTOR_FLAGS:
        parser.add_argument(f"--{flag}", type=kind, metavar="N", help=text)
    parser.add_argument("--max-cost", type=float, metavar="USD", dest="max_cost_usd", help="cost budget per trace")


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def input_options(parser: argparse.ArgumentParser) -> None:
    """Add the limits of reading stored traces: ``--max-input-bytes`` and ``--max-buffer-mb``."""
    parser.add_argument("--max-input-bytes", type=_non_negative, default=DEFAULT_MAX_INPUT_BYTES, metavar="N",
                        help="refuse an input larger than this, counted after gzip decompression (default 4 GiB; "
                             "0: no limit)")
    parser.add_argument("--max-buffer-mb", type=_non_negative, default=DEFAULT_BUFFER_MB, metavar="MB",
                        help="memory for traces held until the input ends; beyond it the least recently active "
                             "trace is judged early and reported as partial (default 1024)")


def load_config(args: argparse.Namespace) -> LoopGuardConfig:
    """The configuration from ``--config``, the environment and the detector flags."""
    names = [flag.replace("-", "_") for flag, _, _ in _DETECTOR_FLAGS] + ["max_cost_usd"]
    overrides = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return LoopGuardConfig.load(getattr(args, "config", None), **overrides)


def expand_paths(paths: Iterable[str], err: IO[str] | None = None) -> Iterator[str]:
    """Each path, a directory replaced by its regular files (sorted, recursively; hidden files and directories
    skipped).

    ``-`` (standard input) stays itself even when a directory of that name exists. A FIFO, socket or device found
    in a directory is skipped with a note on ``err`` (default ``sys.stderr``): opening a FIFO nobody writes to
    blocks forever. Named on the command line, it is read as given.
    """
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        yield from _regular(os.path.join(root, name), err)
        else:
            yield path


def _regular(path: str, err: IO[str] | None) -> Iterator[str]:
    """``path`` if it is a regular file (or cannot be examined: its reader then says why); else a note."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        yield path
        return
    if stat.S_ISREG(mode):
        yield path
        return
    (err if err is not None else sys.stderr).write(
        f"otel-loopguard: note: {escaped(path)}: not a regular file (a FIFO, socket or device), skipped; "
        "name it on the command line to read it\n")


def json_line(doc: dict[str, Any]) -> str:
    """``doc`` as one line of JSON, every non-finite number (NaN, Infinity: not JSON) written as ``null`` and the
    keys so replaced listed under ``"not_finite"`` (a note, so that a reader knows the null is not "none")."""
    try:
        return json.dumps(doc, allow_nan=False)
    except ValueError:
        pass
    replaced: list[str] = []
    cleaned = _finite(doc, "", replaced)
    cleaned["not_finite"] = replaced
    return json.dumps(cleaned, allow_nan=False)


def _finite(value: Any, path: str, replaced: list[str]) -> Any:
    """``value`` with non-finite floats as None, their dotted paths appended to ``replaced``."""
    if isinstance(value, float) and not math.isfinite(value):
        replaced.append(path)
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", replaced) for i, v in enumerate(value)]
    return value


def write_error(exc: InputError, err: IO[str] | None = None) -> None:
    """Print an input error as one line (to the current ``sys.stderr`` unless ``err`` is given)."""
    # Looked up at call time: a default bound at import would keep writing to a replaced (maybe closed) stream.
    # The message quotes file names and span data: one escaped line whatever they hold.
    (err if err is not None else sys.stderr).write(f"otel-loopguard: error: {escaped(str(exc))}\n")


class ErrorLine:
    """An ``on_error`` callback: writes each input error as one line (:func:`write_error`) and remembers that one
    was met (``failed``), so that the command can exit with :data:`EXIT_ERROR` after reading everything else."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, exc: InputError) -> None:
        self.failed = True
        write_error(exc)


def encodable_writer(out: IO[str]) -> Callable[[str], object]:
    """``out.write`` that backslash-escapes what ``out`` cannot encode instead of raising half-way through."""
    encoding = getattr(out, "encoding", None)
    if not encoding:
        return out.write
    # Tool names may hold lone surrogates (JSON "\\ud800" escapes) and file names undecodable bytes; a terminal
    # may not show every character.
    return lambda text: out.write(text.encode(encoding, "backslashreplace").decode(encoding))


class EmptyInput:
    """Notices an input that held no span and met no error saying why, so that it is reported (``FILE: no spans
    in this file``) rather than ending with exit status 0 and nothing printed.

    Pass :meth:`on_error` to the reader and wrap its spans in :meth:`spans`; afterwards :attr:`error` is the error
    to report, or None.
    """

    def __init__(self, name: str, on_error: Callable[[InputError], None] | None) -> None:
        self.name = name
        self._on_error = on_error
        self._seen = False
        self._failed = False

    def on_error(self, exc: InputError) -> None:
        """Pass an input error on (raise it when no callback was given), remembering that one was met."""
        self._failed = True
        if self._on_error is None:
            raise exc
        self._on_error(exc)

    def spans(self, spans: Iterable[T]) -> Iterator[T]:
        """``spans`` unchanged, noting whether there was one."""
        for span in spans:
            self._seen = True
            yield span

    @property
    def error(self) -> InputError | None:
        """``NAME: no spans in this file`` when the input held none and no error was reported for it, else None."""
        # Named like every input error (FILE: what), so that the file leads the line.
        return None if self._seen or self._failed else InputError("no spans in this file", source=self.name)


class EscapedLines:
    """A text stream for output made of input strings and plain words only (no colours): each line written passes
    :func:`~otel_loopguard.core.escape.escaped`, newlines kept, so no tool name or file name can drive the
    terminal wherever the command happens to quote it."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._write = encodable_writer(out)

    def write(self, text: str) -> None:
        self._write("\n".join(escaped(line) for line in text.split("\n")))

    def flush(self) -> None:
        self._out.flush()


COLORS = {"stuck": "31", "stop": "31;1", "nudge": "33", "uncertain": "35", "retrying": "36", "waiting": "34",
          "working": "32"}


def painter(color: bool) -> Callable[[str], str]:
    """A function colouring a verdict or action word for a terminal (the identity without colour)."""
    if not color:
        return lambda text: text
    return lambda text: f"\x1b[{COLORS.get(text, '0')}m{text}\x1b[0m"


class StatusLine:
    """One line of progress on a terminal, redrawn at most five times a second and erased by :meth:`clear`."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._drawn = 0.0
        self._shown = False

    def due(self, force: bool = False) -> bool:
        """Whether to draw now (a fifth of a second since the last drawing, or ``force``); if so, counts as drawn."""
        now = time.monotonic()
        if force or now - self._drawn >= 0.2:
            self._drawn = now
            return True
        return False

    def draw(self, text: str) -> None:
        """Replace the line with ``text``."""
        self._stream.write(f"\r\x1b[K{text}")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the line, if one is shown."""
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False
