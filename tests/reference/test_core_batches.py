"""The core's batch calls (publish_many, accept_many) do exactly what one call per message does.

Two cores with the same boot id are driven side by side, one through the batch call, one
through ``publish``/``settle`` per message; their effects and their state must be equal.
"""

from __future__ import annotations

import pytest

from ackspec.reference.broker import (
    ACCEPT,
    AckMode,
    BrokerCore,
    Confirm,
    CoreConfig,
    CoreError,
    Deliver,
    Effect,
    Reject,
)
from ackspec.reference.broker.trace import Tracer
from ackspec.reference.faults import FaultInjector

Batch = list[tuple[bytes, tuple[tuple[str, str], ...], bool, object]]


def _pair(config: CoreConfig | None = None, faults: FaultInjector | None = None) -> tuple[BrokerCore, BrokerCore]:
    cores = (BrokerCore(config, boot_id="b", faults=faults), BrokerCore(config, boot_id="b", faults=faults))
    for core in cores:
        for conn in ("p", "c1", "c2"):
            core.open(conn)
    return cores


def _one_by_one(core: BrokerCore, destination: str, batch: Batch) -> list[Effect]:
    out: list[Effect] = []
    for body, headers, persistent, confirm in batch:
        out += core.publish("p", destination, body, headers, persistent=persistent, confirm=confirm)
    return out


def _state(core: BrokerCore, destination: str) -> tuple[object, ...]:
    return (core.queue_messages(destination), core.live_records(),
            [core.unacked(conn, "s") for conn in ("c1", "c2") if core.has_subscription(conn, "s")])


BATCH: Batch = [(b"m%d" % i, (("k", str(i)),) if i % 2 else (), i % 3 == 0, f"t{i}" if i % 4 else None)
                for i in range(12)]


@pytest.mark.parametrize("destination", ["/queue/a", "/topic/t"])
@pytest.mark.parametrize("consumers", [0, 1, 2])
def test_publish_many_is_publish_per_message(destination: str, consumers: int) -> None:
    batched, single = _pair()
    for core in (batched, single):
        for conn in ("c1", "c2")[:consumers]:
            core.subscribe(conn, "s", destination, ack=AckMode.CLIENT_INDIVIDUAL, credit=5)
    got = batched.publish_many("p", destination, BATCH)
    want = _one_by_one(single, destination, BATCH)
    assert got == want
    assert any(isinstance(e, Confirm) for e in got)
    assert _state(batched, destination) == _state(single, destination)


def test_publish_many_rejects_past_the_queue_depth_like_publish() -> None:
    batched, single = _pair(CoreConfig(max_queue_depth=5))
    got = batched.publish_many("p", "/queue/a", BATCH)
    assert got == _one_by_one(single, "/queue/a", BATCH)
    assert sum(isinstance(e, Reject) for e in got) == sum(1 for item in BATCH[5:] if item[3] is not None)
    assert batched.queue_depth("/queue/a") == 5


def test_publish_many_on_an_unknown_connection_raises() -> None:
    core = BrokerCore()
    with pytest.raises(CoreError):
        core.publish_many("nobody", "/queue/a", BATCH)


def _delivered(core: BrokerCore, consumers: int) -> list[int]:
    for conn in ("c1", "c2")[:consumers]:
        core.subscribe(conn, "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=3)
    out = core.publish_many("p", "/queue/a", BATCH)
    return [e.delivery_id for e in out if isinstance(e, Deliver) and e.conn == "c1"]


@pytest.mark.parametrize("consumers", [1, 2])
def test_accept_many_is_settle_per_delivery(consumers: int) -> None:
    batched, single = _pair()
    ids = _delivered(batched, consumers)
    assert ids == _delivered(single, consumers) and len(ids) == 3
    got = batched.accept_many("c1", ids[:2])
    want: list[Effect] = []
    for d in ids[:2]:
        want += single.settle("c1", d, ACCEPT, cumulative=False)
    assert sorted(got, key=repr) == sorted(want, key=repr)  # the same deliveries and journal removals
    assert [e for e in got if isinstance(e, Deliver)] == [e for e in want if isinstance(e, Deliver)]
    assert _state(batched, "/queue/a") == _state(single, "/queue/a")


def test_accept_many_with_an_unknown_id_changes_nothing() -> None:
    core = BrokerCore(boot_id="b")
    core.open("p")
    core.open("c1")
    ids = _delivered(core, 1)
    before = _state(core, "/queue/a")
    with pytest.raises(CoreError):
        core.accept_many("c1", [ids[0], 999])
    with pytest.raises(CoreError):
        core.accept_many("c1", [ids[0], ids[0]])
    assert _state(core, "/queue/a") == before
    core.begin("c1", "tx")
    core.settle("c1", ids[1], ACCEPT, tx="tx")
    with pytest.raises(CoreError):
        core.accept_many("c1", [ids[1]])
    assert core.unacked("c1", "s") == ids


def test_accept_many_traces_what_settle_per_delivery_traces() -> None:
    """Acceptances are counted per batch (Tracer.trace_many), interleaved over two subscriptions:
    the requirement counts equal those of one settle per delivery."""
    def delivered(core: BrokerCore) -> list[int]:
        for conn in ("p", "c1"):
            core.open(conn)
        core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
        core.subscribe("c1", "s2", "/queue/b", ack=AckMode.CLIENT_INDIVIDUAL)
        ids: list[int] = []
        for i in range(4):
            for destination in ("/queue/a", "/queue/b"):
                ids += [e.delivery_id for e in core.publish("p", destination, b"m%d" % i) if isinstance(e, Deliver)]
        return ids

    batched, single = BrokerCore(boot_id="b", tracer=Tracer()), BrokerCore(boot_id="b", tracer=Tracer())
    ids = delivered(batched)
    assert ids == delivered(single) and len(ids) == 8
    batched.accept_many("c1", ids[:7])
    for d in ids[:7]:
        single.settle("c1", d, ACCEPT, cumulative=False)
    assert batched.tracer.counts == single.tracer.counts
    assert batched.tracer.counts["STOMP-ACK-CLIENT-INDIVIDUAL"] == 7
