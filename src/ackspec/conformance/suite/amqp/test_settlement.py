"""Settlement: sender settle modes (pre-settled vs unsettled), receiver settle modes first/second.

A receiver link asked for ``snd-settle-mode=settled`` must get pre-settled transfers and one
asked for ``unsettled`` must get unsettled ones (or the broker must say otherwise at attach);
pre-settled sends are at most once, unsettled sends with an ``accepted`` outcome at least once.
"""

from __future__ import annotations

import pytest
from proton import Link

from ackspec.adapters.base import AckMode, AdapterError, Capability, Indeterminate, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.amqp.support import amqp_client, settled_on_arrival
from ackspec.conformance.verdicts import Checks, check, violation

requirement = pytest.mark.requirement


@requirement("AMQP-2.8.2-SND-SETTLE-MODES", "AMQP-2.7.5-SETTLED-FLAG", "AMQP-2.7.3-SETTLE-MODE-NEGOTIATION")
def test_settled_and_unsettled_receiver_links(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_AUTO, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q_settled, q_unsettled = harness.queue("settled"), harness.queue("unsettled")
    pre = c.subscribe(q_settled, ack=AckMode.AUTO)  # snd-settle-mode=settled
    uns = c.subscribe(q_unsettled, ack=AckMode.CLIENT_INDIVIDUAL)  # snd-settle-mode=unsettled
    harness.send_seq(c, q_settled, range(3))
    harness.send_seq(c, q_unsettled, range(3))
    got_pre = harness.expect_n(c, pre, 3, req.AMQP_2_8_2_SND_SETTLE_MODES)
    got_uns = harness.expect_n(c, uns, 3, req.AMQP_2_8_2_SND_SETTLE_MODES)
    checks = Checks()
    modes_pre, modes_uns = c.link_modes(pre), c.link_modes(uns)
    flags_pre = [settled_on_arrival(d) for d in got_pre]
    flags_uns = [settled_on_arrival(d) for d in got_uns]
    # 2.7.3: the sender states the mode in use at attach, and then keeps to it
    checks.check(modes_pre.snd_settle_remote in (Link.SND_SETTLED, Link.SND_MIXED, Link.SND_UNSETTLED),
                 f"attach stated snd-settle-mode {modes_pre.snd_settle_remote}",
                 requirement=req.AMQP_2_7_3_SETTLE_MODE_NEGOTIATION)
    if modes_pre.snd_settle_remote == Link.SND_SETTLED:
        checks.check(all(flags_pre),
                     f"link attached as settled delivered unsettled transfers: settled flags {flags_pre}",
                     requirement=req.AMQP_2_7_5_SETTLED_FLAG)
    if modes_uns.snd_settle_remote == Link.SND_UNSETTLED:
        checks.check(not any(flags_uns),
                     f"link attached as unsettled delivered pre-settled transfers: settled flags {flags_uns}",
                     requirement=req.AMQP_2_7_5_SETTLED_FLAG)
    checks.check(modes_pre.snd_settle_remote == Link.SND_SETTLED and all(flags_pre),
                 f"asked for settled: broker stated {modes_pre.snd_settle_remote}, transfers settled {flags_pre}",
                 requirement=req.AMQP_2_8_2_SND_SETTLE_MODES)
    checks.check(modes_uns.snd_settle_remote == Link.SND_UNSETTLED and not any(flags_uns),
                 f"asked for unsettled: broker stated {modes_uns.snd_settle_remote}, transfers settled {flags_uns}",
                 requirement=req.AMQP_2_8_2_SND_SETTLE_MODES)
    checks.check(modes_pre.snd_settle_remote == Link.SND_SETTLED and modes_uns.snd_settle_remote == Link.SND_UNSETTLED,
                 f"broker did not grant the settle modes asked for: settled -> {modes_pre.snd_settle_remote}, "
                 f"unsettled -> {modes_uns.snd_settle_remote}", requirement=req.AMQP_2_7_3_SETTLE_MODE_NEGOTIATION)
    checks.done()


@requirement("AMQP-2.6.12-PRESETTLED-AT-MOST-ONCE")
def test_presettled_sends_at_most_once(harness: Harness) -> None:
    c = amqp_client(harness)
    q = harness.queue()
    sub = c.subscribe(q, ack=AckMode.AUTO)
    harness.send_seq(c, q, range(10), confirm=False)  # pre-settled transfers
    got = seqs(harness.barrier(c, q, c, sub))
    # UNDEF for loss (a checker accepts it); a duplicate is never allowed
    check(len(got) == len(set(got)), f"pre-settled sends duplicated: {got}")
    check(set(got) <= set(range(10)), f"unknown seqs delivered: {got}")


@requirement("AMQP-3.4-OUTCOMES")
def test_unsettled_transfer_gets_an_outcome(harness: Harness) -> None:
    """A broker that takes an unsettled transfer must answer it (here: within the run's timeout)."""
    harness.require(Capability.QUEUES, Capability.RECEIPTS)
    c = amqp_client(harness)
    q = harness.queue()
    harness.expect_left(q, reason="only the transfer's outcome is checked")
    try:
        result = c.send(q, b"m0", seq=0, producer="p1")
    except Indeterminate as exc:
        raise violation(f"no outcome for an unsettled transfer: {exc}") from exc
    check(result.confirmed, f"transfer to a queue not accepted: {dict(result.detail)}")


@requirement("AMQP-2.6.12-UNSETTLED-AT-LEAST-ONCE", "AMQP-2.6.12-DELIVERY-TAG-UNIQUE")
def test_accepted_sends_arrive(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(10))  # unsettled; each waits for accepted
    consumer = amqp_client(harness, "consumer")
    sub = consumer.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=10)
    got = harness.receive_n(consumer, sub, 10)
    checks = Checks()
    checks.check(sorted(seqs(got)) == list(range(10)),
                 f"accepted sends missing: got {sorted(seqs(got))}",
                 requirement=req.AMQP_2_6_12_UNSETTLED_AT_LEAST_ONCE)
    tags = [d.headers.get("amqp:delivery-tag") for d in got]  # the sender's tags (ack ids are always unique)
    checks.check(len(tags) == len(set(tags)),
                 f"delivery tags reused among unsettled deliveries: {tags}",
                 requirement=req.AMQP_2_6_12_DELIVERY_TAG_UNIQUE)
    checks.done()


@requirement("AMQP-2.7.3-SETTLE-MODE-NEGOTIATION")
def test_receiver_settle_mode_second_stated_at_attach(harness: Harness) -> None:
    """Asking for rcv-settle-mode second: the broker grants it or states first at attach, never refuses."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    try:
        sub = c.subscribe(harness.queue(), ack=AckMode.CLIENT_INDIVIDUAL, headers={"amqp-rcv-settle-mode": "second"})
    except AdapterError as exc:
        raise violation(
                                   f"asking for rcv-settle-mode second was refused: {exc}") from exc
    stated = c.link_modes(sub).rcv_settle_remote
    check(stated in (Link.RCV_FIRST, Link.RCV_SECOND),
          f"attach stated rcv-settle-mode {stated}")


@requirement("AMQP-2.8.3-RCV-SETTLE-MODES", "AMQP-3.4.2-ACCEPTED-RETIRES")
def test_receiver_settle_mode_second(harness: Harness) -> None:
    """Mode second where the broker has it; a broker without it (refused or stated first) is not-applicable
    here: how it refuses is :func:`test_receiver_settle_mode_second_stated_at_attach`'s business."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    try:
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, headers={"amqp-rcv-settle-mode": "second"})
    except AdapterError as exc:
        raise NotSupported("amqp.rcv-settle-second", f"the broker refused rcv-settle-mode second: {exc}") from exc
    if c.link_modes(sub).rcv_settle_remote != Link.RCV_SECOND:
        raise NotSupported("amqp.rcv-settle-second", "the broker stated rcv-settle-mode first at attach (allowed)")
    harness.send_seq(c, q, range(2))
    got = harness.expect_n(c, sub, 2, req.AMQP_2_8_3_RCV_SETTLE_MODES)
    for d in got:
        try:
            c.ack(d)  # mode second: the driver waits for the broker to settle after applying accepted
        except Indeterminate as exc:
            raise violation(
                                       f"the broker agreed to rcv-settle-mode second but never settled: {exc}",
                                       requirement=req.AMQP_2_8_3_RCV_SETTLE_MODES) from exc
    extra = seqs(harness.barrier(c, q, c, sub))
    check(not extra, f"accepted (mode second) deliveries came back: {extra}",
          requirement=req.AMQP_3_4_2_ACCEPTED_RETIRES)


@requirement("AMQP-2.6.12-UNSETTLED-AT-LEAST-ONCE")
def test_unroutable_transfer_not_accepted(harness: Harness) -> None:
    """``accepted`` means the node took the message: a transfer to an address that routes nowhere
    (named by the profile's ``settings.amqp_unroutable_address``) must not be accepted."""
    address = harness.settings.options.get("amqp_unroutable_address")
    if not address:
        pytest.skip("the profile names no unroutable AMQP address (every address is a node on this target)")
    c = amqp_client(harness)
    try:
        result = c.send(str(address), b"nowhere", seq=0, producer="p1")
    except AdapterError:
        return  # refused (link refused, rejected or released): nothing claimed
    check(not result.confirmed,
          f"a transfer to {address}, which routes nowhere, was accepted: the message is silently lost")
