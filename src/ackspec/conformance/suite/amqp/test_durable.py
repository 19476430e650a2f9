"""Durable messages across a broker restart (needs a target the harness can restart: the
reference broker, ``--target reference+amqp://embedded``)."""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AckMode, AdapterError, Capability, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.amqp.support import amqp_client
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


@requirement("AMQP-3.2.1-DURABLE-SURVIVES", "AMQP-3.2.1-ACCEPTED-AFTER-DURABLE")
def test_accepted_durable_messages_survive_restart(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    c = amqp_client(harness, "producer")
    q = harness.queue()
    harness.send_seq(c, q, range(5), persistent=True)  # each waits for accepted: durable by then
    harness.restart_broker()  # crash-stop, replay the journal
    consumer = amqp_client(harness, "after-restart")
    sub = consumer.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=10)
    got = harness.receive_n(consumer, sub, 5)
    for d in got:
        consumer.ack(d)
    checks = Checks()
    checks.check(sorted(seqs(got)) == list(range(5)),
                 f"accepted durable messages lost in a restart: got {sorted(seqs(got))} of [0..4]",
                 requirement=req.AMQP_3_2_1_ACCEPTED_AFTER_DURABLE)
    checks.check(all(d.headers.get("amqp:durable") == "true" for d in got),
                 "messages after the restart lost their durable header", requirement=req.AMQP_3_2_1_DURABLE_SURVIVES)
    checks.check(len(got) == 5, f"{len(got)} of 5 durable messages after restart",
                 requirement=req.AMQP_3_2_1_DURABLE_SURVIVES)
    checks.done()


@requirement("AMQP-3.2.1-ACCEPTED-AFTER-DURABLE")
def test_accepted_durable_messages_survive_power_loss(harness: Harness) -> None:
    """``accepted`` for a durable transfer only once it is on disk: a power loss (unsynced journal
    writes lost) right after the outcome, with a slow disk that makes an early outcome visible."""
    harness.require(Capability.QUEUES, Capability.FAULT_INJECTION)
    c = amqp_client(harness, "producer")
    q = harness.queue()
    with harness.slow_fsync(0.4):
        harness.send_seq(c, q, range(2), persistent=True)  # each waits for accepted
        harness.restart_broker(crash=True)
    after = amqp_client(harness, "after-power-loss")
    sub = after.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    found = seqs(harness.barrier(after, q, after, sub, ack_each=True))
    check(set(found) >= {0, 1},
          f"accepted durable transfers lost in a power loss: {sorted({0, 1} - set(found))}")


@requirement("AMQP-3.2.1-DURABLE-SURVIVES", "AMQP-3.5.2-NO-RESEND-ACCEPTED")
def test_settled_accepts_survive_restart(harness: Harness) -> None:
    """Accepted with rcv-settle-mode second (the broker settles once applied): not redelivered after a restart."""
    harness.require(Capability.QUEUES, Capability.PERSISTENCE, Capability.BROKER_RESTART,
                    Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(4), persistent=True)
    try:
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, headers={"amqp-rcv-settle-mode": "second"})
    except AdapterError as exc:  # refusing it is AMQP-2.7.3's matter (its own test), not this one's
        harness.expect_left(q, reason="the target refused the link, and with it the session")
        raise NotSupported("rcv-settle-mode second", f"the target refused a link asking for it: {exc}") from exc
    got = harness.expect_n(c, sub, 4, req.AMQP_3_2_1_DURABLE_SURVIVES)
    second = c.link_modes(sub).rcv_settle_remote == 1
    for d in got[:2]:
        c.ack(d)  # mode second: returns once the broker settled (applied and journalled)
    harness.restart_broker()
    after = harness.drain(q)
    checks = Checks()
    if second:
        checks.check(not {0, 1} & set(seqs(after)),
                     f"accepted and settled messages came back after a restart: {seqs(after)}",
                     requirement=req.AMQP_3_5_2_NO_RESEND_ACCEPTED)
    checks.check({2, 3} <= set(seqs(after)),
                 f"unacknowledged durable messages lost in a restart: got {seqs(after)}",
                 requirement=req.AMQP_3_2_1_DURABLE_SURVIVES)
    checks.done()
