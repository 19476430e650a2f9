"""STOMP codec: round trip, split invariance, limits, and fuzzing (no exception but StompProtocolError)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ackspec.reference.stomp.codec import FrameParser, StompProtocolError, encode, escape
from ackspec.reference.stomp.frames import CLIENT_COMMANDS, HEARTBEAT, SERVER_COMMANDS, Frame

from ._req import requirement

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
names = text.filter(lambda s: s not in {"", "content-length"})
versions = st.sampled_from(["1.1", "1.2"])


@st.composite
def frames(draw: st.DrawFn, version: str = "1.2") -> Frame:
    command = draw(st.sampled_from(sorted((CLIENT_COMMANDS | SERVER_COMMANDS) - {"CONNECT", "STOMP", "CONNECTED"})))
    headers = draw(st.lists(st.tuples(names, text), max_size=6))
    body = draw(st.binary(max_size=64))
    if b"\x00" in body or draw(st.booleans()):
        headers.append(("content-length", str(len(body))))
    return Frame(command, tuple(headers), body)


@requirement("STOMP-HEADER-ESCAPING")
@given(frames(), versions)
def test_round_trip(frame: Frame, version: str) -> None:
    parser = FrameParser(version=version)
    assert parser.feed(encode(frame, version)) == [frame]


@given(st.lists(frames(), min_size=1, max_size=4), st.data())
def test_any_split_parses_the_same(fs: list[Frame], data: st.DataObject) -> None:
    stream = b"".join(encode(f) + data.draw(st.sampled_from([b"", b"\n", b"\r\n"])) for f in fs)
    whole = FrameParser().feed(stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    parser = FrameParser()
    got: list[object] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        got += parser.feed(stream[prev:cut])
        prev = cut
    assert got == whole
    assert [x for x in got if isinstance(x, Frame)] == fs


def test_byte_by_byte_with_crlf_and_heartbeats() -> None:
    stream = b"\r\n\nSEND\r\ndestination:/queue/a\r\n\r\nbody\x00\n"
    parser = FrameParser()
    out: list[object] = []
    for i in range(len(stream)):
        out += parser.feed(stream[i : i + 1])
    assert out == [HEARTBEAT, HEARTBEAT, Frame("SEND", (("destination", "/queue/a"),), b"body"), HEARTBEAT]


def test_escaping_per_version() -> None:
    assert escape("a:b\nc\\d\re", "1.2") == "a\\cb\\nc\\\\d\\re"
    assert escape("a:b\re", "1.1") == "a\\cb\re"
    assert escape("a:b", "1.0") == "a:b"
    # CONNECT headers are never escaped
    assert encode(Frame("CONNECT", (("passcode", "a:b"),))) == b"CONNECT\npasscode:a:b\n\n\x00"
    f = FrameParser().feed(b"CONNECT\npasscode:a\\cb\n\n\x00")[0]
    assert isinstance(f, Frame) and f.get("passcode") == "a\\cb"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_unescape_every_short_sequence(version: str) -> None:
    """Every string of up to 6 characters over backslash, n, c, r, x and colon: value or error exactly as a
    reading from left to right gives (a backslash pair is one backslash; otherwise \\n, \\c, 1.2's \\r)."""
    table = {"\\": "\\", "n": "\n", "c": ":"} | ({"r": "\r"} if version == "1.2" else {})
    for size in range(7):
        for chars in itertools.product("\\ncrx:", repeat=size):
            value = "".join(chars)
            out, i, error = [], 0, None
            while i < len(value) and error is None:
                if value[i] != "\\":
                    out.append(value[i])
                elif value[i + 1 : i + 2] in table and i + 1 < len(value):
                    out.append(table[value[i + 1]])
                    i += 1
                else:
                    error = f"undefined escape sequence {value[i : i + 2]!r} in header"
                i += 1
            head = f"SEND\ndestination:/queue/a\nh:{value}\n\n\x00".encode()
            if error is None:
                assert FrameParser(version=version).feed(head)[0] == Frame(
                    "SEND", (("destination", "/queue/a"), ("h", "".join(out))))
            else:
                with pytest.raises(StompProtocolError, match=re.escape(error)):
                    FrameParser(version=version).feed(head)


def test_unescapable_connect_header_rejected() -> None:
    with pytest.raises(ValueError):
        encode(Frame("CONNECT", (("login", "a\nb"),)))


def test_repeated_header_first_wins() -> None:
    f = FrameParser().feed(b"MESSAGE\nfoo:1\nfoo:2\n\n\x00")[0]
    assert isinstance(f, Frame) and f.get("foo") == "1"


def test_content_length_body_with_nul() -> None:
    f = Frame("SEND", (("content-length", "3"),), b"a\x00b")
    assert FrameParser().feed(encode(f)) == [f]
    with pytest.raises(ValueError):
        encode(Frame("SEND", (), b"a\x00b"))
    assert FrameParser().feed(encode(Frame("SEND", (), b"a\x00b"), content_length=True))[0] == Frame(
        "SEND", (("content-length", "3"),), b"a\x00b"
    )


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"FOO\n\n\x00", "unknown command"),
        (b"send\n\n\x00", "unknown command"),
        (b"SEND\nnocolon\n\n\x00", "no colon"),
        (b"SEND\nfoo:a\\tb\n\n\x00", "escape"),
        (b"SEND\ncontent-length:x\n\n\x00", "content-length"),
        (b"SEND\ncontent-length:1\n\nab\x00", "NUL"),
        (b"\rX", "CR"),
        (b"SEND\nfoo:\xff\n\n\x00", "UTF-8"),
    ],
)
def test_malformed(data: bytes, fragment: str) -> None:
    parser = FrameParser()
    with pytest.raises(StompProtocolError, match=fragment):
        parser.feed(data)
    with pytest.raises(StompProtocolError):  # dead after an error
        parser.feed(b"\n")


def test_limits() -> None:
    with pytest.raises(StompProtocolError, match="too many headers"):
        FrameParser(max_headers=2).feed(b"SEND\na:1\nb:2\nc:3\n\n\x00")
    with pytest.raises(StompProtocolError, match="larger than"):
        FrameParser(max_frame=100).feed(b"SEND\n\n" + b"x" * 200)
    with pytest.raises(StompProtocolError, match="larger than"):
        FrameParser(max_frame=100).feed(b"SEND\ncontent-length:1000\n\n")
    with pytest.raises(StompProtocolError, match="header line longer"):
        FrameParser(max_header_length=10).feed(b"SEND\nabcdefghijklmnop")
    with pytest.raises(StompProtocolError):
        FrameParser(max_frame=1000).feed(b"SEND\n" + b"a:b\n" * 400)


@settings(max_examples=300)
@given(st.binary(max_size=200))
@example(b"\x00")
@example(b"SEND\n\n\x00\r")
def test_fuzz_random_bytes(data: bytes) -> None:
    parser = FrameParser(max_frame=150, max_headers=5, max_header_length=40)
    try:
        parser.feed(data)
    except StompProtocolError as exc:
        assert exc.message


@settings(max_examples=300)
@given(frames(), st.data())
def test_fuzz_mutated_frames(frame: Frame, data: st.DataObject) -> None:
    raw = bytearray(encode(frame))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    parser = FrameParser(max_frame=1000)
    try:
        for x in parser.feed(bytes(raw)):
            assert isinstance(x, (Frame, type(HEARTBEAT)))
    except StompProtocolError:
        pass


class _EagerCompactingParser(FrameParser):
    """Compacts its buffer as soon as anything was consumed, to exercise that path on small inputs."""

    _COMPACT_AT = 1


def _feed_in(parser: FrameParser, stream: bytes, cuts: list[int]) -> list[object]:
    got: list[object] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        got += parser.feed(stream[prev:cut])
        prev = cut
    return got


@given(st.lists(frames(), min_size=1, max_size=6), st.data())
def test_buffered_bytes_do_not_change_the_result(fs: list[Frame], data: st.DataObject) -> None:
    """Feeding everything at once, in slices, or with compaction after every frame gives the same items."""
    stream = b"".join(encode(f) + data.draw(st.sampled_from([b"", b"\n", b"\r\n"])) for f in fs)
    whole = FrameParser().feed(stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    assert _feed_in(FrameParser(), stream, cuts) == whole
    compacting = _EagerCompactingParser()
    assert _feed_in(compacting, stream, cuts) == whole
    assert compacting.buffered == 0


@pytest.mark.parametrize("slice_size", [1, 7, 1024, 65536, 1 << 30])
def test_large_stream_any_slice_size(slice_size: int) -> None:
    """~600 KiB of frames (past the compaction threshold), with and without content-length."""
    frames_in = [Frame("MESSAGE", (("subscription", "s"), ("message-id", str(i)), ("content-length", "100")),
                       bytes([i % 251 + 1]) * 100) if i % 2 else
                 Frame("SEND", (("destination", f"/queue/q{i}"),), b"x" * (i % 300)) for i in range(4000)]
    stream = b"".join(encode(f) for f in frames_in)
    if slice_size == 1:
        stream = stream[:20000]  # byte by byte is slow; the prefix still crosses many frames
    parser = FrameParser()
    got: list[object] = []
    for start in range(0, len(stream), slice_size):
        got += parser.feed(stream[start:start + slice_size])
    expected = FrameParser().feed(stream)
    assert got == expected
    if slice_size != 1:
        assert got == frames_in
        assert parser.buffered == 0


def test_buffered_counts_an_incomplete_frame() -> None:
    parser = FrameParser()
    assert parser.feed(b"SEND\ndestination:/queue/a\n\nab") == []
    assert parser.buffered == 2  # the headers are consumed once parsed; the body waits for its NUL
    assert parser.feed(b"c\x00SEND\n") == [Frame("SEND", (("destination", "/queue/a"),), b"abc")]
    assert parser.buffered == 5


def test_limits_apply_to_unconsumed_bytes_only() -> None:
    """Many small frames in one feed never trip the frame or header limits by their total size."""
    frame = encode(Frame("SEND", (("destination", "/queue/a"),), b"x" * 50))
    parser = FrameParser(max_frame=200, max_headers=2, max_header_length=40)
    assert len(parser.feed(frame * 1000)) == 1000
    with pytest.raises(StompProtocolError, match="larger than"):
        parser.feed(b"SEND\n\n" + b"x" * 300)
