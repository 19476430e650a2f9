"""Receipts: one per asking frame, in order, the DISCONNECT receipt last, durable where persistent.

These tests speak raw STOMP so a missing, late or out-of-order RECEIPT is seen
as such, not hidden by a client library.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AckMode, Capability
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.rawstomp import RawStomp, frame
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


def _receipts(raw: RawStomp, n: int, timeout: float) -> list[str]:
    got: list[str] = []
    while len(got) < n:
        f = raw.read_frame(timeout)
        if f is None:
            break
        if f.command == "RECEIPT":
            got.append(f.headers.get("receipt-id", ""))
    return got


def _sends_asking_receipts(harness: Harness, n: int, *, persistent_every: int) -> tuple[RawStomp, list[str]]:
    """``n`` SENDs to a fresh queue on a fresh raw connection, the i-th asking for receipt ``r-<i>``.

    SENDs 0, ``persistent_every``, 2 x ``persistent_every``, ... are persistent (1: all of them).
    Returns the connection and the receipt ids in frame order.
    """
    q = harness.queue()
    raw = harness.raw_connected()
    ids = [f"r-{i}" for i in range(n)]
    for i, rid in enumerate(ids):
        headers = {"destination": q, "receipt": rid}
        if i % persistent_every == 0:
            headers[harness.settings.persistent_header] = "true"
        raw.send(frame("SEND", headers, f"m{i}".encode()))
    return raw, ids


@requirement("STOMP-RECEIPT-AFTER-PROCESSING")
def test_every_receipt_is_answered(harness: Harness) -> None:
    q = harness.queue()
    raw = harness.raw_connected()
    ids = []
    for i in range(3):
        ids.append(f"r-send-{i}")
        raw.send(frame("SEND", {"destination": q, "receipt": ids[-1]}, f"m{i}".encode()))
    ids.append("r-sub")
    raw.send(frame("SUBSCRIBE", {"destination": q, "id": "s1", "ack": "client-individual", "receipt": "r-sub"}))
    ids.append("r-unsub")
    raw.send(frame("UNSUBSCRIBE", {"id": "s1", "receipt": "r-unsub"}))
    got = _receipts(raw, len(ids), harness.timeout)
    check(set(got) >= set(ids),
          f"receipts missing for {sorted(set(ids) - set(got))} (connection {'closed' if raw.eof else 'open'})")


@requirement("STOMP-RECEIPT-ORDER")
def test_receipts_come_in_frame_order(harness: Harness) -> None:
    raw, ids = _sends_asking_receipts(harness, 20, persistent_every=2)
    got = _receipts(raw, len(ids), harness.timeout)
    check(got == ids, f"receipts in order {got[:8]}... for frames {ids[:8]}...")


@requirement("STOMP-DISCONNECT-RECEIPT-LAST", "STOMP-RECEIPT-CUMULATIVE")
def test_disconnect_receipt_comes_last(harness: Harness) -> None:
    harness.require(Capability.PERSISTENCE)
    raw, ids = _sends_asking_receipts(harness, 30, persistent_every=1)
    raw.send(frame("DISCONNECT", {"receipt": "r-disconnect"}))
    got = _receipts(raw, len(ids) + 1, harness.timeout)
    checks = Checks()
    before = got[: got.index("r-disconnect")] if "r-disconnect" in got else got
    checks.check("r-disconnect" in got and set(before) == set(ids),
                 f"{len(set(ids) - set(before))} SEND receipts missing before the DISCONNECT receipt",
                 requirement=req.STOMP_DISCONNECT_RECEIPT_LAST)
    checks.check(set(ids) <= set(got),
                 f"{len(set(ids) - set(got))} SEND receipts were never sent", requirement=req.STOMP_RECEIPT_CUMULATIVE)
    checks.done()


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "JMS-7.7-PERSISTENT-ONCE-AND-ONLY-ONCE",
             "ARTEMIS-DURABLE-ROUTED-PERSISTED")
def test_receipted_persistent_send_survives_restart(harness: Harness) -> None:
    q = harness.queue()
    p = harness.client("producer")
    harness.send_seq(p, q, range(5), persistent=True)
    harness.restart_broker()
    after = harness.client("after-restart")
    sub = after.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    got = harness.receive_n(after, sub, 5)
    for d in got:
        after.ack(d)
    got += harness.barrier(after, q, after, sub, ack_each=True)
    found = seqs(got)
    checks = Checks()
    for rid in (req.STOMP_RECEIPT_PERSISTENT_DURABLE, req.ARTEMIS_DURABLE_ROUTED_PERSISTED):
        checks.check(set(found) >= set(range(5)),
                     f"receipted persistent messages lost in a restart: {sorted(set(range(5)) - set(found))}",
                     requirement=rid)
    checks.check(sorted(found) == sorted(set(found)),
                 f"delivered more than once after the restart: {found}",
                 requirement=req.JMS_7_7_PERSISTENT_ONCE_AND_ONLY_ONCE)
    checks.done()


@requirement("JMS-9.1-FAILURE-REDELIVERY-MARKED")
@pytest.mark.parametrize("failure", ["connection", "restart"])
def test_unacknowledged_messages_come_back_marked_after_a_failure(harness: Harness, failure: str) -> None:
    """Three persistent messages delivered, none acknowledged, then a failure: the consumer's connection
    dies (``connection``) or the broker restarts (``restart``). Each message comes back with the
    redelivered flag and, where the target reports one, a delivery count of at least 2 (JMS 9.1, with the
    catalogue's ``failure`` parameter; JMS 3.5.11 lets the count be inexact, never below 2 once redelivered)."""
    failing = Capability.ABRUPT_DISCONNECT if failure == "connection" else Capability.BROKER_RESTART
    harness.require(Capability.QUEUES, Capability.PERSISTENCE, Capability.RECEIPTS, failing,
                    Capability.ACK_CLIENT_INDIVIDUAL)
    q = harness.queue()
    p = harness.client("producer")
    harness.send_seq(p, q, range(3), persistent=True)
    before = harness.client("before-failure")
    sub = before.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    harness.expect_n(before, sub, 3, what="deliveries before the failure")
    if failure == "connection":
        before.crash()
    else:
        harness.restart_broker()
    after = harness.client("after-failure")
    sub = after.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    got = harness.expect_n_after_loss(after, sub, 3, what=f"messages after the {failure} failure")
    for d in got:
        after.ack(d)
    checks = Checks()
    unmarked = [d.seq for d in got if d.redelivered is not True]
    checks.check(not unmarked,
                 f"delivered before the {failure} failure, unacknowledged, and redelivered without the redelivered "
                 f"flag: seqs {unmarked}")
    low = [(d.seq, d.delivery_count) for d in got if d.delivery_count is not None and d.delivery_count < 2]
    checks.check(not low,
                 f"redelivered after the {failure} failure with a delivery count below 2 (seq, count): {low}")
    checks.done()


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "JMS-7.7-PERSISTENT-ONCE-AND-ONLY-ONCE",
             "ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL")
def test_receipted_persistent_send_survives_power_loss(harness: Harness) -> None:
    """A receipt for a persistent SEND means it is on disk: a power loss right after it loses nothing.

    The disk is made slow (each fsync takes longer) so that a broker answering before its fsync
    is still waiting for it when the power goes: only a crash restart, which keeps just what an
    fsync covered, can tell such a broker from a correct one.
    """
    harness.require(Capability.FAULT_INJECTION)
    q = harness.queue()
    p = harness.client("producer")
    with harness.slow_fsync(0.4):
        harness.send_seq(p, q, range(2), persistent=True)
        harness.restart_broker(crash=True)
    after = harness.client("after-crash")
    sub = after.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    found = seqs(harness.barrier(after, q, after, sub, ack_each=True))
    checks = Checks()
    for rid in (req.STOMP_RECEIPT_PERSISTENT_DURABLE, req.ARTEMIS_JOURNAL_SYNC_NON_TRANSACTIONAL):
        checks.check(set(found) >= {0, 1},
                     f"receipted persistent messages lost in a power loss: {sorted({0, 1} - set(found))}",
                     requirement=rid)
    checks.check(sorted(found) == sorted(set(found)),
                 f"delivered more than once after the power loss: {found}",
                 requirement=req.JMS_7_7_PERSISTENT_ONCE_AND_ONLY_ONCE)
    checks.done()


@requirement("ARTEMIS-JOURNAL-SYNC-TRANSACTIONAL")
def test_committed_transaction_survives_power_loss(harness: Harness) -> None:
    """A confirmed COMMIT means its persistent sends are on disk: a power loss right after it loses none
    (the disk made slow, as for single sends above, so an answer before the fsync would show)."""
    harness.require(Capability.FAULT_INJECTION)
    q = harness.queue()
    p = harness.client("producer")
    with harness.slow_fsync(0.4):
        tx = p.begin("committed")
        harness.send_seq(p, q, range(3), persistent=True, transaction=tx, confirm=False)
        p.commit(tx)
        harness.restart_broker(crash=True)
    after = harness.client("after-crash")
    sub = after.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    found = seqs(harness.barrier(after, q, after, sub, ack_each=True))
    harness.check(set(found) >= {0, 1, 2}, f"committed persistent messages lost in a power loss right after the "
                  f"commit was confirmed: {sorted({0, 1, 2} - set(found))}")
