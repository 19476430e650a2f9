"""The raw AMQP peer (:mod:`ackspec.conformance.rawamqp`) as the suite's tests use it: opened on the
target's endpoint and credentials, receiving on links it attaches, and recording what it receives and
settles in the test's history, so the history checks see those messages consumed (or given back).

Messages are sent by the recorded proton client (``harness.send_seq``); the raw peer only receives and
settles them with the frames proton cannot write.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from proton import Message

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AckMode, Indeterminate, NackOutcome, NotSupported
from ackspec.conformance.harness import Harness
from ackspec.conformance.rawamqp import (
    ATTACH,
    CLOSE,
    DETACH,
    END,
    RECEIVER,
    SENDER,
    SOURCE,
    TARGET,
    TRANSFER,
    Performative,
    RawAmqp,
    terminus,
)
from ackspec.conformance.suite.amqp.support import AMQP
from ackspec.history import PRODUCER_HEADER, SEQ_HEADER, Op

RAW_PROCESS = "raw"
"""The history's name for the raw peer's connection."""
NACK_OUTCOMES = {"released": NackOutcome.RELEASED, "modified": NackOutcome.MODIFIED_FAILED,
                 "rejected": NackOutcome.REJECTED}
"""How the history names a settlement with each outcome other than accepted."""
BARRIER_HANDLES = 100
"""Our handles from here up are the round trips' (:func:`round_trip`); a test's own links use those below."""
COMES_BACK = frozenset({"released", "modified"})
"""Outcomes after which the message is available again (3.4.4, 3.4.5); accepted retires it and rejected
takes it off the queue (dead-lettered or dropped, 3.4.3)."""


Links = dict[int, str]
"""The queue each receiving link takes from, by the target's handle for the link (the handle its transfers
and flows carry: each end of a link chooses its own, 2.6.2)."""


@dataclass(frozen=True, slots=True)
class RawDelivery:
    """One transfer the raw peer received: its link (the target's handle), delivery-id and the message's
    ackspec headers."""

    handle: int
    delivery_id: int
    seq: int | None
    producer: str | None
    frame: Performative


def _number(value: Any) -> int | None:
    with contextlib.suppress(TypeError, ValueError):
        return None if value is None or isinstance(value, bool) else int(value)
    return None


def delivery_of(frame: Performative) -> RawDelivery:
    """The delivery a (single-frame) transfer carries."""
    message = Message()
    message.decode(bytes(frame.payload))
    props: dict[Any, Any] = message.properties or {}
    producer = props.get(PRODUCER_HEADER)
    return RawDelivery(int(frame.field(0)), int(frame.field(1)), _number(props.get(SEQ_HEADER)),
                       None if producer is None else str(producer), frame)


@contextlib.contextmanager
def raw_amqp(harness: Harness) -> Iterator[RawAmqp]:
    """A raw connection to the target, SASL'd, opened and begun; closed when the block ends. Not-applicable
    on a target not driven over AMQP 1.0 or over TLS; a target that refuses the connection is a failure."""
    adapter = harness.adapter
    if adapter.protocol != AMQP or not isinstance(adapter, ProtonAdapter):
        raise NotSupported(AMQP, f"{adapter.name} does not speak AMQP 1.0")
    opts = adapter.options
    if opts.tls:
        raise NotSupported(AMQP, "the raw AMQP peer speaks plain TCP only (amqps:// target)")
    raw = RawAmqp(opts.host, opts.port, timeout=harness.timeout, user=opts.user, password=opts.password)
    try:
        raw.open(f"ackspec-raw-{uuid.uuid4().hex[:8]}")
        yield raw
    finally:
        raw.close()


def address(harness: Harness, destination: str) -> tuple[str, list[str]]:
    """The node address and terminus capabilities of a ``/queue/x`` destination, as the driver sends them."""
    adapter = harness.adapter
    assert isinstance(adapter, ProtonAdapter)
    node, capability = adapter.options.terminus(destination)
    return node, [capability] if capability else []


def attach_receiver(harness: Harness, raw: RawAmqp, destination: str, handle: int, *,
                    default_outcome: Any = None, outcomes: tuple[str, ...] = ()) -> Performative:
    """A receiver link on ``destination`` (no credit yet); returns the target's attach. A refusal or no
    answer is an assertion failure naming what came."""
    node, caps = address(harness, destination)
    answer = raw.attach(f"ackspec-raw-{handle}-{uuid.uuid4().hex[:6]}", handle, RECEIVER,
                        terminus(SOURCE, node, capabilities=caps, default_outcome=default_outcome,
                                 outcomes=outcomes), terminus(TARGET, None))
    if answer is None or answer.code != ATTACH or answer.field(5) is None:
        raise AssertionError(f"raw attach of a receiver on {node} was answered with "
                             f"{'nothing' if answer is None else f'{answer.name} {answer.fields}'}")
    return answer


def attach_sender(harness: Harness, raw: RawAmqp, destination: str, handle: int) -> Performative:
    """A sender link to ``destination``; returns the target's attach (or raises as :func:`attach_receiver`)."""
    node, caps = address(harness, destination)
    answer = raw.attach(f"ackspec-raw-{handle}-{uuid.uuid4().hex[:6]}", handle, SENDER,
                        terminus(SOURCE, None), terminus(TARGET, node, capabilities=caps))
    if answer is None or answer.code != ATTACH or answer.field(6) is None:
        raise AssertionError(f"raw attach of a sender to {node} was answered with "
                             f"{'nothing' if answer is None else f'{answer.name} {answer.fields}'}")
    return answer


def ended(frame: Performative | None) -> bool:
    """The peer ended the link, session or connection (2.6.5, 2.5.4, 2.4.3)."""
    return frame is not None and frame.code in (DETACH, END, CLOSE)


def receive(harness: Harness, raw: RawAmqp, links: Links, count: int,
            flows: list[Performative] | None = None) -> list[RawDelivery]:
    """Read until ``count`` transfers came (fewer when the stream ends, the target ends one of the
    ``links``, the session, or the timeout passes), recording each in the history; the other frames
    read go to ``flows``."""
    got: list[RawDelivery] = []
    while len(got) < count:
        frame = raw.read_until(lambda p: p.code in (TRANSFER, END) or (p.code == DETACH and p.field(0) in links),
                               into=flows)
        if frame is None or frame.code != TRANSFER:
            break
        delivery = delivery_of(frame)
        got.append(delivery)
        record_receive(harness, links[delivery.handle], delivery)
    return got


def record_receive(harness: Harness, destination: str, d: RawDelivery) -> None:
    pending = harness.recorder.invoke(Op.RECEIVE, RAW_PROCESS, destination=destination,
                                      subscription=f"raw-{d.handle}", ack_mode=str(AckMode.CLIENT_INDIVIDUAL))
    pending.ok(seq=d.seq, producer=d.producer, ack_id=str(d.delivery_id), destination=destination)


def record_settled(harness: Harness, destination: str, d: RawDelivery, outcome: str) -> None:
    """Record the settlement of ``d`` with ``outcome`` (a name of the catalogue's outcome domain)."""
    fields: dict[str, Any] = {"destination": destination, "subscription": f"raw-{d.handle}", "seq": d.seq,
                              "ack_id": str(d.delivery_id)}
    if outcome == "accepted":
        harness.recorder.invoke(Op.ACK, RAW_PROCESS, **fields).ok()
    else:
        harness.recorder.invoke(Op.NACK, RAW_PROCESS, outcome=str(NACK_OUTCOMES[outcome]), **fields).ok()


def round_trip(harness: Harness, raw: RawAmqp, destination: str, handle: int, flows: list[Performative],
               links: Links | None = None) -> list[RawDelivery]:
    """A barrier: attach a sender link ``handle`` to ``destination`` and wait for the target's answer,
    then detach it. Returns the transfers that came before the answer (recorded); the other frames go
    to ``flows``. No answer is indeterminate: the target may still send what the barrier waited for."""
    node, caps = address(harness, destination)
    before: list[Performative] = []
    answer = raw.attach(f"ackspec-raw-rt-{uuid.uuid4().hex[:6]}", handle, SENDER, terminus(SOURCE, None),
                        terminus(TARGET, node, capabilities=caps), into=before)
    if answer is None:
        raise Indeterminate("the target did not answer a round-trip attach within the timeout")
    if answer.code == ATTACH:
        raw.detach(handle)
    else:  # the target ended the session or connection: nothing more comes on it
        before.append(answer)
    got = []
    for frame in before:
        if frame.code == TRANSFER:
            got.append(delivery_of(frame))
            record_receive(harness, (links or {}).get(got[-1].handle, destination), got[-1])
        else:
            flows.append(frame)
    return got


def detached(harness: Harness, raw: RawAmqp, links: Links, handle: int,
             flows: list[Performative]) -> list[RawDelivery]:
    """The last barrier on our receiving link ``handle``: detach it (closed) and read until the target's
    detach. Every transfer the target sent on the link comes before that detach, since after it the link's
    handle is gone (2.6.5), however late its dispatch sent them: unlike :func:`round_trip` (an attach on
    another link, which a target may answer before transfers an earlier flow caused). Returns the transfers
    that came (recorded; left unsettled, so the target gives them back when the link closes); the other
    frames go to ``flows``. No answer is indeterminate."""
    theirs = set(links)
    raw.detach(handle)
    got: list[RawDelivery] = []
    while True:
        frame = raw.read_until(lambda p: p.code in (TRANSFER, END) or (p.code == DETACH and p.field(0) in theirs),
                               into=flows)
        if frame is None:
            raise Indeterminate("the target did not answer the detach of a receiving link within the timeout")
        if frame.code != TRANSFER:
            flows.append(frame)
            return got
        got.append(delivery_of(frame))
        record_receive(harness, links[got[-1].handle], got[-1])
