"""Crash restart (simulated power loss): only what an fsync covered survives.

``EmbeddedBroker.restart(crash=True)`` cuts the journal back to the offset the last
completed fsync covered before replaying it, as a machine that lost power would.
A clean ``restart()`` instead writes and syncs everything first. The difference is
what makes a receipt sent before its fsync (the ``early-receipt`` mutant) observable.
"""

from __future__ import annotations

from pathlib import Path

from ackspec.reference.broker.records import Removed
from ackspec.reference.journal import Journal
from ackspec.reference.server import EmbeddedBroker

from ._req import requirement
from .raw_stomp import Raw


def _bodies_after_restart(b: EmbeddedBroker, destination: str) -> list[bytes]:
    c = Raw(b).connect()
    c.send("SUBSCRIBE", destination=destination, id="1")
    c.send("SEND", b"marker", destination=destination)
    got = []
    while (f := c.recv()).body != b"marker":  # barrier: everything stored arrives before the marker
        got.append(f.body)
    return got


def test_journal_lose_unsynced_keeps_the_synced_prefix(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append([Removed("m1")])
    j.sync()
    synced = j.synced_size
    j.append([Removed("m2")])
    assert j.size > synced == j.synced_size
    j.close()
    assert j.lose_unsynced() == j.size - synced
    again = Journal(tmp_path)
    records, report = again.replay()
    assert records == [Removed("m1")] and report.dropped_bytes == 0


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
def test_receipted_persistent_send_survives_a_crash() -> None:
    with EmbeddedBroker() as b:
        assert b.server is not None and b.server.journal is not None
        b.server.journal.sync_delay = 0.2  # a slow disk: the receipt must still wait for it
        p = Raw(b).connect()
        p.send("SEND", b"kept", destination="/queue/crash1", persistent="true", receipt="r1")
        assert p.recv().get("receipt-id") == "r1"
        b.restart(crash=True)
        assert _bodies_after_restart(b, "/queue/crash1") == [b"kept"]
