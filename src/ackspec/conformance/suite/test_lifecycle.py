"""The lifecycle matrix: what becomes of delivered, unacknowledged messages when a consumer's hold ends.

The matrix is the catalogue family ``lifecycle``: each requirement lists, as its parameters, the
acknowledgement modes (``mode``) and ending events (``event``) it covers and the ``outcome`` they
share (``consumed``: never delivered again; ``returned``: delivered again, marked redelivered). This
module runs one case per cell, read from the catalogue at collection: widening a domain in the YAML
adds cases here. Each case carries only its own cell's requirement (and the redelivery marking where
messages come back, JMS-3.4.7-REDELIVERED-SET), so a cell's failure is charged to that cell alone.

A case: three messages sent and received in the cell's mode, some acknowledged where the mode allows
it (the first in client mode, the second in client-individual mode, all of them inside a transaction
in transacted mode), the event, then a fresh consumer takes what is on the queue up to a barrier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from ackspec.adapters.base import AckMode, Capability, Client, Delivery, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.markers import requirement
from ackspec.conformance.suite.support import received
from ackspec.conformance.verdicts import Checks
from ackspec.spec import load_catalogue
from ackspec.spec.model import Requirement

FAMILY = "lifecycle"
COVERED = requirement(
    "STOMP-LIFECYCLE-AUTO-CONSUMED", "STOMP-LIFECYCLE-CLIENT-RETURNED", "STOMP-LIFECYCLE-TX-ACK-UNDONE",
    "AMQP-LIFECYCLE-SETTLED-CONSUMED", "AMQP-LIFECYCLE-UNSETTLED-RETURNED", "AMQP-LIFECYCLE-TX-RETIREMENT-UNDONE",
    "JMS-LIFECYCLE-RESTART-UNACKED-RETURNED", "JMS-3.4.7-REDELIVERED-SET",
)
"""What this module checks, as literals in a ``requirement`` marker (their one place): ``ackspec spec coverage``
finds citations statically, and the cases below are built at collection. Each case is marked with its own cell
(and the redelivered flag's requirement where it checks it) only."""
*LIFECYCLE, MARKED = (str(rid) for rid in COVERED.args)
"""The family's requirements (:func:`lifecycle_cells` refuses to collect if they and the catalogue disagree),
and the redelivered flag's."""

MODES = {
    "stomp": {"auto": AckMode.AUTO, "client": AckMode.CLIENT, "client-individual": AckMode.CLIENT_INDIVIDUAL,
              "transacted": AckMode.CLIENT_INDIVIDUAL},
    "amqp": {"settled": AckMode.AUTO, "unsettled": AckMode.CLIENT_INDIVIDUAL, "transacted": AckMode.CLIENT_INDIVIDUAL},
}
"""Each protocol's acknowledgement modes, as the subscription the driver opens for them."""
EVENTS = {
    "stomp": {"unsubscribe": "unsubscribe", "disconnect": "disconnect", "abrupt": "abrupt", "abort": "abort",
              "restart": "restart"},
    "amqp": {"detach": "unsubscribe", "close": "disconnect", "abrupt": "abrupt", "abort": "abort",
             "restart": "restart"},
}
"""Each protocol's ending events, as the driver operation that causes them."""
TRANSACTION = "lifecycle-tx"
SENT = 3


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the matrix: a requirement's mode, event and outcome."""

    requirement: str
    protocols: tuple[str, ...]
    mode: str
    event: str
    outcome: str

    @property
    def marked(self) -> bool:
        """Whether the case checks the redelivered flag: on what comes back, except after a restart, whose
        marking is JMS-9.1-FAILURE-REDELIVERY-MARKED's (test_receipts.py), not checked twice."""
        return self.outcome == "returned" and self.event != "restart"

    @property
    def cited(self) -> tuple[str, ...]:
        return (self.requirement, MARKED) if self.marked else (self.requirement,)


def _domain(req: Requirement, name: str) -> tuple[str, ...]:
    parameter = req.parameters.get(name)
    if parameter is None or not isinstance(parameter.domain, tuple):
        raise pytest.UsageError(f"{req.id}: a lifecycle requirement needs an enumerated `{name}` parameter")
    return tuple(str(v) for v in parameter.domain)


def lifecycle_cells() -> list[Cell]:
    """Every cell of the catalogue's lifecycle family, in catalogue order."""
    family = load_catalogue().in_family(FAMILY)
    if {r.id for r in family} != set(LIFECYCLE):
        raise pytest.UsageError(f"test_lifecycle.LIFECYCLE lists {sorted(LIFECYCLE)}, the catalogue's {FAMILY} "
                                f"family has {sorted(r.id for r in family)}: keep them the same")
    return [Cell(req.id, req.protocols, mode, event, outcome)
            for req in family for outcome in _domain(req, "outcome")
            for mode in _domain(req, "mode") for event in _domain(req, "event")]


def _cases() -> list[object]:
    return [pytest.param(cell, marks=requirement(*cell.cited), id=f"{cell.requirement}[{cell.mode}-{cell.event}]")
            for cell in lifecycle_cells()]


def _operation(harness: Harness, cell: Cell) -> tuple[AckMode, str]:
    """The subscription mode and event operation of ``cell`` on this target, or not-applicable."""
    protocol = harness.adapter.protocol
    mode, event = MODES.get(protocol, {}).get(cell.mode), EVENTS.get(protocol, {}).get(cell.event)
    if protocol not in cell.protocols or mode is None or event is None:
        raise NotSupported(f"protocol.{protocol}", f"{cell.requirement}[{cell.mode}-{cell.event}] is not a cell "
                           f"of {protocol}")
    if event == "abrupt":
        harness.require(Capability.ABRUPT_DISCONNECT)
    return mode, event


def _acknowledge(client: Client, got: Sequence[Delivery], mode: str) -> set[int]:
    """Acknowledge what ``mode`` lets a case acknowledge; the seqs acknowledged for good (if committed)."""
    if mode == "client":
        client.ack(got[0])  # cumulative: covers the first only
        return set(seqs(got[:1]))
    if mode in ("client-individual", "unsettled"):
        client.ack(got[1])  # individual: covers the second only
        return set(seqs(got[1:2]))
    if mode == "transacted":
        client.begin(TRANSACTION)
        for delivery in got:
            client.ack(delivery, transaction=TRANSACTION)
    return set()  # auto, settled: consumed on delivery; transacted: nothing until a commit that never comes


def _end_hold(harness: Harness, client: Client, subscription: str, event: str) -> None:
    if event == "unsubscribe":
        client.unsubscribe(subscription)
        client.disconnect()
    elif event == "disconnect":
        client.disconnect()
    elif event == "abrupt":
        client.crash()
    elif event == "abort":
        client.abort(TRANSACTION)
        client.disconnect()
    else:
        harness.restart_broker()


def _left_on_queue(harness: Harness, queue: str, expected: int, cell: Cell) -> list[Delivery]:
    """What a fresh consumer finds on ``queue``: ``expected`` messages (with the grace a dead connection's
    clean-up gets), then anything else up to a barrier; each acknowledged."""
    after = harness.client("after")
    sub = after.subscribe(queue, ack=AckMode.CLIENT_INDIVIDUAL)
    back = (harness.expect_n_after_loss(after, sub, expected, cell.requirement,
                                        f"messages back after {cell.event} in {cell.mode} mode") if expected else [])
    for delivery in back:
        after.ack(delivery)
    return back + harness.barrier(after, queue, after, sub, ack_each=True)


@pytest.mark.parametrize("cell", _cases())
def test_unacknowledged_messages_when_the_hold_ends(harness: Harness, cell: Cell) -> None:
    ack, event = _operation(harness, cell)
    persistent = event == "restart" and harness.has(Capability.PERSISTENCE)
    c1, queue, sub, got = received(harness, SENT, ack=ack, requirement=cell.requirement, persistent=persistent)
    acked = _acknowledge(c1, got, cell.mode)
    _end_hold(harness, c1, sub, event)
    expected = [] if cell.outcome == "consumed" else sorted(set(seqs(got)) - acked)
    back = _left_on_queue(harness, queue, len(expected), cell)
    checks = Checks()
    checks.check(sorted(seqs(back)) == expected,
                 f"{cell.mode} mode, {SENT} delivered, {sorted(acked) or 'none'} acknowledged, then {cell.event}: "
                 f"expected {expected or 'nothing'} delivered again, got {seqs(back) or 'nothing'}",
                 requirement=cell.requirement)
    if cell.marked and harness.has(Capability.REDELIVERED_FLAG):
        unmarked = [d.seq for d in back if d.seq in expected and d.redelivered is not True]
        checks.check(not unmarked, f"delivered again after {cell.event} in {cell.mode} mode without the "
                                   f"redelivered flag: seqs {unmarked}", requirement=req.JMS_3_4_7_REDELIVERED_SET)
    checks.done()
