"""Interop with an AMQP 1.0 client we did not write: the Node ``rhea`` client (npm).

A rhea script (tests/interop_amqp/peer.js) sends to and receives from the reference
broker's AMQP listener; the python-qpid-proton driver checks the other side. Set up once
with ``bash tests/interop_amqp/setup.sh`` (``npm ci`` from the committed package-lock.json).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.amqp.conftest import RunningBroker

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AckMode, NackOutcome

PEER_DIR = Path(__file__).resolve().parent.parent / "interop_amqp"
PEER = PEER_DIR / "peer.js"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not (PEER_DIR / "node_modules" / "rhea").is_dir(),
                       reason="rhea is not installed: run `bash tests/interop_amqp/setup.sh` (npm ci)"),
]


def rhea(command: str, url: str, address: str, n: int = 1) -> dict[str, Any]:
    done = subprocess.run(["node", str(PEER), command, url, address, str(n)], capture_output=True, text=True,
                          timeout=30, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"rhea peer printed nothing (exit {done.returncode}): {done.stderr[-500:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert done.returncode == 0, f"rhea {command} failed: {result.get('error')} {done.stderr[-300:]}"
    return result


def test_rhea_sends_proton_receives(broker: RunningBroker, adapter: ProtonAdapter) -> None:
    q = "/queue/interop.rhea.to.proton"
    sent = rhea("send", broker.url, q, 3)
    assert sent["outcomes"] == ["accepted"] * 3
    c = adapter.client("proton")
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    got = [c.receive(sub, 3) for _ in range(3)]
    assert all(d is not None for d in got)
    assert [(d.seq, d.producer, d.body, d.headers["amqp:durable"]) for d in got if d is not None] == [
        (i, "rhea", f"rhea-{i}".encode(), "true") for i in range(3)]
    for d in got:
        assert d is not None
        c.ack(d)
    c.disconnect()


def test_proton_sends_rhea_receives(broker: RunningBroker, adapter: ProtonAdapter) -> None:
    q = "/queue/interop.proton.to.rhea"
    c = adapter.client("proton")
    for i in range(3):
        assert c.send(q, f"p{i}".encode(), seq=i, producer="proton", persistent=True).confirmed
    got = rhea("receive", broker.url, q, 3)["received"]
    assert [(m["body"], m["properties"]["ackspec-seq"], m["durable"], m["delivery_count"]) for m in got] == [
        (f"p{i}", i, True, 0) for i in range(3)]  # the property keeps its AMQP type (issue 17)
    # rhea accepted all three: nothing is left (barrier: a sentinel behind them arrives alone)
    sub = c.subscribe(q, ack=AckMode.AUTO)
    c.send(q, b"sentinel", seq=99)
    d = c.receive(sub, 3)
    assert d is not None and d.seq == 99
    c.disconnect()


def test_rhea_release_keeps_delivery_count(broker: RunningBroker, adapter: ProtonAdapter) -> None:
    q = "/queue/interop.rhea.release"
    c = adapter.client("proton")
    assert c.send(q, b"r", seq=0, producer="proton").confirmed
    released = rhea("release", broker.url, q)["received"]
    assert released[0]["delivery_count"] == 0 and released[0]["first_acquirer"] is True
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    again = c.receive(sub, 3)
    assert again is not None and again.seq == 0
    assert again.headers["amqp:delivery-count"] == "0"  # released: not counted as a failed attempt
    assert again.headers["amqp:first-acquirer"] == "false"
    # proton fails it and refuses it for its own link: it waits for rhea's link, with count 1
    c.nack(again, outcome=NackOutcome.MODIFIED_UNDELIVERABLE)
    c.unsubscribe(sub)
    counted = rhea("receive", broker.url, q, 1)["received"]
    assert counted[0]["delivery_count"] == 1
