"""The raw AMQP peer's frames: what it writes decodes (with proton's codec, independently) to the
performative and fields the spec orders, and what it reads is split and decoded whatever the reads'
boundaries."""

from __future__ import annotations

from proton import Array, Data, Described, symbol, ubyte, uint, ulong

from ackspec.conformance.rawamqp import (
    ATTACH,
    DISPOSITION,
    FLOW,
    RECEIVER,
    SASL_MECHANISMS,
    SOURCE,
    TARGET,
    FrameReader,
    Performative,
    outcome,
    state_name,
    symbols,
    terminus,
)
from ackspec.reference.amqp.framing import read_header


def _described(frame: bytes) -> tuple[int, Described, bytes]:
    header = read_header(frame)
    assert header.size == len(frame)
    data = Data()
    used = data.decode(frame[header.doff * 4:])
    data.rewind()
    data.next()
    value = data.get_object()
    assert isinstance(value, Described)
    return header.type, value, frame[header.doff * 4 + used:]


def test_a_ranged_disposition_is_encoded_in_the_specs_field_order() -> None:
    frame = Performative(DISPOSITION, [RECEIVER, uint(3), uint(7), True, outcome("released")], channel=2).encode()
    kind, value, rest = _described(frame)
    assert (kind, read_header(frame).channel, rest) == (0, 2, b"")
    assert value.descriptor == ulong(0x15)
    assert value.value[:4] == [True, 3, 7, True]
    assert state_name(value.value[4]) == "released"


def test_a_payload_follows_the_performative() -> None:
    _kind, value, rest = _described(Performative(0x14, [uint(0), uint(1), b"tag"], payload=b"\x00Sw\xa1\x01x").encode())
    assert value.descriptor == ulong(0x14) and rest == b"\x00Sw\xa1\x01x"


def test_a_sasl_frame_has_type_one() -> None:
    assert read_header(Performative(0x41, [symbol("ANONYMOUS")], sasl=True).encode()).type == 1


def test_a_source_carries_default_outcome_and_outcomes_as_descriptors() -> None:
    source = terminus(SOURCE, "/queue/q", default_outcome=outcome("modified", True), outcomes=["accepted", "released"])
    fields = source.value
    assert fields[0] == "/queue/q"
    assert state_name(fields[8]) == "modified" and fields[8].value == [True]
    assert isinstance(fields[9], Array)
    assert list(fields[9].elements) == [symbol("amqp:accepted:list"), symbol("amqp:released:list")]
    assert terminus(TARGET, None).descriptor == ulong(0x29)


def test_frames_read_over_any_read_boundaries() -> None:
    frames = [Performative(ATTACH, ["l", uint(5), RECEIVER, ubyte(0), ubyte(0), terminus(SOURCE, "a"), None]),
              Performative(FLOW, [uint(0), uint(10), uint(0), uint(10), uint(5), uint(0), uint(4)]),
              Performative(SASL_MECHANISMS, [symbols(["PLAIN"])], sasl=True)]
    stream = b"AMQP\x00\x01\x00\x00" + b"".join(f.encode() for f in frames) + b"\x00\x00\x00\x08\x02\x00\x00\x00"
    for step in (1, 3, 7, len(stream)):
        reader = FrameReader()
        units = [u for i in range(0, len(stream), step) for u in reader.feed(stream[i:i + step])]
        assert units[0] == b"AMQP\x00\x01\x00\x00"
        decoded = [u for u in units[1:] if isinstance(u, Performative)]
        assert [(p.code, p.sasl) for p in decoded] == [(ATTACH, False), (FLOW, False), (SASL_MECHANISMS, True)]
        assert decoded[0].field(1) == 5 and decoded[1].field(6) == 4 and decoded[0].field(9, "none") == "none"
        assert len(units) == 4  # the empty (heart-beat) frame is dropped
