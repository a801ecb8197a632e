"""Stream the events of a torch.profiler (Kineto) Chrome trace without loading its JSON tree.

A production trace is hundreds of MB of JSON (``.json`` or ``.json.gz``): one object whose
``traceEvents`` array holds every event, next to small metadata (``deviceProperties``,
``distributedInfo``, ``schemaVersion``...). :func:`stream_trace` reads it in chunks of
:data:`CHUNK_BYTES`, decodes one event at a time with the C scanner of :mod:`json` and yields it,
so memory holds one chunk and whatever the caller keeps, never the whole document. The metadata is
collected into ``meta`` as it passes (keys may come before or after ``traceEvents``; it is complete
when the iterator ends).

Errors are :class:`profilers.traces.kineto.TraceError` with one line: not JSON, not a trace (no
``traceEvents``), a truncated or damaged file (gzip or JSON), a single value over
:data:`MAX_VALUE_BYTES`.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from profilers.traces.kineto import TraceError

#: Bytes read (and decompressed) at a time.
CHUNK_BYTES = 1 << 20
#: The largest single JSON value (one event, one metadata entry) accepted; beyond it the file is
#: taken for something other than a trace rather than read into memory whole.
MAX_VALUE_BYTES = 64 << 20

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Chunks:
    """Text of a (possibly gzipped) file, read on demand into a sliding buffer."""

    def __init__(self, path: Path, raw: IO[bytes]) -> None:
        self.path = path
        head = raw.read(2)
        raw.seek(0)
        self._file: Any = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
        self._text = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> None:
        """Append the next chunk to the unread part of the buffer (sets ``eof`` at the end)."""
        try:
            data = self._file.read(CHUNK_BYTES)
            self.eof = not data
            text = self._text.decode(data, final=self.eof)
        except (EOFError, zlib.error, gzip.BadGzipFile):
            raise TraceError(f"{self.path}: a damaged or truncated gzip file") from None
        except UnicodeDecodeError:
            raise TraceError(f"{self.path}: not UTF-8 text; a torch.profiler trace was expected") from None
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
        self.buf = self.buf[self.pos :] + text
        self.pos = 0

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            match = _SPACE.match(self.buf, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self.fill()

    def expect(self, chars: str, where: str) -> str:
        """Consume one of ``chars`` (after white space) and return it; else the file is not a trace."""
        char = self.peek()
        if not char or char not in chars:
            if not char:
                raise TraceError(f"{self.path}: the file ends inside {where} (a truncated trace)")
            raise TraceError(
                f"{self.path}: not a torch.profiler trace (found {char!r} where {where} expects "
                f"{' or '.join(repr(c) for c in chars)})"
            )
        self.pos += 1
        return char

    def value(self, where: str) -> Any:
        """Decode the next JSON value, reading more of the file until it is whole."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    if exc.pos >= len(self.buf) - 1 or "Unterminated" in exc.msg:
                        raise TraceError(
                            f"{self.path}: the file ends inside {where} (a truncated trace)"
                        ) from None
                    raise TraceError(f"{self.path}: not valid JSON in {where} ({exc.msg})") from None
                if len(self.buf) - self.pos > MAX_VALUE_BYTES:
                    raise TraceError(
                        f"{self.path}: a value in {where} is over {MAX_VALUE_BYTES >> 20} MB; not a trace"
                    ) from None
                self.fill()
                continue
            if end == len(self.buf) and not self.eof:  # a number may go on in the next chunk
                self.fill()
                continue
            self.pos = end
            return obj


def stream_trace(path: Path, meta: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each event object of ``path``'s ``traceEvents``, in file order; metadata goes into ``meta``.

    Raises :class:`TraceError` (one line) for a file that cannot be read as a trace; events before
    the fault have been yielded by then, so a caller may keep what it got and say what it lost.
    """
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with raw:
        src = _Chunks(path, raw)
        src.expect("{", "the top level")
        seen_events = False
        if src.peek() == "}":
            src.pos += 1
        else:
            while True:
                key = src.value("a key of the top level")
                if not isinstance(key, str):
                    raise TraceError(f"{path}: not a torch.profiler trace (a top-level key is no string)")
                src.expect(":", "the top level")
                if key == "traceEvents" and src.peek() == "[":
                    seen_events = True
                    src.pos += 1
                    yield from _events(src)
                else:
                    meta[key] = src.value(f"'{key}'")
                if src.expect(",}", "the top level") == "}":
                    break
        if not seen_events:
            raise TraceError(f"{path}: JSON without traceEvents; a torch.profiler trace was expected")


def _events(src: _Chunks) -> Iterator[dict[str, Any]]:
    """The objects of the ``traceEvents`` array (its '[' consumed), through its ']'.

    The fast path decodes an event and its separator inside the buffer; near the buffer's end it
    falls back on :meth:`_Chunks.value` and :meth:`_Chunks.expect`, which read more.
    """
    if src.peek() == "]":
        src.pos += 1
        return
    space, decode = _SPACE.match, _DECODER.raw_decode
    while True:
        buf = src.buf
        start = space(buf, src.pos).end()  # type: ignore[union-attr]
        try:
            event, end = decode(buf, start)
        except json.JSONDecodeError:
            end = len(buf)
        sep = space(buf, end).end() if end < len(buf) else len(buf)  # type: ignore[union-attr]
        if sep < len(buf) and buf[sep] in ",]":
            src.pos = sep + 1
            if isinstance(event, dict):
                yield event
            if buf[sep] == "]":
                return
            continue
        src.pos = start
        event = src.value("traceEvents")
        if isinstance(event, dict):
            yield event
        if src.expect(",]", "traceEvents") == "]":
            return


__all__ = ["CHUNK_BYTES", "MAX_VALUE_BYTES", "stream_trace"]
