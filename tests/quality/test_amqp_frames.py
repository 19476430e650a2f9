"""The frame-level AMQP mutants (tests/quality/amqp_frames.py), sans-IO: real proton-encoded frames in,
rewritten frames out, decoded again by a second proton transport."""

from __future__ import annotations

from dataclasses import dataclass

from proton import Collector, Connection, Data, Delivery, Described, Endpoint, Event, Link, Transport, uint

from ackspec.conformance.rawamqp import ATTACH, DISPOSITION, FLOW, RECEIVER, SENDER, TRANSFER, Performative, outcome
from ackspec.reference.amqp.framing import read_header

from .amqp_frames import EXTRA_CREDIT, FrameRewriter, SentCounts


def _pair() -> tuple[Connection, Transport, Connection, Transport, Collector]:
    client, server = Connection(), Connection()
    ct, st = Transport(), Transport(Transport.SERVER)
    ct.bind(client)
    st.bind(server)
    collector = Collector()
    server.collect(collector)
    return client, ct, server, st, collector


def _pump(src: Transport, dst: Transport, rewriter: FrameRewriter | None, piece: int = 7) -> None:
    """Move everything ``src`` has to ``dst``, in small pieces to exercise partial-frame buffering."""
    while (pending := src.pending()) > 0:
        data = src.peek(pending) or b""
        src.pop(len(data))
        for i in range(0, len(data), piece):
            chunk = data[i:i + piece]
            out = rewriter.feed(chunk) if rewriter is not None else chunk
            if out:
                dst.push(out)


def _server_events(collector: Collector) -> list[Event]:
    events = []
    while (event := collector.peek()) is not None:
        events.append(event)
        collector.pop()
    return events


@dataclass
class _Linked:
    ct: Transport
    st: Transport
    collector: Collector
    rewriter: FrameRewriter
    receiver: Link
    sender: Link


def _receiver_link(active: set[str]) -> _Linked:
    client, ct, server, st, collector = _pair()
    rewriter = FrameRewriter(lambda name: name in active)
    client.open()
    session = client.session()
    session.open()
    receiver = session.receiver("r")
    receiver.source.address = "q"
    receiver.open()
    _pump(ct, st, rewriter)
    _server_events(collector)
    server.open()
    ssn = server.session_head(0)
    assert ssn is not None
    ssn.open()
    sender = server.link_head(0)
    assert sender is not None
    sender.open()
    _pump(st, ct, None)
    return _Linked(ct, st, collector, rewriter, receiver, sender)


def test_flow_passes_unchanged_without_the_mutant() -> None:
    lk = _receiver_link(set())
    lk.receiver.flow(3)
    _pump(lk.ct, lk.st, lk.rewriter)
    assert lk.sender.credit == 3


def test_ignore_prefetch_inflates_link_credit() -> None:
    lk = _receiver_link({"ignore-prefetch"})
    lk.receiver.flow(3)
    _pump(lk.ct, lk.st, lk.rewriter)
    assert lk.sender.credit == 3 + EXTRA_CREDIT


def test_client_as_individual_shrinks_a_disposition_range_to_its_last_delivery() -> None:
    lk = _receiver_link({"client-as-individual"})
    lk.receiver.flow(3)
    _pump(lk.ct, lk.st, lk.rewriter)
    sent = []
    for i in range(3):
        dlv = lk.sender.delivery(str(i))
        lk.sender.send(b"x")
        lk.sender.advance()
        sent.append(dlv)
    _pump(lk.st, lk.ct, None)
    got = []
    while (cur := lk.receiver.current) is not None:
        lk.receiver.recv(cur.pending)
        lk.receiver.advance()
        got.append(cur)
    assert len(got) == 3
    for dlv in got:  # one cumulative acknowledgement: proton writes it as one range first=0 last=2
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
    _pump(lk.ct, lk.st, lk.rewriter)
    _server_events(lk.collector)
    assert [d.remote_state for d in sent] == [0, 0, Delivery.ACCEPTED]
    assert [d.settled for d in sent] == [False, False, True]


def test_non_amqp_bytes_and_session_frames_pass_through() -> None:
    client, ct, _server, st, _collector = _pair()
    rewriter = FrameRewriter(lambda _name: True)
    client.open()
    client.session().open()
    raw = ct.peek(ct.pending()) or b""
    assert rewriter.feed(raw) == raw  # header, open, begin: untouched even with every mutant on
    assert not st.condition
    assert client.state & Endpoint.LOCAL_ACTIVE


def _frame_fields(frame: bytes) -> list[object]:
    data = Data()
    data.decode(frame[read_header(frame).doff * 4:])
    data.rewind()
    data.next()
    value = data.get_object()
    assert isinstance(value, Described)
    return list(value.value)


def test_announced_not_final_drops_only_an_unsettled_dispositions_state() -> None:
    rewriter = FrameRewriter(lambda name: name == "announced-not-final")
    announced = Performative(DISPOSITION, [RECEIVER, 3, None, False, outcome("accepted")]).encode()
    settling = Performative(DISPOSITION, [RECEIVER, 3, None, True, outcome("released")]).encode()
    assert _frame_fields(rewriter.feed(announced))[4] is None
    assert rewriter.feed(settling) == settling


def test_credit_from_own_count_restates_a_flow_with_the_brokers_count() -> None:
    counts = SentCounts()
    rewriter = FrameRewriter(lambda name: name == "credit-from-own-count", counts)
    rewriter.feed(b"AMQP\x00\x01\x00\x00" + Performative(ATTACH, ["l", uint(7), RECEIVER]).encode())
    out = b"AMQP\x00\x01\x00\x00" + Performative(ATTACH, ["l", uint(0), SENDER, None, None, None, None, None, None,
                                                        uint(10)]).encode()
    out += b"".join(Performative(TRANSFER, [uint(0), uint(i), b"t"]).encode() for i in range(3))
    out += Performative(TRANSFER, [uint(0), None, None]).encode()  # a continuation frame: no new delivery
    counts.watch_output(out)
    assert counts.sender_count(7) == 13
    flow = Performative(FLOW, [uint(0), uint(100), uint(0), uint(100), uint(7), uint(11), uint(2)]).encode()
    assert _frame_fields(rewriter.feed(flow))[5] == 13
