"""The mutant reference brokers of the quality checks, built from outside the broker.

Each mutant makes the reference broker wrong in one way, so the suite can prove it catches that bug
(``test_mutants.py`` over STOMP, ``test_amqp_mutants.py`` over AMQP). None is a switch inside the
broker: each is a :class:`~ackspec.reference.parts.BrokerParts` whose core, STOMP session or AMQP
connection is a subclass overriding one small method, or filtering what it produces (the effects of
the core, the frames a session writes, the frames a connection reads).

Run the suite against one: ``ackspec run --broker-parts tests.quality.mutants:NAME`` from the
repository root (``NAME`` a key of :data:`MUTANTS`, e.g. ``lose-message``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from ackspec.conformance.window import WINDOW_HEADER
from ackspec.reference.amqp.connection import AmqpConnection
from ackspec.reference.amqp.inflight import InFlight
from ackspec.reference.amqp.links import answers_transfer
from ackspec.reference.amqp.pump import EnginePump
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Confirm, Deliver, Effect
from ackspec.reference.broker.hub import Hub
from ackspec.reference.broker.model import ACCEPT, AckMode, Outcome, Settlement
from ackspec.reference.broker.publishing import Publisher
from ackspec.reference.broker.settlement import Settler
from ackspec.reference.broker.topics import Topics
from ackspec.reference.parts import BrokerParts
from ackspec.reference.stomp import frames as F
from ackspec.reference.stomp.codec import FrameParser, escape
from ackspec.reference.stomp.frames import Frame
from ackspec.reference.stomp.session import State, StompSession, _Receipt

from .amqp_frames import FrameRewriter, SentCounts

# ---------------------------------------------------------------- the core
#
# A core mutant is a BrokerCore subclass that overrides one of its public methods, or names a subclass of one
# of its parts (``dispatcher_part``, ``settler_part``, ``topics_part``, ``publisher_part``) overriding one hook.


class _LosingPublisher(Publisher):
    """Every second message routed outside a transaction, per destination, is dropped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._published: dict[str, int] = {}

    def route(self, conn: Any, q: Any, destination: str, messages: Any, typed: Any, out: list[Effect]) -> None:
        for message in messages:  # each message a run of one: every second one only confirmed
            n = self._published[destination] = self._published.get(destination, 0) + 1
            if n % 2 == 0:
                if message[3] is not None:
                    out.append(Confirm(conn, message[3]))
                continue
            super().route(conn, q, destination, (message,), typed, out)


class LoseMessage(BrokerCore):
    """Every second SEND outside a transaction, per destination, is confirmed and then dropped."""

    publisher_part = _LosingPublisher


class LeakTxSends(BrokerCore):
    """Transactional SENDs are visible at once (and so survive ABORT)."""

    def publish(self, conn: Any, destination: str, *args: Any, **kwargs: Any) -> list[Effect]:
        if kwargs.get("tx") is not None:
            self._tx(self._conn(conn), kwargs["tx"])  # an unknown transaction is still an error
            kwargs["tx"] = None
        return super().publish(conn, destination, *args, **kwargs)


class _RewritingDispatcher(Dispatcher):
    """A dispatcher whose deliveries are rewritten by :meth:`rewrite` (the stored message is untouched):
    a filter on the core's effects."""

    def rewrite(self, effect: Deliver) -> Deliver:
        raise NotImplementedError

    def deliver(self, s: Any, entry: Any, out: list[Effect]) -> None:
        start = len(out)
        super().deliver(s, entry, out)
        for i in range(start, len(out)):
            effect = out[i]
            if type(effect) is Deliver:
                out[i] = self.rewrite(effect)


class _NoRedeliveredFlag(_RewritingDispatcher):
    def rewrite(self, effect: Deliver) -> Deliver:
        return effect._replace(redelivered=False)


class NoRedeliveredFlag(BrokerCore):
    """Redeliveries carry redelivered:false."""

    dispatcher_part = _NoRedeliveredFlag


class _StuckDeliveryCount(_RewritingDispatcher):
    def rewrite(self, effect: Deliver) -> Deliver:
        return effect._replace(delivery_count=0)


class StuckDeliveryCount(BrokerCore):
    """The delivery count never grows."""

    dispatcher_part = _StuckDeliveryCount


class _MangleBody(_RewritingDispatcher):
    def rewrite(self, effect: Deliver) -> Deliver:
        body = effect.message.body
        if not body:
            return effect
        return effect._replace(message=effect.message._replace(body=bytes([body[0] ^ 0x01]) + body[1:]))


class MangleBody(BrokerCore):
    """One byte of each delivered body is changed."""

    dispatcher_part = _MangleBody


class _TruncateBodyAtNul(_RewritingDispatcher):
    def rewrite(self, effect: Deliver) -> Deliver:
        body = effect.message.body.split(b"\x00", 1)[0]
        return effect._replace(message=effect.message._replace(body=body))


class TruncateBodyAtNul(BrokerCore):
    """Delivered bodies end at their first NUL byte."""

    dispatcher_part = _TruncateBodyAtNul


class _MangleHeader(_RewritingDispatcher):
    def rewrite(self, effect: Deliver) -> Deliver:
        headers = effect.message.headers
        if not headers:
            return effect
        name, value = headers[0]
        changed = (value[:-1] + chr(ord(value[-1]) ^ 1)) if value else "x"
        return effect._replace(message=effect.message._replace(headers=((name, changed), *headers[1:])))


class MangleHeader(BrokerCore):
    """One character of the first user header of each delivery is changed."""

    dispatcher_part = _MangleHeader


class _DuplicatingDispatcher(Dispatcher):
    """Each delivery is followed by a copy without the redelivered flag, under an id kept in :attr:`aliases`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases: set[int] = set()

    def deliver(self, s: Any, entry: Any, out: list[Effect]) -> None:
        super().deliver(s, entry, out)
        dup = next(self.delivery_ids)
        out.append(Deliver(s.conn.conn_id, s.sub_id, dup, entry.msg, False, entry.delivery_count))
        if s.ack_mode is not AckMode.AUTO:
            self.aliases.add(dup)
            s.conn.deliveries[dup] = s


class DuplicateNoFlag(BrokerCore):
    """Each delivery is sent twice, the copy without the redelivered flag; settling the copy does nothing."""

    dispatcher_part = _DuplicatingDispatcher
    dispatcher: _DuplicatingDispatcher

    def settle(self, conn: Any, delivery_id: int, settlement: Settlement = ACCEPT, **options: Any) -> list[Effect]:
        aliases = self.dispatcher.aliases
        if delivery_id in aliases:
            aliases.discard(delivery_id)
            self._conn(conn).deliveries.pop(delivery_id, None)
            confirm = options.get("confirm")
            return [Confirm(conn, confirm)] if confirm is not None else []
        return super().settle(conn, delivery_id, settlement, **options)

    def accept_many(self, conn: Any, delivery_ids: list[int]) -> list[Effect]:
        out: list[Effect] = []
        for d in delivery_ids:
            out += self.settle(conn, d, ACCEPT, cumulative=False)
        return out

    def _drop_sub(self, s: Any, out: list[Effect], touched: list[Any]) -> None:
        super()._drop_sub(s, out, touched)
        aliases = self.dispatcher.aliases
        for d in [d for d, owner in s.conn.deliveries.items() if owner is s and d in aliases]:
            del s.conn.deliveries[d]
            aliases.discard(d)


class _ReorderingDispatcher(Dispatcher):
    def deliver(self, s: Any, entry: Any, out: list[Effect]) -> None:
        q = s.queue
        if q.peek() is not None:
            later = q.pop()
            q.give_back(entry)
            entry = later
        super().deliver(s, entry, out)


class Reorder(BrokerCore):
    """The head message is delivered after the next one."""

    dispatcher_part = _ReorderingDispatcher


class _QueueToTwo(Dispatcher):
    def deliver(self, s: Any, entry: Any, out: list[Effect]) -> None:
        super().deliver(s, entry, out)
        q = s.queue
        if len(q.consumers) > 1:
            other = q.consumers[q.rr % len(q.consumers)]
            if other is not s:
                copy = self.store.entry(entry.msg, entry.delivery_count, entry.redelivered)
                super().deliver(other, copy, out)


class QueueToTwo(BrokerCore):
    """A queue message also reaches a second consumer."""

    dispatcher_part = _QueueToTwo


class _IgnoreAck(Settler):
    def apply(self, s: Any, ids: Sequence[int], st: Settlement, out: list[Effect], removed: Any) -> bool:
        if st.outcome is not Outcome.ACCEPTED:
            return super().apply(s, ids, st, out, removed)
        for d in ids:
            entry = s.unacked.pop(d)
            s.in_tx.discard(d)
            s.conn.deliveries.pop(d, None)
            entry.redelivered = True
            s.queue.give_back(entry)
        return False


class IgnoreAck(BrokerCore):
    """An acknowledged message is put back and redelivered."""

    settler_part = _IgnoreAck


class _NackAcks(Settler):
    def apply(self, s: Any, ids: Sequence[int], st: Settlement, out: list[Effect], removed: Any) -> bool:
        if st.outcome is Outcome.REQUEUE:
            st = ACCEPT
        return super().apply(s, ids, st, out, removed)


class NackAcks(BrokerCore):
    """NACK consumes the message like an ACK."""

    settler_part = _NackAcks


class NackIgnored(BrokerCore):
    """NACK is confirmed but does nothing (the message stays with the consumer)."""

    def settle(self, conn: Any, delivery_id: int, settlement: Settlement = ACCEPT, **options: Any) -> list[Effect]:
        s = self._conn(conn).deliveries.get(delivery_id)
        if settlement.outcome is Outcome.REQUEUE and s is not None and delivery_id in s.unacked:
            confirm = options.get("confirm")
            return [Confirm(conn, confirm)] if confirm is not None else []
        return super().settle(conn, delivery_id, settlement, **options)


class ClientAsIndividual(BrokerCore):
    """ack:client acknowledgements are not cumulative."""

    def settle(self, conn: Any, delivery_id: int, settlement: Settlement = ACCEPT, **options: Any) -> list[Effect]:
        s = self._conn(conn).deliveries.get(delivery_id)
        if options.get("cumulative") is None and s is not None and s.ack_mode is AckMode.CLIENT:
            options["cumulative"] = False
        return super().settle(conn, delivery_id, settlement, **options)


class CommitDropsOne(BrokerCore):
    """COMMIT loses the last SEND of a transaction of several."""

    def commit(self, conn: Any, tx: str, **options: Any) -> list[Effect]:
        t = self._conn(conn).txs.get(tx)
        if t is not None and len(t.sends) > 1:
            t.sends.pop()
        return super().commit(conn, tx, **options)


class AbortKeepsSends(BrokerCore):
    """ABORT delivers the transaction's SENDs."""

    def abort(self, conn: Any, tx: str, **options: Any) -> list[Effect]:
        t = self._conn(conn).txs.get(tx)
        out: list[Effect] = []
        if t is not None:
            for q, m in t.sends:  # published again as if outside the transaction
                self.publisher.route(m.producer, q, m.destination, ((m.body, m.headers, m.persistent, None),),
                                     m.typed, out)
            t.sends.clear()
        return out + super().abort(conn, tx, **options)


class AbortKeepsAcks(BrokerCore):
    """ABORT applies the transaction's acknowledgements."""

    def abort(self, conn: Any, tx: str, **options: Any) -> list[Effect]:
        c = self._conn(conn)
        t = c.txs.get(tx)
        out: list[Effect] = []
        if t is not None:
            for d, st in t.settles:
                s = c.deliveries.get(d)
                if s is not None and d in s.unacked:
                    s.in_tx.discard(d)
                    self.settler.apply(s, (d,), st, out, None)
                    self.dispatcher.dispatch(s.queue, out)
            t.settles.clear()
        return out + super().abort(conn, tx, **options)


class _Redeliveries(BrokerCore):
    """A core whose redelivery limit is ``limit(configured)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config = self.settler.config = dataclasses.replace(
            self.config, max_redeliveries=self.limit(self.config.max_redeliveries))

    def limit(self, configured: int) -> int:
        raise NotImplementedError


class NoDeadLetter(_Redeliveries):
    """The redelivery limit is never enforced."""

    def limit(self, configured: int) -> int:
        return 1 << 62


class EarlyDeadLetter(_Redeliveries):
    """Dead-lettered one redelivery too early."""

    def limit(self, configured: int) -> int:
        return configured - 1


class _SubscribeOptions(BrokerCore):
    """A core that changes a consumer's options (:meth:`options`) before subscribing it."""

    def options(self, options: dict[str, Any]) -> None:
        raise NotImplementedError

    def subscribe(self, conn: Any, sub: str, destination: str, **options: Any) -> list[Effect]:
        self.options(options)
        return super().subscribe(conn, sub, destination, **options)


class SelectorIgnored(_SubscribeOptions):
    """Consumers get the messages their selector does not match too."""

    def options(self, options: dict[str, Any]) -> None:
        options["selector"] = None


class NoLocalIgnored(_SubscribeOptions):
    """A noLocal subscription gets its own connection's messages too."""

    def options(self, options: dict[str, Any]) -> None:
        options["no_local"] = False


class _PrefetchChanged(BrokerCore):
    """A core that enforces ``prefetch(bound)`` instead of a consumer's prefetch bound."""

    def prefetch(self, bound: int) -> int | None:
        raise NotImplementedError

    def subscribe(self, conn: Any, sub: str, destination: str, **options: Any) -> list[Effect]:
        out = super().subscribe(conn, sub, destination, **options)
        s = self._sub(conn, sub)
        if s.prefetch is not None:
            s.prefetch = self.prefetch(s.prefetch)
            self.dispatcher.dispatch(s.queue, out)
        return out


class IgnorePrefetch(_PrefetchChanged):
    """Deliveries beyond the prefetch bound."""

    def prefetch(self, bound: int) -> int | None:
        return None


class PrefetchOffByOne(_PrefetchChanged):
    """One delivery more than the prefetch allows."""

    def prefetch(self, bound: int) -> int | None:
        return bound + 1


class _FirstSubscriberOnly(Topics):
    def copies(self, msg: Any) -> Any:
        return super().copies(msg)[:1]


class TopicOneSubscriber(BrokerCore):
    """A topic message reaches only its first subscriber."""

    topics_part = _FirstSubscriberOnly


class DurableForgets(BrokerCore):
    """A durable subscription is deleted when its consumer goes (as a nondurable one)."""

    def _drop_sub(self, s: Any, out: list[Effect], touched: list[Any]) -> None:
        super()._drop_sub(s, out, touched)
        q = s.queue
        durables = self.topics.durables
        if q.durable is not None and not q.consumers and durables.get(q.durable) is q:
            self.topics.remove_durable(q.durable, q, out)


class ClientIdShared(BrokerCore):
    """A second connection may take a client id an open connection holds."""

    def open(self, conn: Any, *, client_id: str | None = None, **options: Any) -> list[Effect]:
        out = super().open(conn, **options)
        self._conn(conn).client_id = client_id
        return out


# ---------------------------------------------------------------- the STOMP session


class _FrameFilter(StompSession):
    """A session that drops one header line (:attr:`drop`: command, header prefix) from the frames it writes."""

    drop: tuple[bytes, bytes] = (b"", b"")

    def _write(self, data: bytes) -> None:
        command, header = self.drop
        if data.startswith(command + b"\n"):
            head, sep, rest = data.partition(b"\n\n")
            lines = head.split(b"\n")
            for i, line in enumerate(lines[1:], 1):
                if line.startswith(header):
                    del lines[i]
                    break
            data = b"\n".join(lines) + sep + rest
        super()._write(data)


class MessageNoSubscription(_FrameFilter):
    drop = (b"MESSAGE", b"subscription:")


class MessageNoDestination(_FrameFilter):
    drop = (b"MESSAGE", b"destination:")


class ErrorNoMessage(_FrameFilter):
    drop = (b"ERROR", b"message:")


class ErrorNoReceiptId(_FrameFilter):
    drop = (b"ERROR", b"receipt-id:")


class DoubleEscapeHeaders(StompSession):
    """User header values are escaped twice on MESSAGE frames."""

    def _deliver(self, d: Deliver) -> None:
        msg = d.message
        headers = tuple((name, escape(value, self.version)) for name, value in msg.headers)
        super()._deliver(d._replace(message=msg._replace(headers=headers)))


class NoReceipt(StompSession):
    """RECEIPTs are never sent."""

    def _queue_receipt(self, receipt_id: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        return


class WrongReceiptId(StompSession):
    """RECEIPT carries a receipt-id that was never asked for."""

    def _queue_receipt(self, receipt_id: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        super()._queue_receipt(receipt_id + "-wrong", extra)


class ReorderReceipts(StompSession):
    """A receipt is held back 0.2 s and overtaken by the next one."""

    def _queue_receipt(self, receipt_id: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        frame = b"RECEIPT\nreceipt-id:" + escape(receipt_id, self.version).encode() + b"\n\n\x00"
        if self._receipts:  # overtake the receipt held back
            self._write(frame)
        else:
            self._receipts.append(_Receipt(frame, self.clock() + 0.2))
        if self.state is State.DISCONNECTING:
            self._maybe_finish_disconnect()


class ErrorNoClose(StompSession):
    """ERROR frames leave the connection open (the parser starts over after a malformed frame)."""

    _failing = False

    def _fail(self, *args: Any, **kwargs: Any) -> None:
        self._failing = True
        try:
            super()._fail(*args, **kwargs)
        finally:
            self._failing = False

    def _close(self, *, abrupt: bool) -> None:
        if not self._failing:
            super()._close(abrupt=abrupt)

    def feed(self, data: bytes) -> Any:
        error = self.error
        result = super().feed(data)
        if self.error is not error:
            self.parser = FrameParser(max_frame=self.config.max_frame, max_headers=self.config.max_headers,
                                      max_header_length=self.config.max_header_length, commands=F.CLIENT_COMMANDS)
            self.parser.version = self.version
        return result


class SolaceStyleWindow(StompSession):
    """A session that holds the RECEIPTs of a publish window's SENDs (those naming their window in
    ``ackspec-publish-window``) and sends the latest one when :meth:`batch` of them are held or :attr:`timer`
    seconds after the first: a Solace-style broker. Its batch and timer are right here; a mutant changes one.
    Other frames' receipts are answered as usual. Not a mutant: a conformant broker that batches, which the
    publish-window tests must pass (:data:`CONFORMANT`)."""

    timer = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._windows: dict[str, int] = {}  # receipt id -> the window its SEND named
        self._held: list[str] = []
        self._held_since = 0.0

    @staticmethod
    def batch(window: int) -> int:
        return max(1, math.ceil(window / 3))

    def handle_frame(self, frame: Frame) -> None:
        window, receipt = frame.get(WINDOW_HEADER), frame.get("receipt")
        if frame.command == F.SEND and receipt is not None and window is not None and window.isdigit():
            self._windows[receipt] = int(window)
        super().handle_frame(frame)

    def _queue_receipt(self, receipt_id: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        window = self._windows.pop(receipt_id, None)
        if window is None or extra:
            super()._queue_receipt(receipt_id, extra)
            return
        if not self._held:
            self._held_since = self.clock()
        self._held.append(receipt_id)
        if len(self._held) >= self.batch(window):
            self._release_held()

    def _release_held(self) -> None:
        if self._held:
            last = self._held[-1]
            self._held.clear()
            super()._queue_receipt(last)

    def tick(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        if self._held and now - self._held_since >= self.timer:
            self._release_held()
        super().tick(now)

    def next_deadline(self) -> float | None:
        base = super().next_deadline()
        if not self._held:
            return base
        due = self._held_since + self.timer
        return due if base is None else min(base, due)


class WindowAckLateThird(SolaceStyleWindow):
    """A publish window's SENDs are confirmed once two thirds of the window are outstanding (or on the timer)."""

    @staticmethod
    def batch(window: int) -> int:
        return max(1, math.ceil(2 * window / 3))


class WindowAckLateTimer(SolaceStyleWindow):
    """A publish window's SENDs below a third of it are confirmed only after three times the one-second timer."""

    timer = 3.0


class WindowAckBeforeSync(StompSession):
    """A publish window's SENDs are confirmed on arrival, before they are even journalled, let alone synced."""

    def handle_frame(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if frame.command == F.SEND and receipt is not None and frame.get(WINDOW_HEADER) is not None:
            self._queue_receipt(receipt)
            frame = Frame(frame.command, tuple(h for h in frame.headers if h[0] != "receipt"), frame.body)
        super().handle_frame(frame)


# ---------------------------------------------------------------- the AMQP connection


class _RewrittenInput(AmqpConnection):
    """A connection that misreads the peer's frames (see amqp_frames.py): :attr:`mutant` names how."""

    mutant = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rewriter = FrameRewriter(lambda name: name == self.mutant)

    def _amqp_input(self, data: bytes) -> bytes:
        return self._rewriter.feed(data)


class IgnoreCredit(_RewrittenInput):
    mutant = "ignore-prefetch"


class RangeSettlesLast(_RewrittenInput):
    mutant = "client-as-individual"


class AnnouncedNotFinal(_RewrittenInput):
    mutant = "announced-not-final"


class _WatchedPump(EnginePump):
    """An engine pump that shows the broker's output to a :class:`SentCounts` as it is taken."""

    __slots__ = ("counts",)
    counts: SentCounts

    def take_output(self) -> bytes:
        data = super().take_output()
        self.counts.watch_output(data)
        return data


class CreditFromOwnCount(_RewrittenInput):
    mutant = "credit-from-own-count"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        counts = SentCounts()
        self._rewriter = FrameRewriter(lambda name: name == self.mutant, counts)
        pump = _WatchedPump(self.transport, self.collector, self._on_event, dispatch=self._piece)
        pump.counts = counts
        self._engine = pump


class LateTransferAtDetach(CreditFromOwnCount):
    """One transfer beyond the receiver's credit, sent as the receiver detaches its link (amqp_frames.py)."""

    mutant = "late-transfer-at-detach"


class _HubAnswers(InFlight):
    """Unsettled deliveries whose batch's confirmations all go through the hub (none answered in place)."""

    def run_published(self, effects: list[Effect]) -> None:
        if effects:
            self.hub.apply(effects)


class _TransferAnswers(AmqpConnection):
    """A connection whose answers to transfers go through :meth:`on_confirm`, which a mutant overrides."""

    inflight_class = _HubAnswers

    @staticmethod
    def is_transfer(effect: Confirm) -> bool:
        return answers_transfer(effect.token)


class NoAccepted(_TransferAnswers):
    """An unsettled transfer is never answered."""

    def on_confirm(self, effect: Confirm) -> None:
        if not self.is_transfer(effect):
            super().on_confirm(effect)


class AcceptOnNextTransfer(_TransferAnswers):
    """An unsettled transfer's outcome is held until the next transfer's is due: the last of a burst never
    gets one (over AMQP, a confirmation held past any timer)."""

    _held: Confirm | None = None

    def on_confirm(self, effect: Confirm) -> None:
        if not self.is_transfer(effect):
            super().on_confirm(effect)
            return
        held, self._held = self._held, effect
        if held is not None:
            super().on_confirm(held)


# ---------------------------------------------------------------- the hub


class EarlyConfirmHub(Hub):
    """Confirms (STOMP receipts, AMQP accepted) before the journal fsync: every Confirm is taken as not durable."""

    def apply(self, effects: list[Effect]) -> None:
        super().apply([e._replace(durable=False) if type(e) is Confirm else e for e in effects])


# ---------------------------------------------------------------- the mutants

MUTANTS: dict[str, BrokerParts] = {
    "lose-message": BrokerParts(core=LoseMessage),
    "duplicate-no-flag": BrokerParts(core=DuplicateNoFlag),
    "reorder": BrokerParts(core=Reorder),
    "ignore-ack": BrokerParts(core=IgnoreAck),
    "client-as-individual": BrokerParts(core=ClientAsIndividual, amqp_connection=RangeSettlesLast),
    "leak-tx-sends": BrokerParts(core=LeakTxSends),
    "early-receipt": BrokerParts(hub=EarlyConfirmHub),
    "no-receipt": BrokerParts(stomp_session=NoReceipt, amqp_connection=NoAccepted),
    "mangle-header": BrokerParts(core=MangleHeader),
    "mangle-body": BrokerParts(core=MangleBody),
    "error-no-close": BrokerParts(stomp_session=ErrorNoClose),
    "ignore-prefetch": BrokerParts(core=IgnorePrefetch, amqp_connection=IgnoreCredit),
    "nack-ignored": BrokerParts(core=NackIgnored),
    "nack-acks": BrokerParts(core=NackAcks),
    "abort-keeps-acks": BrokerParts(core=AbortKeepsAcks),
    "abort-keeps-sends": BrokerParts(core=AbortKeepsSends),
    "commit-drops-one": BrokerParts(core=CommitDropsOne),
    "no-redelivered-flag": BrokerParts(core=NoRedeliveredFlag),
    "stuck-delivery-count": BrokerParts(core=StuckDeliveryCount),
    "no-dead-letter": BrokerParts(core=NoDeadLetter),
    "early-dead-letter": BrokerParts(core=EarlyDeadLetter),
    "prefetch-off-by-one": BrokerParts(core=PrefetchOffByOne),
    "topic-one-subscriber": BrokerParts(core=TopicOneSubscriber),
    "durable-forgets": BrokerParts(core=DurableForgets),
    "selector-ignored": BrokerParts(core=SelectorIgnored),
    "no-local-ignored": BrokerParts(core=NoLocalIgnored),
    "client-id-shared": BrokerParts(core=ClientIdShared),
    "queue-to-two": BrokerParts(core=QueueToTwo),
    "reorder-receipts": BrokerParts(stomp_session=ReorderReceipts),
    "wrong-receipt-id": BrokerParts(stomp_session=WrongReceiptId),
    "error-no-message": BrokerParts(stomp_session=ErrorNoMessage),
    "error-no-receipt-id": BrokerParts(stomp_session=ErrorNoReceiptId),
    "message-no-subscription": BrokerParts(stomp_session=MessageNoSubscription),
    "message-no-destination": BrokerParts(stomp_session=MessageNoDestination),
    "truncate-body-at-nul": BrokerParts(core=TruncateBodyAtNul),
    "double-escape-headers": BrokerParts(stomp_session=DoubleEscapeHeaders),
    "window-ack-late-third": BrokerParts(stomp_session=WindowAckLateThird),
    "window-ack-late-timer": BrokerParts(stomp_session=WindowAckLateTimer, amqp_connection=AcceptOnNextTransfer),
    "window-ack-before-sync": BrokerParts(stomp_session=WindowAckBeforeSync, hub=EarlyConfirmHub),
}
"""mutant name -> the broker it is built as."""

AMQP_MUTANTS: dict[str, BrokerParts] = {
    "announced-not-final": BrokerParts(amqp_connection=AnnouncedNotFinal),
    "credit-from-own-count": BrokerParts(amqp_connection=CreditFromOwnCount),
    "late-transfer-at-detach": BrokerParts(amqp_connection=LateTransferAtDetach),
}
"""Mutants with no STOMP form (AMQP frames only): test_amqp_mutants.py runs them, test_mutants.py does not."""

CONFORMANT: dict[str, BrokerParts] = {
    "solace-style-window": BrokerParts(stomp_session=SolaceStyleWindow),
}
"""Variants that behave differently from the reference broker and still conform: the suite must pass them."""


def __getattr__(name: str) -> BrokerParts:
    """``tests.quality.mutants:NAME`` (what ``--broker-parts`` takes) names the mutant ``NAME``."""
    try:
        return MUTANTS.get(name) or AMQP_MUTANTS.get(name) or CONFORMANT[name]
    except KeyError:
        raise AttributeError(name) from None
