"""Receipt-side fault rules scoped to a destination apply to that destination's receipts only.

Regression: the STOMP session looked receipt-side rules (withheld or delayed receipts, the
batch confirmation policy) up without a destination, so a rule with ``destination`` set
never matched. Socket-free: the harness drives one session with a virtual clock, and the
receipt of a later SEND to an unfaulted queue is the barrier (receipts leave in order).
"""

from __future__ import annotations

from ackspec.reference.faults import ConfirmPolicy, FaultRule

from .stomp_harness import Broker


def receipts(frames: list) -> list[str]:  # type: ignore[type-arg]
    return [f.get("receipt-id") for f in frames if f.command == "RECEIPT"]


def test_withheld_receipts_scoped_to_a_destination() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/held.*", withhold_receipts=True))
    c = b.client()
    c.send("SEND", b"x", destination="/queue/held.a", receipt="r-held")
    c.send("SEND", b"y", destination="/queue/free", receipt="r-free")
    assert receipts(c.frames()) == ["r-free"], "the rule scoped to /queue/held.* must withhold that receipt only"


def test_delayed_receipts_scoped_to_a_destination() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/slow.*", receipt_delay=5.0))
    c = b.client()
    c.send("SEND", b"x", destination="/queue/free", receipt="r-free")
    c.send("SEND", b"y", destination="/queue/slow.a", receipt="r-slow")
    assert receipts(c.frames()) == ["r-free"]
    b.tick(5.0)
    assert receipts(c.frames()) == ["r-slow"]


def test_batch_confirm_policy_scoped_to_a_destination() -> None:
    b = Broker()
    b.faults.add(FaultRule(destination="/queue/win.*", confirm=ConfirmPolicy(mode="batch", window=9, timeout=60)))
    c = b.client()
    c.send("SEND", b"1", destination="/queue/win.a", receipt="w1")
    c.send("SEND", b"2", destination="/queue/win.a", receipt="w2")
    assert receipts(c.frames()) == [], "a batch of 3 (window 9 / 3) is not full after two sends"
    c.send("SEND", b"3", destination="/queue/win.a", receipt="w3")
    assert receipts(c.frames()) == ["w3"], "one cumulative receipt for the batch"


def test_fail_commit_rolls_back_and_answers_with_a_negative_receipt() -> None:
    b = Broker()
    rule = b.faults.add(FaultRule(fail_commit="commit failed by fault injection"))
    c = b.client()
    c.send("BEGIN", transaction="t1")
    c.send("SEND", b"x", destination="/queue/tx", transaction="t1")
    c.send("COMMIT", transaction="t1", receipt="r-commit")
    frames = c.frames()
    assert [(f.command, f.get("receipt-id"), f.get("ackspec-nack")) for f in frames] == [
        ("RECEIPT", "r-commit", "true")]
    b.faults.remove(rule)
    c.send("SUBSCRIBE", id="s", destination="/queue/tx", ack="auto")
    c.send("BEGIN", transaction="t2")
    c.send("SEND", b"y", destination="/queue/tx", transaction="t2")
    c.send("COMMIT", transaction="t2", receipt="r2")
    got = c.frames()
    assert [f.body for f in got if f.command == "MESSAGE"] == [b"y"], "the failed transaction's send was dropped"
    assert ("RECEIPT", "r2") in [(f.command, f.get("receipt-id")) for f in got]
