"""Requirement tracing: every ID the reference broker traces exists in the catalogue, and
running behaviour really counts the IDs it serves."""

from __future__ import annotations

import re
from pathlib import Path

import ackspec.reference
from ackspec.spec import load_catalogue

from .stomp_harness import Broker

ID_IN_SOURCE = re.compile(r'"((?:STOMP|JMS|AMQP?|ARTEMIS|SOLACE)-[A-Z0-9.]+(?:-[A-Z0-9.]+)+)"')


def test_traced_ids_are_in_the_catalogue() -> None:
    root = Path(ackspec.reference.__file__).parent
    used: set[str] = set()
    for name in ("broker", "stomp", "journal"):
        for path in (root / name).rglob("*.py"):
            used |= set(ID_IN_SOURCE.findall(path.read_text()))
    assert len(used) > 20
    missing = used - set(load_catalogue().ids)
    assert not missing, f"traced IDs missing from the catalogue: {sorted(missing)}"


def test_behaviour_is_counted() -> None:
    b = Broker()
    c, p = b.client(), b.client()
    c.send("SUBSCRIBE", destination="/queue/a", id="s", ack="client")
    p.send("SEND", b"x", destination="/queue/a")
    (m,) = c.frames()
    c.send("ACK", id=m.get("ack") or "")
    c.send("ACK", id="999")
    counts = b.tracer.counts
    assert counts["STOMP-CONNECT-VERSION"] == 2
    assert counts["STOMP-ACK-CLIENT-CUMULATIVE"] == 1
    assert counts["STOMP-ERROR-CLOSES"] >= 1
