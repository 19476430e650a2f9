"""Synthetic histories with anomalies injected at known places.

A small simulation of a broker queue and its clients writes histories in the
format of :mod:`ackspec.history.record`: producers (plain, transactional, or with
asynchronous confirmations), consumers in every ack mode with a prefetch bound,
NACK / recover / abort and crashes that make the broker redeliver (marked, with
an incremented delivery count), a redelivery limit with a dead-letter queue, and
indeterminate operations (sends and commits whose outcome was never seen).

A correct simulated broker produces histories in which neither checker may find
anything. At most one anomaly is injected per test, by making the simulated
broker misbehave at a random moment, and the generator returns the exact
:class:`~ackspec.history.anomalies.Anomaly` it expects the checkers to report.
Everything is driven by one ``random.Random(seed)``: the same seed gives the same
history.
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ackspec.history.anomalies import Anomaly, AnomalyKind
from ackspec.history.record import Op, Record, RecordType

ACK_MODES = ("auto", "client", "client-individual", "dups-ok", "transacted")
_ACKING = ("client", "client-individual", "transacted")
COMPATIBLE_MODES: dict[AnomalyKind, tuple[str, ...]] = {
    AnomalyKind.LOST: ACK_MODES,
    AnomalyKind.DUPLICATE: ("auto", "client", "transacted"),
    AnomalyKind.DUPLICATE_AFTER_ACK: _ACKING,
    AnomalyKind.ORDER: ACK_MODES,
    AnomalyKind.DELIVERY_COUNT_START: ACK_MODES,
    AnomalyKind.DELIVERY_COUNT_DECREASE: _ACKING,
    AnomalyKind.DEAD_LETTER: _ACKING,
    AnomalyKind.IN_FLIGHT: _ACKING,
}
"""The ack modes in which each kind can be injected without causing a second anomaly."""

_SEND_ERRORS = {"info": "receipt timed out", "fail": "ERROR frame"}
_CONFIRM_ERRORS = {"info": "connection lost", "fail": "rejected"}
"""The error of a send that was not confirmed: indeterminate (``info``) or failed, synchronously or not."""


@dataclass(frozen=True, slots=True)
class SyntheticParams:
    """Shape of one synthetic test history."""

    messages: int = 40  # per producer
    producers: int = 2
    consumers: int = 2
    ack_mode: str = "client"
    prefetch: int = 5
    max_redeliveries: int = 3
    transactional_producer: bool = False
    async_confirms: bool = False
    crash_rate: float = 0.02
    reset_rate: float = 0.03  # NACK / recover / abort of a consumer
    indeterminate_rate: float = 0.03
    fail_rate: float = 0.02
    dups_ok_rate: float = 0.05  # allowed unmarked duplicates in dups-ok mode
    inject: AnomalyKind | None = None


@dataclass(slots=True)
class SyntheticHistory:
    records: list[Record]
    expected: list[Anomaly]
    params: SyntheticParams
    seed: int


@dataclass(slots=True)
class _Msg:
    producer: str
    seq: int
    count: int = 0  # deliveries so far
    beyond: bool = False  # injected: redeliver past the limit once
    early_dlq: bool = False  # injected: dead-letter at the next reset


@dataclass(slots=True)
class _Consumer:
    name: str
    number: int
    generation: int = 0
    outstanding: list[tuple[_Msg, int]] = field(default_factory=list)  # (message, delivery index)
    tx: str | None = None
    tx_counter: int = 0
    limit: int = 0
    limit_index: int = -1

    @property
    def process(self) -> str:
        return f"{self.name}.{self.generation}"


class _Simulation:
    def __init__(self, params: SyntheticParams, seed: int, run: str, test: str, target: str) -> None:
        self.p = params
        self.rng = random.Random(seed)
        self.run, self.test, self.target = run, test, target
        # crc32, not hash(): str hashes differ between processes, and the same seed must give the same history
        key = f"{run}\n{test}".encode()
        self.destination = f"/queue/synthetic.{zlib.crc32(key) % 10**8}"
        self.records: list[Record] = []
        self.expected: list[Anomaly] = []
        self.queue: deque[_Msg] = deque()
        self.dlq: list[_Msg] = []
        self.time = 0
        self.pending = params.inject
        self.max_red = params.max_redeliveries
        self.early_dead_letter: _Msg | None = None

    # --- recording -------------------------------------------------------------------------
    def rec(self, type: RecordType, op: Op, process: str, **fields: Any) -> int:
        index = len(self.records)
        self.time += self.rng.randint(1_000, 200_000)
        self.records.append(Record(run=self.run, index=index, time_ns=self.time, type=type, op=op, process=process,
                                   target=self.target, test=self.test, **fields))
        return index

    def expect(self, kind: AnomalyKind, msg: _Msg, ops: list[int]) -> None:
        self.expected.append(Anomaly.make(kind, self.run, self.test, self.destination, msg.producer, msg.seq, ops))
        self.pending = None

    # --- producers ---------------------------------------------------------------------------
    def produce(self, producer: str, seqs: range) -> Iterator[None]:
        """One producer's connection: its sends (yielding between steps, so producers and consumers interleave)."""
        process = f"{producer}.conn"
        self.rec(RecordType.INVOKE, Op.CONNECT, process)
        self.rec(RecordType.OK, Op.CONNECT, process)
        if self.p.transactional_producer:
            yield from self.produce_in_transactions(producer, process, seqs)
        else:
            for seq in seqs:
                yield from self.send_one(producer, process, seq)
        self.rec(RecordType.INVOKE, Op.DISCONNECT, process)
        self.rec(RecordType.OK, Op.DISCONNECT, process)

    def send_fields(self, producer: str, seq: int) -> dict[str, Any]:
        return {"destination": self.destination, "producer": producer, "seq": seq, "persistent": True}

    def produce_in_transactions(self, producer: str, process: str, seqs: range) -> Iterator[None]:
        """Sends in transactions of 1-5 messages, each committed (or aborted, or left indeterminate)."""
        batch: list[_Msg] = []
        tx: str | None = None
        tx_number = 0
        for seq in seqs:
            common = self.send_fields(producer, seq)
            if tx is None:
                tx_number += 1
                tx = f"{producer}.tx{tx_number}"
                self.rec(RecordType.INVOKE, Op.BEGIN, process, transaction=tx)
                self.rec(RecordType.OK, Op.BEGIN, process, transaction=tx)
            self.rec(RecordType.INVOKE, Op.SEND, process, transaction=tx, **common)
            self.rec(RecordType.OK, Op.SEND, process, transaction=tx, **common)
            batch.append(_Msg(producer, seq))
            if len(batch) >= self.rng.randint(1, 5):
                self.end_transaction(process, tx, batch)
                batch, tx = [], None
            yield None
        if batch and tx is not None:
            self.end_transaction(process, tx, batch)

    def send_one(self, producer: str, process: str, seq: int) -> Iterator[None]:
        """One send outside a transaction: confirmed, failed or indeterminate (or lost, when injected)."""
        msg, common = _Msg(producer, seq), self.send_fields(producer, seq)
        lose = self.pending is AnomalyKind.LOST and self.rng.random() < 0.3
        if lose:
            self.pending = None  # claimed now: another producer must not lose one too
        roll = self.rng.random()
        ops = [self.rec(RecordType.INVOKE, Op.SEND, process, **common)]
        if self.p.async_confirms:
            ops.append(self.rec(RecordType.OK, Op.SEND, process, **common))
            yield None
        outcome = "ok" if lose else self.send_outcome(roll)
        ops.append(self.record_outcome(process, common, outcome))
        if lose:
            self.expect(AnomalyKind.LOST, msg, ops)
        elif outcome == "ok" or (outcome == "info" and self.rng.random() < 0.5):
            self.queue.append(msg)
        yield None

    def send_outcome(self, roll: float) -> str:
        """``ok``, ``info`` (indeterminate) or ``fail``, by the test's rates."""
        if roll >= self.p.indeterminate_rate + self.p.fail_rate:
            return "ok"
        return "info" if roll < self.p.indeterminate_rate else "fail"

    def record_outcome(self, process: str, common: dict[str, Any], outcome: str) -> int:
        """The send's completion: its receipt, or its asynchronous confirmation."""
        op = Op.CONFIRM if self.p.async_confirms else Op.SEND
        if outcome == "ok":
            return self.rec(RecordType.OK, op, process, **common)
        errors = _CONFIRM_ERRORS if self.p.async_confirms else _SEND_ERRORS
        kind = RecordType.INFO if outcome == "info" else RecordType.FAIL
        return self.rec(kind, op, process, error=errors[outcome], **common)

    def end_transaction(self, process: str, tx: str, batch: list[_Msg]) -> None:
        roll = self.rng.random()
        if roll < self.p.fail_rate:
            self.rec(RecordType.INVOKE, Op.ABORT, process, transaction=tx)
            self.rec(RecordType.OK, Op.ABORT, process, transaction=tx)
            return
        self.rec(RecordType.INVOKE, Op.COMMIT, process, transaction=tx)
        if roll < self.p.fail_rate + self.p.indeterminate_rate:
            self.rec(RecordType.INFO, Op.COMMIT, process, transaction=tx, error="connection lost")
            if self.rng.random() < 0.5:
                self.queue.extend(batch)
            return
        self.rec(RecordType.OK, Op.COMMIT, process, transaction=tx)
        self.queue.extend(batch)

    # --- consumers ---------------------------------------------------------------------------
    def subscribe(self, c: _Consumer, first: bool) -> None:
        process = c.process
        self.rec(RecordType.INVOKE, Op.CONNECT, process)
        self.rec(RecordType.OK, Op.CONNECT, process)
        value = {"max_redeliveries": self.max_red} if first else None
        c.limit = self.p.prefetch
        self.rec(RecordType.INVOKE, Op.SUBSCRIBE, process, destination=self.destination,
                 subscription=f"sub-{c.number}", ack_mode=self.p.ack_mode, limit=c.limit, value=value)
        c.limit_index = self.rec(RecordType.OK, Op.SUBSCRIBE, process, destination=self.destination,
                                 subscription=f"sub-{c.number}", ack_mode=self.p.ack_mode, limit=c.limit)
        if self.p.ack_mode == "transacted":
            self.begin(c)

    def begin(self, c: _Consumer) -> None:
        c.tx_counter += 1
        c.tx = f"{c.process}.tx{c.tx_counter}"
        self.rec(RecordType.INVOKE, Op.BEGIN, c.process, transaction=c.tx)
        self.rec(RecordType.OK, Op.BEGIN, c.process, transaction=c.tx)

    @property
    def settles_on_delivery(self) -> bool:
        return self.p.ack_mode in ("auto", "dups-ok")

    def deliver(self, c: _Consumer, msg: _Msg, *, count: int | None = None, redelivered: bool | None = None,
                again: bool = False) -> int:
        if not again:
            msg.count += 1
        reported = msg.count if count is None else count
        marked = msg.count > 1 if redelivered is None else redelivered
        common = {"destination": self.destination, "subscription": f"sub-{c.number}", "ack_mode": self.p.ack_mode,
                  "transaction": c.tx}
        self.rec(RecordType.INVOKE, Op.RECEIVE, c.process, **common)
        index = self.rec(RecordType.OK, Op.RECEIVE, c.process, producer=msg.producer, seq=msg.seq,
                         redelivered=marked, delivery_count=reported, message_id=f"ID:{msg.producer}-{msg.seq}",
                         ack_id=f"{c.process}-{len(self.records)}", **common)
        if not self.settles_on_delivery:
            c.outstanding.append((msg, index))
        return index

    def ack_all(self, c: _Consumer) -> int | None:
        """Acknowledge everything outstanding; returns the index where the acknowledgement took effect."""
        if not c.outstanding:
            return None
        mode = self.p.ack_mode
        at: int | None = None
        if mode == "transacted":
            self.rec(RecordType.INVOKE, Op.COMMIT, c.process, transaction=c.tx)
            at = self.rec(RecordType.OK, Op.COMMIT, c.process, transaction=c.tx)
            self.begin(c)
        elif mode == "client":
            msg, _ = c.outstanding[-1]
            fields = {"subscription": f"sub-{c.number}", "producer": msg.producer, "seq": msg.seq,
                      "destination": self.destination, "ack_mode": mode}
            self.rec(RecordType.INVOKE, Op.ACK, c.process, **fields)
            at = self.rec(RecordType.OK, Op.ACK, c.process, **fields)
        else:
            for msg, _ in list(c.outstanding):
                at = self.ack_one(c, msg)
        c.outstanding.clear()
        return at

    def ack_one(self, c: _Consumer, msg: _Msg, op: Op = Op.ACK, outcome: str | None = None) -> int:
        fields = {"subscription": f"sub-{c.number}", "producer": msg.producer, "seq": msg.seq,
                  "destination": self.destination, "ack_mode": self.p.ack_mode, "outcome": outcome}
        self.rec(RecordType.INVOKE, op, c.process, **fields)
        return self.rec(RecordType.OK, op, c.process, **fields)

    def reset(self, c: _Consumer) -> None:
        """NACK (individual), recover (client) or abort (transacted): the broker redelivers what was outstanding."""
        mode = self.p.ack_mode
        if mode == "client-individual":
            for msg, _ in list(c.outstanding):
                self.ack_one(c, msg, Op.NACK, "nack")
        elif mode == "client":
            self.rec(RecordType.INVOKE, Op.RECOVER, c.process)
            self.rec(RecordType.OK, Op.RECOVER, c.process)
        else:
            self.rec(RecordType.INVOKE, Op.ABORT, c.process, transaction=c.tx)
            self.rec(RecordType.OK, Op.ABORT, c.process, transaction=c.tx)
            self.begin(c)
        self.requeue(c)

    def crash(self, c: _Consumer) -> None:
        self.rec(RecordType.INFO, Op.CRASH, c.process, error="connection dropped by test")
        self.requeue(c)
        c.generation += 1
        c.tx = None
        self.subscribe(c, first=False)

    def requeue(self, c: _Consumer) -> None:
        for msg, _ in reversed(c.outstanding):
            if msg.early_dlq or (msg.count >= self.max_red + 1 and not msg.beyond):
                msg.early_dlq = False
                self.dlq.append(msg)
            else:
                msg.beyond = False
                self.queue.appendleft(msg)
        c.outstanding.clear()

    def consume(self, c: _Consumer) -> None:
        """One step of a consumer in a correct broker (or the injected misbehaviour when it is due)."""
        p, rng, mode = self.p, self.rng, self.p.ack_mode
        if self.pending is not None and self.pending is not AnomalyKind.LOST and self.inject(c):
            return
        roll = rng.random()
        if not self.settles_on_delivery and c.outstanding:
            if roll < p.crash_rate:
                self.crash(c)
                return
            if roll < p.crash_rate + p.reset_rate:
                self.reset(c)
                return
            if roll < 0.35 or len(c.outstanding) >= c.limit or not self.queue:
                if mode == "client-individual" and rng.random() < 0.5:
                    msg, _ = c.outstanding.pop(rng.randrange(len(c.outstanding)))
                    self.ack_one(c, msg)
                else:
                    self.ack_all(c)
                return
        if not self.queue:
            return
        if roll > 0.97:
            c.limit += rng.randint(0, 3)
            c.limit_index = self.rec(RecordType.OK, Op.FLOW, c.process, subscription=f"sub-{c.number}",
                                     destination=self.destination, limit=c.limit)
        msg = self.queue.popleft()
        self.deliver(c, msg)
        if mode == "dups-ok" and rng.random() < p.dups_ok_rate:
            self.deliver(c, msg, again=True, redelivered=False, count=msg.count)

    # --- injections ----------------------------------------------------------------------------
    def inject(self, c: _Consumer) -> bool:
        """Make the broker misbehave once, if the state allows; True when it did."""
        if c.outstanding:
            self.ack_all(c)
            return True
        head = self.queue[0] if self.queue else None
        if head is None or head.count != 0 or len(self.queue) < c.limit + 2:
            return False
        kind = self.pending
        if kind is None or kind not in self.INJECTIONS:  # pragma: no cover - every kind is handled
            raise AssertionError(kind)
        if not self.INJECTIONS[kind](self, c, head):
            return False
        self.pending = None  # injected (an early dead-letter is expected when the DLQ is read)
        self.ack_all(c)
        return True

    def inject_order(self, c: _Consumer, first: _Msg) -> bool:
        """Deliver a producer's second message before its first."""
        second = next((m for m in list(self.queue)[1:] if m.producer == first.producer), None)
        if second is None or second.count != 0:
            return False
        self.queue.remove(first)
        self.queue.remove(second)
        later = self.deliver(c, second)
        earlier = self.deliver(c, first)
        self.expect(AnomalyKind.ORDER, first, [later, earlier])
        return True

    def inject_duplicate(self, c: _Consumer, head: _Msg) -> bool:
        """Deliver the same message twice, the second time unmarked."""
        msg = self.queue.popleft()
        first_index = self.deliver(c, msg)
        again = self.deliver(c, msg, again=True, redelivered=False, count=1)
        self.expect(AnomalyKind.DUPLICATE, msg, [first_index, again])
        return True

    def inject_duplicate_after_ack(self, c: _Consumer, head: _Msg) -> bool:
        """Deliver a message again after its acknowledgement took effect."""
        msg = self.queue.popleft()
        first_index = self.deliver(c, msg)
        acked_at = self.ack_all(c)
        assert acked_at is not None
        again = self.deliver(c, msg)
        self.expect(AnomalyKind.DUPLICATE_AFTER_ACK, msg, [first_index, acked_at, again])
        return True

    def inject_delivery_count_start(self, c: _Consumer, head: _Msg) -> bool:
        """A first delivery whose delivery count is not 1."""
        msg = self.queue.popleft()
        index = self.deliver(c, msg, count=self.rng.choice((0, 2)), redelivered=False)
        self.expect(AnomalyKind.DELIVERY_COUNT_START, msg, [index])
        return True

    def inject_delivery_count_decrease(self, c: _Consumer, msg: _Msg) -> bool:
        """A third delivery whose count went back to 1 (needs a redelivery limit of 2 or more)."""
        if self.max_red < 2:
            self.pending = None  # cannot happen within the limit; the generator avoids this
            return False
        indexes = []
        for _ in range(2):
            indexes.append(self.deliver(c, self.queue.popleft()))
            self.reset(c)
        index = self.deliver(c, self.queue.popleft(), count=1, redelivered=True)
        self.expect(AnomalyKind.DELIVERY_COUNT_DECREASE, msg, [indexes[-1], index])
        return True

    def inject_dead_letter(self, c: _Consumer, msg: _Msg) -> bool:
        """Dead-letter a message before its limit (expected when the DLQ is read), or redeliver it past it."""
        if self.rng.random() < 0.5:
            msg.early_dlq = True
            self.deliver(c, self.queue.popleft())
            self.reset(c)
            self.early_dead_letter = msg
            assert not self.dlq or self.dlq[-1] is msg
            return True
        for _ in range(self.max_red):
            self.deliver(c, self.queue.popleft())
            self.reset(c)
        msg.beyond = True
        self.deliver(c, self.queue.popleft())
        self.reset(c)
        index = self.deliver(c, self.queue.popleft())
        self.expect(AnomalyKind.DEAD_LETTER, msg, [index])
        return True

    def inject_in_flight(self, c: _Consumer, head: _Msg) -> bool:
        """Deliver one message more than the consumer's prefetch bound allows."""
        index = -1
        for _ in range(c.limit + 1):
            index = self.deliver(c, self.queue.popleft())
        self.expect(AnomalyKind.IN_FLIGHT, c.outstanding[-1][0], [c.limit_index, index])
        return True

    INJECTIONS: ClassVar[dict[AnomalyKind, Callable[[_Simulation, _Consumer, _Msg], bool]]] = {
        AnomalyKind.ORDER: inject_order,
        AnomalyKind.DUPLICATE: inject_duplicate,
        AnomalyKind.DUPLICATE_AFTER_ACK: inject_duplicate_after_ack,
        AnomalyKind.DELIVERY_COUNT_START: inject_delivery_count_start,
        AnomalyKind.DELIVERY_COUNT_DECREASE: inject_delivery_count_decrease,
        AnomalyKind.DEAD_LETTER: inject_dead_letter,
        AnomalyKind.IN_FLIGHT: inject_in_flight,
    }
    """How each kind a consumer's step injects is made (a loss is injected by a producer)."""

    # --- the whole test ---------------------------------------------------------------------------
    def simulate(self) -> None:
        p, rng = self.p, self.rng
        consumers = [_Consumer(name=f"consumer-{i}", number=i) for i in range(1, p.consumers + 1)]
        for i, c in enumerate(consumers):
            self.subscribe(c, first=i == 0)
        producers = [self.produce(f"producer-{i}", range(1, p.messages + 1)) for i in range(1, p.producers + 1)]
        extra = steps = 0
        while producers or self.queue or any(c.outstanding for c in consumers) or self.pending is not None:
            steps += 1
            if steps > 1_000_000:  # pragma: no cover - a bug in the simulation, not in a checker
                raise RuntimeError(f"synthetic simulation does not terminate: {self.p}")
            need = max(c.limit for c in consumers) + 5
            ready = self.pending in (None, AnomalyKind.LOST) or len(self.queue) >= need
            if producers and (not ready or rng.random() < 0.5):
                gen = rng.choice(producers)
                if next(gen, "done") == "done":
                    producers.remove(gen)
                continue
            lost_due = self.pending is AnomalyKind.LOST
            if not producers and self.pending is not None and (lost_due or not self.queue_ready(need)):
                extra += 1  # keep producing until the injection can happen
                producers.append(self.produce(f"producer-x{extra}", range(1, need + 3)))
                continue
            self.consume(rng.choice(consumers))
        for c in consumers:
            self.ack_all(c)
        if self.dlq:
            for msg in self.dlq:
                common = {"destination": self.destination, "subscription": "dlq", "ack_mode": "auto"}
                self.rec(RecordType.INVOKE, Op.RECEIVE, "dlq-reader", **common)
                index = self.rec(RecordType.OK, Op.RECEIVE, "dlq-reader", producer=msg.producer, seq=msg.seq,
                                 redelivered=True, delivery_count=msg.count, limit=self.max_red,
                                 value={"dead_letter": True, "reason": "max redeliveries"}, **common)
                if self.early_dead_letter is msg:
                    self.expect(AnomalyKind.DEAD_LETTER, msg, [index])
        for c in consumers:
            self.rec(RecordType.INVOKE, Op.DISCONNECT, c.process)
            self.rec(RecordType.OK, Op.DISCONNECT, c.process)

    def queue_ready(self, need: int) -> bool:
        return len(self.queue) >= need and self.queue[0].count == 0


def generate(params: SyntheticParams, seed: int, *, run: str = "synthetic-run", test: str | None = None,
             target: str = "synthetic://broker") -> SyntheticHistory:
    """One test's history under ``params``; ``expected`` lists the injected anomaly (if any)."""
    test = test or f"tests/synthetic.py::test_{seed}"
    sim = _Simulation(params, seed, run, test, target)
    sim.simulate()
    return SyntheticHistory(sim.records, sorted(sim.expected), params, seed)


def random_params(rng: random.Random, inject: AnomalyKind | None) -> SyntheticParams:
    """Realistic parameters for one test, compatible with the kind to inject."""
    modes = COMPATIBLE_MODES[inject] if inject is not None else ACK_MODES
    return SyntheticParams(
        messages=rng.randint(5, 40), producers=rng.randint(1, 3), consumers=rng.randint(1, 3),
        ack_mode=rng.choice(modes), prefetch=rng.randint(2, 8), max_redeliveries=rng.randint(2, 5),
        transactional_producer=inject is not AnomalyKind.LOST and rng.random() < 0.25,
        async_confirms=rng.random() < 0.3,
        crash_rate=rng.choice((0.0, 0.01, 0.03)), reset_rate=rng.choice((0.0, 0.02, 0.05)),
        indeterminate_rate=rng.choice((0.0, 0.02, 0.05)), fail_rate=rng.choice((0.0, 0.02)),
        inject=inject,
    )


def generate_suite(tests: int, seed: int, *, anomaly_rate: float = 0.3, run: str = "synthetic-run",
                   target: str = "synthetic://broker") -> Iterator[SyntheticHistory]:
    """Many tests' histories; about ``anomaly_rate`` of them get one injected anomaly (kinds in turn)."""
    rng = random.Random(seed)
    kinds = list(AnomalyKind)
    for number in range(tests):
        inject = kinds[number % len(kinds)] if rng.random() < anomaly_rate else None
        params = random_params(rng, inject)
        yield generate(params, rng.randrange(2**32), run=run, test=f"tests/synthetic.py::test_{number}",
                       target=target)
