"""Sans-IO STOMP framing: bytes in, :class:`Frame` values out, and back.

Why sans-IO: the same parser serves the reference broker, the reference client and the
benchmark, and is tested byte by byte without sockets (the h11 approach).

Parsing (:class:`FrameParser`) is incremental: :meth:`FrameParser.feed` accepts any split of
the stream and returns the frames (and :data:`~.frames.HEARTBEAT` markers for end-of-lines
between frames) completed so far. Malformed input raises :class:`StompProtocolError`, and
nothing else; after an error the parser is dead and re-raises the same error. Limits bound
memory: ``max_frame`` (bytes of a whole frame, headers plus body), ``max_headers`` (header
count) and ``max_header_length`` (bytes of one header line or of the command line).

Header escaping depends on the version (STOMP 1.2 "Value Encoding"): none in 1.0;
``\\\\ \\n \\c`` in 1.1; also ``\\r`` in 1.2; never in CONNECT/STOMP/CONNECTED frames.
Set :attr:`FrameParser.version` after negotiation (the broker session does).

Bodies end at the first NUL unless a ``content-length`` header gives their exact size;
EOL is ``\\n``, or ``\\r\\n`` in 1.2 (and in CONNECT frames, before a version is agreed).
"""

from __future__ import annotations

import re
from typing import Final

from ackspec.reference.stomp.frames import (
    ALL_COMMANDS,
    HEARTBEAT,
    UNESCAPED_COMMANDS,
    Frame,
    HeartBeat,
)

_new = tuple.__new__
"""Builds a :class:`Frame` without its Python-level ``__new__`` (once per frame parsed)."""

DEFAULT_MAX_FRAME: Final = 4 * 1024 * 1024
DEFAULT_MAX_HEADERS: Final = 100
DEFAULT_MAX_HEADER_LENGTH: Final = 8192


class StompProtocolError(Exception):
    """Malformed or over-limit STOMP input. ``message`` is meant for an ERROR frame."""

    def __init__(self, message: str, *, frame: Frame | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame
        """The offending frame when it was parsed completely (e.g. a semantic error)."""


_UNESCAPE_11: Final = {"\\": "\\", "n": "\n", "c": ":"}
_UNESCAPE_12: Final = {**_UNESCAPE_11, "r": "\r"}
_ESCAPE_SEQUENCE: Final = re.compile(r"\\(.?)", re.DOTALL)
"""A backslash and the character after it (none at the end of the value: an error too)."""


def _unescape(value: str, version: str) -> str:
    if "\\" not in value:
        return value
    # Split at escaped backslashes; what is left of each piece is single backslashes, each of which must start
    # \n, \c (or \r in 1.2). Plain replaces (C calls) do it; a stray backslash gets the exact error below.
    pieces = value.split("\\\\")
    for i, piece in enumerate(pieces):
        if "\\" in piece:
            done = piece.replace("\\n", "\n").replace("\\c", ":")
            if version == "1.2":
                done = done.replace("\\r", "\r")
            if "\\" in done:
                return _unescape_or_raise(value, version)
            pieces[i] = done
    return "\\".join(pieces)


def _unescape_or_raise(value: str, version: str) -> str:
    table = _UNESCAPE_12 if version == "1.2" else _UNESCAPE_11

    def one(match: re.Match[str]) -> str:
        repl = table.get(match.group(1))
        if repl is None:
            raise StompProtocolError(f"undefined escape sequence {match.group(0)!r} in header")
        return repl

    return _ESCAPE_SEQUENCE.sub(one, value)


def escape(value: str, version: str) -> str:
    """Escape a header name or value for ``version`` (no-op for 1.0)."""
    if version == "1.0":
        return value
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\n" in value:
        value = value.replace("\n", "\\n")
    if ":" in value:
        value = value.replace(":", "\\c")
    if version == "1.2" and "\r" in value:
        value = value.replace("\r", "\\r")
    return value


def _needs_escape(value: str) -> bool:
    return "\\" in value or "\n" in value or ":" in value or "\r" in value


def encode(frame: Frame, version: str = "1.2", *, content_length: bool = False) -> bytes:
    """Serialise ``frame`` for ``version``.

    Headers are written exactly as given (escaped as the version requires). With
    ``content_length=True`` a ``content-length`` header is added when the frame has none;
    a body containing NUL without ``content-length`` raises ``ValueError`` (it could not
    be parsed back).
    """
    parts: list[str] = [frame.command, "\n"]
    plain = version == "1.0" or frame.command in UNESCAPED_COMMANDS
    has_length = False
    for name, value in frame.headers:
        if name == "content-length":
            has_length = True
        if plain:
            if "\n" in value or "\n" in name or ":" in name or "\r" in name or not name:
                raise ValueError(f"header {name!r} cannot be written unescaped in {frame.command}/{version}")
            parts += (name, ":", value, "\n")
        elif not (_needs_escape(name) or _needs_escape(value)):
            parts += (name, ":", value, "\n")
        else:
            parts += (escape(name, version), ":", escape(value, version), "\n")
    body = frame.body
    if content_length and not has_length:
        parts += ("content-length:", str(len(body)), "\n")
        has_length = True
    elif not has_length and b"\x00" in body:
        raise ValueError("a body containing NUL needs a content-length header")
    if "\n" in frame.command or frame.command == "":
        raise ValueError(f"invalid command {frame.command!r}")
    parts.append("\n")
    return "".join(parts).encode() + body + b"\x00"


def _after_crlf(buf: bytearray, pos: int) -> int:
    """The position after the CR LF at ``pos`` (a heart-beat EOL); a CR without its LF is malformed."""
    if buf[pos + 1] != 0x0A:
        raise StompProtocolError("malformed frame: CR not followed by LF")
    return pos + 2


class FrameParser:
    """Incremental STOMP parser with limits. See the module docstring.

    Why index-based: received bytes are appended to one ``bytearray`` and frames are cut out
    of it by an offset (``_pos``) that only moves forward; searches for the end of the
    headers or for the NUL resume where the previous search stopped (``_scan``). Nothing is
    deleted from the front per frame, so feeding 64 KiB at once costs the same per frame as
    feeding 1 KiB slices; consumed bytes are dropped ("compacted") only when they outweigh
    what is left, which keeps the copying linear overall.
    """

    _COMPACT_AT: Final = 64 * 1024

    def __init__(
        self,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_headers: int = DEFAULT_MAX_HEADERS,
        max_header_length: int = DEFAULT_MAX_HEADER_LENGTH,
        version: str = "1.2",
        commands: frozenset[str] = ALL_COMMANDS,
    ) -> None:
        self.max_frame = max_frame
        self.max_headers = max_headers
        self.max_header_length = max_header_length
        self.version = version
        self.commands = commands
        self._buf = bytearray()
        self._pos = 0  # start of the unconsumed bytes in _buf
        self._scan = 0  # absolute index where the search for the end of headers / the NUL resumes
        self._error: StompProtocolError | None = None
        # Pending frame whose headers are parsed (and consumed) and whose body starts at _pos.
        self._pending: tuple[str, tuple[tuple[str, str], ...], int | None] | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame (headers of a pending frame excluded)."""
        return len(self._buf) - self._pos

    @property
    def idle(self) -> bool:
        """Between frames: nothing buffered, no frame half parsed, no error. Bytes that form one
        whole frame would then be parsed on their own (a caller may recognise such a frame itself)."""
        return self._pos == len(self._buf) and self._pending is None and self._error is None

    def feed(self, data: bytes) -> list[Frame | HeartBeat]:
        """Add ``data``; return every frame completed so far (may be empty)."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        if pos:
            if pos == len(buf):  # everything consumed: start over (the common case)
                buf.clear()
                self._scan = self._pos = 0
            elif pos >= self._COMPACT_AT and pos * 2 >= len(buf):  # copy at most what was consumed
                del buf[:pos]
                self._scan -= pos
                self._pos = 0
        if data:
            buf += data
        out: list[Frame | HeartBeat] = []
        try:
            self._parse(out)
        except StompProtocolError as exc:
            self._error = exc
            raise
        except Exception as exc:  # defensive: the contract is "only StompProtocolError"
            self._error = StompProtocolError(f"malformed frame ({type(exc).__name__})")
            raise self._error from exc
        return out

    def _parse(self, out: list[Frame | HeartBeat]) -> None:
        buf = self._buf
        n = len(buf)
        pos = self._pos
        append = out.append
        try:
            while True:
                if self._pending is None:
                    if pos >= n:
                        return
                    first = buf[pos]
                    if first == 0x0A:  # heart-beat EOL
                        pos += 1
                        append(HEARTBEAT)
                        continue
                    if first == 0x0D:
                        if pos + 1 >= n:
                            return
                        pos = _after_crlf(buf, pos)
                        append(HEARTBEAT)
                        continue
                    scan = self._scan if self._scan > pos else pos
                    end = buf.find(b"\n\n", scan)
                    # bounded search: scanning the whole buffer for CRLF per frame would be quadratic
                    end_crlf = buf.find(b"\n\r\n", scan, end + 1 if end >= 0 else n)
                    if end < 0 and end_crlf < 0:
                        self._incomplete_head(pos, n)
                        return
                    if end < 0 or (0 <= end_crlf < end):
                        head_end, body_start = end_crlf, end_crlf + 3
                    else:
                        head_end, body_start = end, end + 2
                    if body_start - pos > self.max_frame:
                        raise StompProtocolError(f"frame larger than {self.max_frame} bytes")
                    self._parse_head(buf[pos:head_end])
                    pos = self._scan = body_start
                command, headers, length = self._pending  # type: ignore[misc]
                if length is not None:
                    stop = pos + length
                    if n <= stop:
                        return
                    if buf[stop] != 0:
                        raise StompProtocolError("frame body not terminated by NUL after content-length bytes")
                else:
                    stop = buf.find(b"\x00", self._scan if self._scan > pos else pos)
                    if stop < 0:
                        if n - pos > self.max_frame:
                            raise StompProtocolError(f"frame larger than {self.max_frame} bytes")
                        self._scan = n
                        return
                append(_new(Frame, (command, headers, bytes(buf[pos:stop]))))
                self._pending = None
                pos = self._scan = stop + 1
        finally:
            self._pos = pos

    def _incomplete_head(self, pos: int, n: int) -> None:
        """No end of headers yet: enforce the limits on what is buffered, remember where to resume."""
        buf = self._buf
        limit = min(self.max_frame, (self.max_headers + 1) * (self.max_header_length + 2))
        if n - pos > limit:
            raise StompProtocolError(
                f"frame headers exceed the limit ({self.max_frame} bytes / {self.max_headers} headers)"
            )
        nl = buf.rfind(b"\n", pos)
        tail = n - (nl + 1 if nl >= 0 else pos)
        if tail > self.max_header_length:
            raise StompProtocolError(f"header line longer than {self.max_header_length} bytes")
        self._scan = max(pos, n - 2)

    def _parse_head(self, head: bytes | bytearray) -> None:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            raise StompProtocolError("frame headers are not valid UTF-8") from None
        lines = text.split("\n")
        command = lines[0].removesuffix("\r")
        if len(command) > self.max_header_length:
            raise StompProtocolError("command line too long")
        if command not in self.commands:
            shown = command if len(command) <= 40 else command[:40] + "..."
            raise StompProtocolError(f"unknown command {shown!r}")
        if len(lines) - 1 > self.max_headers:
            raise StompProtocolError(f"too many headers (limit {self.max_headers})")
        version = self.version
        # Unescaping is needed only when a backslash occurs at all (rare): one test per frame.
        unescape = "\\" in text and not (version == "1.0" or command in UNESCAPED_COMMANDS)
        # CR is part of EOL only since 1.2 (and in CONNECT frames): strip it only when present.
        crlf = "\r" in text and (version == "1.2" or command in UNESCAPED_COMMANDS)
        max_len = self.max_header_length
        check_len = len(text) > max_len  # otherwise no line can be too long
        headers: list[tuple[str, str]] = []
        length: int | None = None
        for raw in lines[1:]:
            line = raw.removesuffix("\r") if crlf else raw
            if check_len and len(line) > max_len:
                raise StompProtocolError(f"header line longer than {max_len} bytes")
            name, sep, value = line.partition(":")
            if not sep:
                raise StompProtocolError(f"malformed header line (no colon): {line[:40]!r}")
            if not name:
                raise StompProtocolError("malformed header line (empty name)")
            if unescape:  # per header only where a backslash is (clients escape few values, e.g. "ID\\c...")
                if "\\" in name:
                    name = _unescape(name, version)
                if "\\" in value:
                    value = _unescape(value, version)
            if name == "content-length" and length is None:
                length = self._content_length(value)
            headers.append((name, value))
        self._pending = (command, tuple(headers), length)

    def _content_length(self, value: str) -> int:
        if not value.isdigit() or not value.isascii():
            raise StompProtocolError(f"invalid content-length {value[:20]!r}")
        length = int(value)
        if length > self.max_frame:
            raise StompProtocolError(f"frame larger than {self.max_frame} bytes")
        return length


def parse_all(data: bytes, **kwargs: object) -> list[Frame | HeartBeat]:
    """Parse a complete byte string (convenience for tests and tools)."""
    parser = FrameParser(**kwargs)  # type: ignore[arg-type]
    return parser.feed(data)
