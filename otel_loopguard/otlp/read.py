"""Read stored traces (OTLP/JSON, JSON Lines, OTLP protobuf, any of them gzipped) as :class:`SpanRecord`.

This is the facade of the OTLP readers: :func:`decode_json_request` and
:func:`decode_proto_request` decode one export request (for ``serve``);
:func:`read_spans` streams a file (for ``audit``).
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar, cast

from ..conventions.span import SpanRecord
from ..core.jsontext import loads
from ..errors import InputError
from . import json_general as _otlp_json
from .json_general import decode_json_document, parse_json
from .json_typed import decode_typed

__all__ = ["DEFAULT_MAX_INPUT_BYTES", "STDIN", "Input", "InputTooLarge", "decode_json_request", "decode_proto_request",
           "read_spans"]

_GZIP_MAGIC = b"\x1f\x8b"
_PROTO_EXTENSIONS = (".pb", ".binpb", ".protobuf")
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
# JSON text never holds these bytes raw; serialised protobuf almost always does
# (field tags, lengths, binary ids), which tells the two apart even when a
# protobuf happens to begin with the bytes of "\n{".
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SNIFF_BYTES = 65536
_READ_BUFFER = 1 << 20
_READ_ERRORS = (OSError, EOFError, zlib.error)
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable
_UNPARSED = object()
_T = TypeVar("_T")


class _ReadFailed(Exception):
    """Internal: the file (or its gzip stream) could not be read further."""


def decode_json_request(data: bytes | str | dict[str, Any], *, source: str = "request") -> list[SpanRecord]:
    """Decode one OTLP/JSON ``ExportTraceServiceRequest`` (see :func:`._otlp_json.decode_json_request`).

    Text in the common shape is decoded by the typed fast path; anything else, including every malformed
    request, by the general decoder, which names the problem and where it is.
    """
    if data.__class__ is bytes or data.__class__ is str:
        spans = decode_typed(data)
        if spans is not None:
            return spans
    return _otlp_json.decode_json_request(data, source=source)


def decode_proto_request(data: bytes, *, source: str = "request") -> list[SpanRecord]:
    """Decode one serialised protobuf ``ExportTraceServiceRequest`` (see :func:`.proto.decode_proto_request`).

    The protobuf modules are imported on the first call: reading OTLP/JSON (most stored traces) never loads them.
    """
    from .proto import decode_proto_request as decode  # noqa: PLC0415 - protobuf only for protobuf input

    return decode(data, source=source)


def _raise(error: InputError) -> None:
    raise error


#: The most bytes read from one input by default, after decompression (``--max-input-bytes``).
DEFAULT_MAX_INPUT_BYTES = 4 << 30
#: Bytes looked at to tell a format (gzip, JSON, protobuf, steps file): never more.
SNIFF_BYTES = _SNIFF_BYTES
#: The name of standard input as an input path.
STDIN = "-"


class InputTooLarge(Exception):
    """Internal: an input gave more bytes than its cap (``size``: a regular file's size, refused before reading)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        super().__init__(limit, size)
        self.limit = limit
        self.size = size

    def input_error(self, source: str) -> InputError:
        """The one-line error every command reports for it."""
        size = f"{self.size} bytes, " if self.size is not None else ""
        return InputError(f"{size}larger than the input limit of {self.limit} bytes (--max-input-bytes)",
                          source=source)


class _Capped(io.RawIOBase):
    """A raw stream giving ``head`` and then what ``source`` reads, at most ``limit`` bytes in all."""

    def __init__(self, head: bytes, source: IO[bytes], limit: int | None) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._source = source
        self._limit = limit
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        head = self._head
        if head:
            n = min(len(view), len(head))
            view[:n] = head[:n]
            self._head = head[n:]
        else:
            read1 = getattr(self._source, "read1", None)
            data = read1(len(view)) if read1 is not None else self._source.read(len(view))
            n = len(data)
            view[:n] = data
        self.count += n
        if self._limit is not None and self.count > self._limit:
            raise InputTooLarge(self._limit)
        return n


class Input:
    """One opened input: a file, or standard input (``-``), decompressed when gzipped, capped in size.

    Args:
        path: a file path, or ``-`` for standard input (a pipe, a FIFO or a redirected file).
        max_bytes: the most bytes read from it, after decompression (None: no cap).

    Attributes:
        name: the path, or ``<stdin>``.
        gzipped: whether the content was gzip-compressed.
        stream: the (decompressed) content, buffered.
        head: at most :data:`SNIFF_BYTES` first bytes of the content, to tell its format.
        complete: whether ``head`` is the whole content.

    Raises:
        OSError: the file cannot be opened.
    """

    def __init__(self, path: str, max_bytes: int | None = DEFAULT_MAX_INPUT_BYTES) -> None:
        self.path = path
        self.name = "<stdin>" if path == STDIN else path
        if path == STDIN:
            source: IO[bytes] = sys.stdin.buffer
            self._owned: IO[bytes] | None = None
        else:
            # Unbuffered here: the one buffer is the large one around the content below (export lines are often
            # hundreds of kB, and an 8 kB buffer made reading a line a chain of small reads and copies).
            source = self._owned = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        try:
            magic = _read_up_to(source, 2)
            self.gzipped = magic == _GZIP_MAGIC
            if not self.gzipped:
                _refuse_by_size(source, max_bytes)
            if self.gzipped:
                # Only the decompressed bytes count against the cap: that is what fills memory.
                compressed = io.BufferedReader(_Capped(magic, source, None), _READ_BUFFER)
                content: IO[bytes] = cast(IO[bytes], gzip.GzipFile(fileobj=compressed, mode="rb"))
                first = b""
            else:
                content, first = source, magic
            #: Why the content could not be read (corrupt gzip data), reported when the spans are read.
            self.failure: BaseException | None = None
            try:
                head = first + _read_up_to(content, _SNIFF_BYTES - len(first))
            except _READ_ERRORS as exc:
                if not self.gzipped:
                    raise
                self.failure, head = exc, b""
            self.complete = len(head) < _SNIFF_BYTES
            self.head = head
            self.stream: IO[bytes] = cast(IO[bytes], io.BufferedReader(_Capped(head, content, max_bytes),
                                                                       _READ_BUFFER))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the file (standard input is left open)."""
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> Input:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _refuse_by_size(source: IO[bytes], max_bytes: int | None) -> None:
    """Raise :class:`InputTooLarge` for a regular file larger than ``max_bytes``, before reading it: reading up to
    the limit first would fill memory with content refused anyway. Pipes, FIFOs and devices have no size; their
    reading stops at the limit."""
    if max_bytes is None:
        return
    try:
        info = os.fstat(source.fileno())
    except (OSError, AttributeError, io.UnsupportedOperation):
        return
    if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
        raise InputTooLarge(max_bytes, info.st_size)


def _read_up_to(stream: IO[bytes], size: int) -> bytes:
    """Up to ``size`` bytes (fewer only at the end): a pipe may hand over less than asked per read."""
    parts = []
    while size > 0:
        chunk = stream.read(size)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _opened(path: str | Input, max_bytes: int | None, report: Callable[[InputError], None]) -> Input | None:
    """The input opened and sniffed, or None when it cannot be (reported)."""
    if isinstance(path, Input):
        return path
    try:
        return Input(path, max_bytes)
    except OSError as exc:
        report(InputError(f"cannot open: {exc.strerror or exc}", source=path))
    except InputTooLarge as exc:
        report(exc.input_error(path))
    except _READ_ERRORS as exc:
        report(_read_error(exc, path, None))
    return None


def read_spans(path: str | Input, *, on_error: Callable[[InputError], None] | None = None,
               max_bytes: int | None = DEFAULT_MAX_INPUT_BYTES) -> Iterator[SpanRecord]:
    """Stream the spans stored in a file (or standard input, ``-``).

    The format is detected from the content: gzip by its magic bytes (any
    format may be gzipped), JSON when the text starts with ``{`` or ``[``,
    protobuf otherwise (the extensions ``.pb``, ``.binpb`` and ``.protobuf``
    force protobuf); at most :data:`SNIFF_BYTES` are looked at. A JSON file is
    either one document (pretty-printed or not) or JSON Lines, one request per
    line as the Collector's file exporter writes it; JSON Lines are decoded line
    by line, so memory is bounded by the longest line. A document or line whose
    root is an array is read as a list of requests. A protobuf file holds one
    serialised ``ExportTraceServiceRequest``.

    Each line (or document) is decoded as a whole before its spans are
    yielded, so a malformed line contributes no spans.

    Args:
        path: the file to read, ``-`` for standard input, or an :class:`Input` already opened (and sniffed).
        on_error: called with each :class:`InputError`; reading then goes on
            with the next line where there is one. The default raises.
        max_bytes: the most bytes read, after decompression (a gzip bomb stops there); None: no cap.

    Returns:
        An iterator over the spans, in file order.

    Raises:
        InputError: (only without ``on_error``) the file cannot be opened or
            read, is neither JSON nor protobuf, is larger than ``max_bytes``,
            or a line or document is malformed; ``source`` is the path and
            ``location`` says where (``"line 7"``, ``"line 7, resourceSpans[0]...traceId"``).
    """
    report = on_error or _raise
    opened = _opened(path, max_bytes, report)
    if opened is None:
        return
    name = opened.name
    with opened:
        if opened.failure is not None:
            report(_read_error(opened.failure, name, None))
            return
        try:
            stream = opened.stream
            if os.path.splitext(opened.path.removesuffix(".gz"))[1].lower() in _PROTO_EXTENSIONS:
                yield from _proto_file(stream.read(), name, report, forced=True)
                return
            if _looks_like_json(opened.head):
                yield from _json_file(stream, name, report)
            else:
                data = stream.read()
                yield from _proto_file(data, name, report, forced=False)
        except InputTooLarge as exc:
            report(exc.input_error(name))
        except _READ_ERRORS as exc:
            report(_read_error(exc, name, None))


def _looks_like_json(head: bytes) -> bool:
    head = head.removeprefix(_BOM)
    text = head.lstrip(_WHITESPACE)
    return (not text or text[:1] in b"{[") and _BINARY.search(head) is None


def _read_error(exc: BaseException, path: str, location: str | None) -> InputError:
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return InputError(f"truncated or corrupt gzip data: {exc}", source=path, location=location)
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return InputError(f"cannot read: {detail}", source=path, location=location)


def _proto_file(data: bytes, path: str, report: Callable[[InputError], None], *, forced: bool) -> Iterator[SpanRecord]:
    try:
        spans = decode_proto_request(data, source=path)
    except InputError as exc:
        if not forced and exc.location is None:
            exc = InputError(f"neither OTLP/JSON nor OTLP protobuf ({exc.message})", source=path)
        report(exc)
        return
    yield from spans


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    try:
        yield from stream
    except _READ_ERRORS as exc:
        raise _ReadFailed(exc) from exc


def _decode_root(obj: Any, path: str, location: str | None, report: Callable[[InputError], None]) -> list[SpanRecord]:
    """Decode a parsed document or line: one request object, or an array of them."""
    if obj.__class__ is not list:
        try:
            return decode_json_document(obj, source=path, location=location)
        except InputError as exc:
            report(exc)
            return []
    spans: list[SpanRecord] = []
    for index, item in enumerate(obj):
        where = f"{location}, [{index}]" if location else f"[{index}]"
        try:
            spans.extend(decode_json_document(item, source=path, location=where))
        except InputError as exc:
            report(exc)
    return spans


def _json_file(stream: IO[bytes], path: str, report: Callable[[InputError], None]) -> Iterator[SpanRecord]:
    lines = _lines(stream)
    number = 0
    try:
        first = b""
        for first in lines:
            number += 1
            if first.strip():
                break
        else:
            return
        if number == 1 and first.startswith(_BOM):
            first = first[len(_BOM) :]
        pending: list[tuple[int, bytes]] = []
        spans = _without_gc(decode_typed, first)
        if spans is not None:
            # A whole request on the first line: JSON Lines (or a one-line document).
            yield from spans
        else:
            whole_document = False
            parsed: Any = _UNPARSED
            try:
                text = first.decode("utf-8")
                parsed = _without_gc(loads, text)
            except json.JSONDecodeError as exc:
                # An error at the very end of the first line means the line is the
                # beginning of a multi-line document, unless the next line stands
                # on its own (JSON Lines whose first line was cut short).
                if exc.pos >= len(text.rstrip()):
                    whole_document = True
                    for line in lines:
                        pending.append((number + len(pending) + 1, line))
                        if line.strip():
                            whole_document = not _is_json_container(line)
                            break
            except (ValueError, RecursionError):
                pass
            if whole_document:
                rest = b"".join(line for _, line in pending) + b"".join(lines)
                document = b"\n" * (number - 1) + first + rest
                yield from _without_gc(_document_spans, document, path, report)
                return
            if parsed is not _UNPARSED:
                # The first line parsed on its own: decode that object rather than parse the line again.
                yield from _without_gc(_decode_root, parsed, path, f"line {number}", report)
            else:
                pending.insert(0, (number, first))
        for number, line in pending:
            if line.strip():
                yield from _json_line(line, number, path, report)
        for line in lines:
            number += 1
            if line.strip():
                yield from _json_line(line, number, path, report)
    except _ReadFailed as failed:
        report(_read_error(failed.__cause__ or failed, path, f"line {number + 1}"))


def _document_spans(document: bytes, path: str, report: Callable[[InputError], None]) -> list[SpanRecord]:
    """The spans of a whole (multi-line) document; its errors are reported and give no spans."""
    spans = decode_typed(document)
    if spans is not None:
        return spans
    try:
        obj = parse_json(document, source=path, location=None)
    except InputError as exc:
        report(exc)
        return []
    return _decode_root(obj, path, None, report)


def _is_json_container(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), (dict, list))
    except (ValueError, RecursionError):
        return False


def _without_gc(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` with the cyclic collector paused (re-enabled only if it was enabled).

    Parsing and decoding JSON allocates thousands of containers and cannot make a reference cycle, so
    the collector's passes over them (a third of ``json.loads``' time) are wasted; it runs again at the
    first allocation afterwards, over what survives.
    """
    paused = _gc_isenabled()
    if paused:
        _gc_disable()
    try:
        return fn(*args, **kwargs)
    finally:
        if paused:
            _gc_enable()


def _json_line(line: bytes, number: int, path: str, report: Callable[[InputError], None]) -> list[SpanRecord]:
    return _without_gc(_decode_line, line, number, path, report)


def _decode_line(line: bytes, number: int, path: str, report: Callable[[InputError], None]) -> list[SpanRecord]:
    spans = decode_typed(line)
    if spans is not None:
        return spans
    location = f"line {number}"
    try:
        obj = loads(line)
    except json.JSONDecodeError as exc:
        report(InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", source=path, location=location))
        return []
    except UnicodeDecodeError as exc:
        report(InputError(f"not valid UTF-8 text: {exc.reason}", source=path, location=location))
        return []
    except RecursionError:
        report(InputError("JSON nested too deeply", source=path, location=location))
        return []
    except ValueError as exc:
        report(InputError(f"not valid JSON: {exc}", source=path, location=location))
        return []
    return _decode_root(obj, path, location, report)
