"""Model-based test of the broker core: one queue, producers, consumers with prefetch, random
acks/nacks/closes. Invariants against a simple model: no loss, no duplicate after ack, per-producer
order of first deliveries, prefetch bound, redelivered flag iff delivered before."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ackspec.reference.broker import ACCEPT, REQUEUE, AckMode, BrokerCore, CoreConfig, Deliver, Effect

from ._req import requirement

Q = "/queue/m"


class QueueMachine(RuleBasedStateMachine):
    core_class: type[BrokerCore] = BrokerCore
    """What the model checks (tests/quality checks it catches broken cores)."""

    def __init__(self) -> None:
        super().__init__()
        self.core = self.core_class(CoreConfig(max_redeliveries=1000))
        self.core.open("p0")
        self.core.open("p1")
        self.sent: dict[bytes, str] = {}  # body -> producer
        self.order: dict[str, list[bytes]] = {"p0": [], "p1": []}
        self.acked: set[bytes] = set()
        self.ever_delivered: set[bytes] = set()
        self.first_delivery_order: list[bytes] = []
        self.held: dict[str, dict[int, bytes]] = {}  # consumer -> delivery id -> body
        self.prefetch: dict[str, int] = {}
        self.n = 0
        self.consumers = 0

    def _apply(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Deliver):
                body = e.message.body
                assert body not in self.acked, "delivered after it was acknowledged"
                assert e.redelivered == (body in self.ever_delivered), "redelivered flag wrong"
                if body not in self.ever_delivered:
                    self.first_delivery_order.append(body)
                self.ever_delivered.add(body)
                self.held[e.conn][e.delivery_id] = body
                assert len(self.held[e.conn]) <= self.prefetch[e.conn], "prefetch exceeded"

    @rule(producer=st.sampled_from(["p0", "p1"]))
    def send(self, producer: str) -> None:
        self.n += 1
        body = b"%s-%d" % (producer.encode(), self.n)
        self.sent[body] = producer
        self.order[producer].append(body)
        self._apply(self.core.publish(producer, Q, body))

    @precondition(lambda self: len(self.held) < 3)
    @rule(prefetch=st.integers(1, 4))
    def subscribe(self, prefetch: int) -> None:
        self.consumers += 1
        conn = f"c{self.consumers}"
        self.core.open(conn)
        self.held[conn] = {}
        self.prefetch[conn] = prefetch
        self._apply(self.core.subscribe(conn, "s", Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=prefetch))

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data(), nack=st.booleans())
    def settle(self, data: st.DataObject, nack: bool) -> None:
        conn = data.draw(st.sampled_from(sorted(c for c, h in self.held.items() if h)))
        did = data.draw(st.sampled_from(sorted(self.held[conn])))
        body = self.held[conn].pop(did)
        if not nack:
            self.acked.add(body)
        self._apply(self.core.settle(conn, did, REQUEUE if nack else ACCEPT))

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        conn = data.draw(st.sampled_from(sorted(self.held)))
        del self.held[conn]
        self._apply(self.core.close(conn, abrupt=True))

    @invariant()
    def no_loss(self) -> None:
        waiting = {m.body for m in self.core.queue_messages(Q)}
        held = {b for h in self.held.values() for b in h.values()}
        assert waiting | held | self.acked == set(self.sent), "message lost"
        assert not (waiting & held) and not (waiting & self.acked) and not (held & self.acked)

    @invariant()
    def per_producer_order(self) -> None:
        for producer, bodies in self.order.items():
            firsts = [b for b in self.first_delivery_order if self.sent[b] == producer]
            assert firsts == bodies[: len(firsts)], "first deliveries out of producer order"


TestQueueMachine = requirement(
    "JMS-6.2.9.1-PER-PRODUCER-ORDER", "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK", "STOMP-SUBSCRIBE-PREFETCH",
    "JMS-4.1.2-QUEUE-ONE-CONSUMER", "JMS-3.4.7-REDELIVERED-SET",
)(QueueMachine.TestCase)
TestQueueMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


