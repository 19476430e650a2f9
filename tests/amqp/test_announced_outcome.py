"""An outcome announced in an unsettled disposition is final (AMQP 1.0 2.7.5), even when the settling
disposition that follows with another outcome arrives in the same read: the listener cuts its input
after the announcement (reference/amqp/announced.py), so proton's latest-state-only delivery never
hides it."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, uint
from tests.amqp.conftest import RunningBroker

from ackspec.conformance.rawamqp import (
    DISPOSITION,
    FLOW,
    RECEIVER,
    SENDER,
    SOURCE,
    TARGET,
    TRANSFER,
    Performative,
    RawAmqp,
    outcome,
    terminus,
)
from ackspec.reference.amqp.announced import DISPOSITION_BODY, AnnouncedOutcomes
from ackspec.reference.amqp.framing import HEADER, pack_frame


def _disposition(first: int, *, settled: bool, state: str | None) -> bytes:
    return Performative(DISPOSITION, [RECEIVER, uint(first), None, settled,
                                      None if state is None else outcome(state)]).encode()


def test_cut_after_each_unsettled_disposition_with_a_state() -> None:
    announce, settle = _disposition(4, settled=False, state="accepted"), _disposition(4, settled=True, state="released")
    plain = _disposition(5, settled=True, state="accepted")
    data = plain + announce + settle
    assert AnnouncedOutcomes().cuts(data) == [len(plain) + len(announce)]
    # no state, or settled: nothing to protect
    assert AnnouncedOutcomes().cuts(_disposition(4, settled=False, state=None) + settle) == []


@pytest.mark.parametrize("split", [1, 5, 12])
def test_an_announcement_split_across_reads_is_cut_in_the_second(split: int) -> None:
    announce, settle = _disposition(4, settled=False, state="rejected"), _disposition(4, settled=True, state="accepted")
    cutter = AnnouncedOutcomes()
    assert cutter.cuts(b"\x00" * 200 + announce[:split]) == []
    assert cutter.cuts(announce[split:] + settle) == [len(announce) - split]


FRAMES = st.sampled_from([("announce", True), ("settle", False), ("stateless", False), ("transfer", False)])


def _frame(kind: str, n: int) -> bytes:
    if kind == "transfer":  # a payload that holds the disposition descriptor's bytes
        return Performative(TRANSFER, [uint(0), uint(n), b"t"], payload=b"\x00\x53\x15" * 3).encode()
    return _disposition(n, settled=kind != "announce", state=None if kind == "stateless" else "accepted")


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(FRAMES, min_size=1, max_size=12), reads=st.lists(st.integers(1, 120), min_size=1))
def test_cuts_fall_exactly_after_each_announcement_whatever_the_reads(kinds: list[tuple[str, bool]],
                                                                       reads: list[int]) -> None:
    stream, wanted, at = b"", set(), 0
    for n, (kind, announces) in enumerate(kinds):
        stream += _frame(kind, n)
        if announces:
            wanted.add(len(stream))
    cutter, ends, cuts = AnnouncedOutcomes(), set(), set()
    for size in [*reads, len(stream)]:
        piece = stream[at:at + size]
        if not piece:
            break
        cuts |= {at + c for c in cutter.cuts(piece)}
        at += len(piece)
        ends.add(at)
    assert cuts == wanted - ends  # a cut at the end of a read is no cut: the read ends there anyway


STATES = st.sampled_from([None, "accepted", "released", "modified", "rejected"])
NUMBERS = st.one_of(st.integers(0, 0), st.integers(1, 255), st.integers(256, 2**32 - 1))  # uint0, smalluint, uint


def _as_list8(frame: bytes) -> bytes:
    """The disposition ``frame`` (proton's codec writes a list32) with its fields in a list8, as proton's engine
    and most clients write a small performative."""
    body = frame[HEADER.size:]
    assert body[:4] == DISPOSITION_BODY + b"\xd0"
    count, items = body[11], body[12:]
    return pack_frame(DISPOSITION_BODY + b"\xc0" + bytes([len(items) + 1, count]) + items)


@settings(max_examples=300, deadline=None)
@given(role=st.booleans(), first=NUMBERS, last=st.one_of(st.none(), NUMBERS),
       settled=st.sampled_from([None, True, False]), state=STATES,
       batchable=st.sampled_from([(), (None,), (True,), (False,)]), list8=st.booleans())
def test_a_disposition_is_cut_after_when_and_only_when_it_is_unsettled_with_a_state(
        role: bool, first: int, last: int | None, settled: bool | None, state: str | None,
        batchable: tuple[bool | None, ...], list8: bool) -> None:
    """Every encoding of a disposition's fields proton writes, in a list8 or a list32 (the scan tells most
    dispositions from their bytes before any full decode): a cut after it exactly when it announces an outcome."""
    frame = Performative(DISPOSITION, [role, uint(first), None if last is None else uint(last), settled,
                                       None if state is None else outcome(state), *batchable]).encode()
    frame = _as_list8(frame) if list8 else frame
    settle = _disposition(first, settled=True, state="released")
    announces = state is not None and not settled
    assert AnnouncedOutcomes().cuts(frame + settle) == ([len(frame)] if announces else [])


def test_message_bytes_that_look_like_a_disposition_are_no_frame() -> None:
    assert AnnouncedOutcomes().cuts(b"\x00\x53\x15" * 5 + b"\xff" * 40) == []


@pytest.mark.parametrize(("first", "second", "kept"), [("accepted", "released", False), ("released", "accepted", True),
                                                       ("rejected", "released", False)])
def test_the_announced_outcome_holds_over_a_later_one(broker: RunningBroker, first: str, second: str,
                                                      kept: bool) -> None:
    address = f"/queue/announced.{uuid.uuid4().hex[:8]}"
    raw = RawAmqp(broker.host, broker.port, timeout=5.0)
    raw.open("announced")
    raw.attach("in", 0, SENDER, terminus(SOURCE, None), terminus(TARGET, address))
    assert raw.read_until(lambda p: p.code == FLOW) is not None
    raw.transfer(0, 0, b"t", Message(body="x").encode())
    assert raw.read_until(lambda p: p.code == DISPOSITION) is not None
    raw.attach("out", 1, RECEIVER, terminus(SOURCE, address), terminus(TARGET, None))
    raw.flow(1, 0, 1)
    transfer = raw.read_until(lambda p: p.code == TRANSFER)
    assert transfer is not None and transfer.code == TRANSFER
    delivery = int(transfer.field(1))
    # both dispositions in one write: one read on the broker's side
    raw.write(_disposition(delivery, settled=False, state=first) + _disposition(delivery, settled=True, state=second))
    raw.close()
    again = RawAmqp(broker.host, broker.port, timeout=2.0)
    again.open("announced-check")
    again.attach("check", 0, RECEIVER, terminus(SOURCE, address), terminus(TARGET, None))
    again.flow(0, 0, 1)
    back = again.read_until(lambda p: p.code == TRANSFER)
    again.close()
    assert (back is not None and back.code == TRANSFER) is kept
