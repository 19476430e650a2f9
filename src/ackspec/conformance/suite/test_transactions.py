"""Transactions: BEGIN / COMMIT / ABORT, and the implicit abort of a disconnect.

Transactional SENDs are sent without their own receipt (brokers may hold those
back until COMMIT, STOMP-TX-SEND-RECEIPT-IMMEDIATE is UNDEF); the COMMIT or
ABORT receipt confirms them. Invisibility before COMMIT is checked with a
barrier: a non-transactional sentinel sent after them must arrive alone.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AckMode, Capability, Client
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.rawstomp import frame
from ackspec.conformance.suite.support import (
    command_of,
    is_error,
    left_after_disconnect,
    raw_reply,
    received,
    reply_to,
)
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


def _sends_in_open_transaction(harness: Harness, count: int) -> tuple[Client, Client, str, str, str]:
    """Seqs ``0 .. count-1`` sent (without receipts) in an open transaction to a queue a consumer already watches.

    Returns the producer, the consumer, the queue, the consumer's (auto-ack) subscription and the
    transaction, for the test to commit, abort or disconnect.
    """
    q = harness.queue()
    consumer = harness.client("consumer")
    sub = consumer.subscribe(q, ack=AckMode.AUTO)
    producer = harness.client("producer")
    tx = producer.begin("tx1")
    harness.send_seq(producer, q, range(count), transaction=tx, confirm=False)
    return producer, consumer, q, sub, tx


def _acked_in_transaction(harness: Harness, *also: Capability, requirement: str | None = None,
                          persistent: bool = False) -> tuple[Client, str, str, str]:
    """Two messages received on a client-individual subscription and ACKed inside an open transaction.

    Requires transactional ACKs (and the capabilities ``also``). Returns the client, the queue, the
    subscription and the transaction, for the test to commit, abort or crash.
    """
    harness.require(Capability.TRANSACTIONS, Capability.TRANSACTIONAL_ACK, *also, Capability.ACK_CLIENT_INDIVIDUAL)
    c1, q, sub, got = received(harness, 2, ack=AckMode.CLIENT_INDIVIDUAL, requirement=requirement,
                               persistent=persistent)
    tx = c1.begin("tx1")
    for d in got:
        c1.ack(d, transaction=tx)
    return c1, q, sub, tx


@requirement("STOMP-TX-SEND-INVISIBLE", "STOMP-TX-COMMIT-ATOMIC")
def test_tx_sends_invisible_until_commit(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    producer, consumer, q, sub, tx = _sends_in_open_transaction(harness, 3)
    early = seqs(harness.barrier(producer, q, consumer, sub))
    checks = Checks()
    checks.check(not early, f"transactional SENDs delivered before COMMIT: {early}",
                 requirement=req.STOMP_TX_SEND_INVISIBLE)
    producer.commit(tx)
    got = seqs(harness.receive_n(consumer, sub, 3 - len(early)))
    checks.check(sorted(early + got) == [0, 1, 2] and got == sorted(got),
                 f"after COMMIT expected seqs [0, 1, 2] in order, got {early + got}",
                 requirement=req.STOMP_TX_COMMIT_ATOMIC)
    checks.done()


@requirement("STOMP-TX-ABORT-DISCARDS-SENDS")
def test_tx_abort_discards_sends(harness: Harness) -> None:
    producer, consumer, q, sub, tx = _sends_in_open_transaction(harness, 3)
    producer.abort(tx)
    leaked = seqs(harness.barrier(producer, q, consumer, sub))
    check(not leaked, f"SENDs of an aborted transaction were delivered: {leaked}")


@requirement("STOMP-TX-DISCONNECT-ABORTS")
def test_tx_disconnect_aborts_sends(harness: Harness) -> None:
    producer, consumer, q, sub, _tx = _sends_in_open_transaction(harness, 2)
    producer.disconnect()
    leaked = seqs(harness.barrier(consumer, q, consumer, sub))
    check(not leaked, f"SENDs of a transaction left open at DISCONNECT: {leaked}")


@requirement("STOMP-ACK-IN-TRANSACTION", "STOMP-TX-COMMIT-ATOMIC")
def test_tx_acks_take_effect_at_commit(harness: Harness) -> None:
    c1, q, _sub, tx = _acked_in_transaction(harness,
                                            requirement=req.STOMP_ACK_IN_TRANSACTION)
    c1.commit(tx)
    back = left_after_disconnect(harness, c1, q)
    check(not back, f"messages ACKed in a committed transaction came back: {back}",
          requirement=req.STOMP_TX_COMMIT_ATOMIC)


@requirement("STOMP-TX-ABORT-ACKS-UNDONE", "STOMP-ACK-IN-TRANSACTION")
def test_tx_abort_undoes_acks(harness: Harness) -> None:
    c1, q, sub, tx = _acked_in_transaction(harness,
                                           requirement=req.STOMP_TX_ABORT_ACKS_UNDONE)
    c1.abort(tx)
    # whether they come back on the live subscription is left open; after it ends they must
    live = seqs(harness.barrier(c1, q, c1, sub))
    back = left_after_disconnect(harness, c1, q, returning=len({0, 1} - set(live)))
    check(sorted(set(live + back)) == [0, 1],
          f"ACKs of an aborted transaction were not undone: came back {live + back}, expected [0, 1]",
          requirement=req.STOMP_TX_ABORT_ACKS_UNDONE)


@requirement("STOMP-TX-DISCONNECT-ABORTS", "STOMP-ACK-IN-TRANSACTION")
def test_tx_crash_undoes_acks(harness: Harness) -> None:
    c1, q, _sub, _tx = _acked_in_transaction(harness, Capability.ABRUPT_DISCONNECT,
                                             persistent=True, requirement=req.STOMP_TX_DISCONNECT_ABORTS)
    c1.crash()
    c2 = harness.client()
    sub2 = c2.subscribe(q, ack=AckMode.AUTO)
    back = seqs(harness.expect_n_after_loss(c2, sub2, 2, req.STOMP_TX_DISCONNECT_ABORTS,
                                            "messages back (the dead transaction's ACKs took effect)"))
    check(sorted(back) == [0, 1],
          f"ACKs of a transaction open when the connection died took effect: {back} came back, expected [0, 1]",
          requirement=req.STOMP_TX_DISCONNECT_ABORTS)


@requirement("STOMP-TX-UNKNOWN-ERROR")
def test_tx_unknown_transaction_is_an_error(harness: Harness) -> None:
    _raw, reply = raw_reply(harness, frame("COMMIT", {"transaction": "ackspec-no-such-tx", "receipt": "r-commit"}))
    check(is_error(reply),
          f"COMMIT of an unknown transaction got {command_of(reply)}, expected ERROR")


@requirement("STOMP-TX-BEGIN-ID-REQUIRED")
def test_tx_begin_of_an_open_transaction_is_an_error(harness: Harness) -> None:
    raw, first = raw_reply(harness, frame("BEGIN", {"transaction": "ackspec-tx-twice", "receipt": "r-begin-1"}))
    second = reply_to(raw, frame("BEGIN", {"transaction": "ackspec-tx-twice", "receipt": "r-begin-2"}))
    check(command_of(first) == "RECEIPT" and is_error(second),
          f"BEGIN of an open transaction id got {command_of(second)} "
          f"(first BEGIN: {command_of(first)}), expected ERROR")
