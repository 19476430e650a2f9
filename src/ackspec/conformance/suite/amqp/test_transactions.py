"""Local transactions through the transaction coordinator (AMQP 1.0 part 4).

``begin``/``commit``/``abort`` are ``declare``/``discharge(fail=false|true)`` on a
coordinator link. A target without a coordinator (it refuses the link) makes these tests
not-applicable (``NotSupported(transactions)``), not failed: the feature is absent.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.amqp_proton import ProtonClient
from ackspec.adapters.base import AckMode, AdapterError, Capability
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.amqp.support import amqp_client, live_then_drained
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


def _declared_with_a_watcher(harness: Harness) -> tuple[ProtonClient, ProtonClient, str, str, str]:
    """A producer with a declared transaction and a consumer already listening on the queue it will post to.

    Returns the producer, the consumer, the queue, the consumer's link and the transaction id.
    """
    harness.require(Capability.QUEUES, Capability.TRANSACTIONS)
    producer = amqp_client(harness, "producer")
    consumer = amqp_client(harness, "consumer")
    q = harness.queue()
    sub = consumer.subscribe(q, ack=AckMode.AUTO)
    tx = producer.begin("tx1")  # declare: a failure here is AMQP-4.2-DECLARE
    return producer, consumer, q, sub, tx


def _accepted_in_transaction(harness: Harness) -> tuple[ProtonClient, str, str, str]:
    """Two messages received on an unsettled link and accepted inside a declared, open transaction.

    Returns the client, the queue, the link and the transaction id, for the test to commit or roll back.
    """
    harness.require(Capability.QUEUES, Capability.TRANSACTIONS, Capability.TRANSACTIONAL_ACK,
                    Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    harness.send_seq(c, q, range(2))
    got = harness.expect_n(c, sub, 2, req.AMQP_4_4_2_RETIREMENT_ON_DISCHARGE)
    tx = c.begin("tx1")
    for d in got:
        c.ack(d, transaction=tx)
    return c, q, sub, tx


@requirement("AMQP-4.2-DECLARE", "AMQP-4.4.1-POSTING-INVISIBLE", "AMQP-4.4.1-SAME-TRANSACTION")
def test_transactional_transfers_invisible_until_commit(harness: Harness) -> None:
    producer, consumer, q, sub, tx = _declared_with_a_watcher(harness)
    results = [producer.send(q, f"m{i}".encode(), seq=i, producer="p1", transaction=tx) for i in range(3)]
    early = seqs(harness.barrier(producer, q, consumer, sub))
    checks = Checks()
    checks.check(all(r.detail.get("transactional") for r in results),
                 f"transactional transfers answered without a transactional-state: {[dict(r.detail) for r in results]}",
                 requirement=req.AMQP_4_4_1_SAME_TRANSACTION)
    checks.check(not early, f"transactional transfers visible before commit: {early}",
                 requirement=req.AMQP_4_4_1_POSTING_INVISIBLE)
    producer.commit(tx)
    got = seqs(harness.receive_n(consumer, sub, 3 - len(early)))
    checks.check(sorted(early + got) == [0, 1, 2],
                 f"after the commit expected seqs [0, 1, 2], got {early + got}",
                 requirement=req.AMQP_4_4_1_POSTING_INVISIBLE)
    checks.done()


@requirement("AMQP-4.4.1-POSTING-INVISIBLE")
def test_rollback_discards_transfers(harness: Harness) -> None:
    producer, consumer, q, sub, tx = _declared_with_a_watcher(harness)
    harness.send_seq(producer, q, range(3), transaction=tx)
    producer.abort(tx)
    leaked = seqs(harness.barrier(producer, q, consumer, sub))
    check(not leaked, f"transfers of a rolled-back transaction delivered: {leaked}")


@requirement("AMQP-4.4.2-RETIREMENT-ON-DISCHARGE")
def test_transactional_accept_applied_at_commit(harness: Harness) -> None:
    c, q, sub, tx = _accepted_in_transaction(harness)
    c.commit(tx)
    live, later = live_then_drained(harness, c, q, sub)
    check(not live and not later,
          f"messages accepted in a committed transaction came back (live {live}, later {later})")


@requirement("AMQP-4.4.2-RETIREMENT-ON-DISCHARGE")
def test_transactional_accept_undone_at_rollback(harness: Harness) -> None:
    c, q, sub, tx = _accepted_in_transaction(harness)
    c.abort(tx)  # the outcomes are not applied; the driver gives the deliveries back (modified, failed)
    live = harness.barrier(c, q, c, sub, ack_each=True)
    c.disconnect()
    later = harness.drain(q, ack=AckMode.CLIENT_INDIVIDUAL, returning=len({0, 1} - set(seqs(live))))
    back = sorted(set(seqs(live) + seqs(later)))
    check(back == [0, 1],
          f"accepts of a rolled-back transaction took effect: only {back} came back, expected [0, 1]")


@requirement("AMQP-4.3-DISCHARGE-UNKNOWN")
def test_discharge_of_unknown_transaction_fails(harness: Harness) -> None:
    c = amqp_client(harness)
    probe = c.begin("probe")  # the coordinator exists (else not-applicable)
    c.commit(probe)
    try:
        answer = c.discharge_unknown()
    except AdapterError as exc:  # the coordinator link was detached with an error: also a refusal
        answer = str(exc)
    check("accepted" not in answer.split() and "unknown-id" in answer,
          f"discharge of a txn-id never declared was answered {answer!r}, expected amqp:transaction:unknown-id")


@requirement("AMQP-4.4.4-PRESETTLED-FAILURE")
def test_failed_presettled_transactional_transfer_fails_the_commit(harness: Harness) -> None:
    """A pre-settled transactional transfer the target cannot process (an injected fault: the
    reference broker's ``reject_send`` rule, once) has no outcome to report, so the commit must fail
    and nothing of the transaction may become visible."""
    harness.require(Capability.QUEUES)
    from ackspec.reference.faults import FaultRule  # noqa: PLC0415  (only with the embedded broker)

    c = amqp_client(harness)
    q = harness.queue()
    tx = c.begin("tx-presettled-failure")
    rule = harness.faults.add(FaultRule(destination=q, reject_send="cannot store (injected)", times=1))
    try:
        c.send(q, b"m0", seq=0, producer="p1", confirm=False, transaction=tx)  # pre-settled: fails silently
        c.send(q, b"m1", seq=1, producer="p1", confirm=False, transaction=tx)  # this one is processed
        c.round_trip(q)  # the broker has read both transfers before the rule goes
    finally:
        harness.faults.remove(rule)
    try:
        c.commit(tx)
        committed = True
    except AdapterError:
        committed = False
    visible = seqs(harness.drain(q))
    checks = Checks()
    checks.check(not committed,
                 "the commit of a transaction with a failed pre-settled transfer succeeded")
    checks.check(not visible,
                 f"transfers of a transaction that could not commit became visible: {visible}")
    checks.done()
