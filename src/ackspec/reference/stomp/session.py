"""Broker side of one STOMP connection: a sans-IO protocol state machine.

Bytes in (:meth:`StompSession.receive_data`), bytes out (:meth:`StompSession.take_output`),
time in (:meth:`StompSession.tick` with the injected clock). The session turns frames into
:class:`~ackspec.reference.broker.core.BrokerCore` calls and core effects into frames. It
never touches a socket; :mod:`ackspec.reference.server` is the thin asyncio shell.

Wire behaviour (the reference for the suite):

* ``CONNECT``/``STOMP``: version = highest common of ``accept-version`` (absent: 1.0);
  no common version -> ERROR with ``version:1.0,1.1,1.2``. ``login``/``passcode`` are checked
  by the :class:`~ackspec.reference.broker.auth.Authenticator`. ``heart-beat`` negotiated
  per STOMP 1.2: we send every ``max(server_cx, client_cy)`` ms; a client silent for twice its
  negotiated interval is disconnected.
* ``MESSAGE`` headers: ``subscription``, ``message-id`` (stable across redeliveries),
  ``destination``, ``ack`` (client modes; the value to put in ACK/NACK ``id``),
  ``redelivered`` (``true``/``false``), ``delivery-count`` (JMSXDeliveryCount: 1 on the
  first delivery, +1 per failed delivery), ``persistent:true`` for persistent messages,
  ``content-length``, then the SEND's own headers.
* ``SUBSCRIBE``: ``ack`` = ``auto`` | ``client`` | ``client-individual``; prefetch from
  ``activemq.prefetchSize`` or ``prefetch-count`` (client modes; default 1000, capped).
* Durable topic subscriptions, as ActiveMQ and Artemis spell them: ``client-id`` on ``CONNECT``
  names the client; a ``SUBSCRIBE`` to a topic with ``activemq.subscriptionName`` (or Artemis's
  ``durable-subscription-name``) creates or resumes that client's durable subscription, which keeps
  the topic's messages while no consumer is attached (UNSUBSCRIBE with only ``id``, DISCONNECT,
  a dropped connection); ``UNSUBSCRIBE`` with the name header deletes it. Without ``client-id``
  such a SUBSCRIBE is an ERROR.
* ``SUBSCRIBE`` with ``selector`` (ActiveMQ's and Artemis's header): a Jakarta Messaging message
  selector over the SEND's headers (as string properties) and the JMS header fields; the
  subscription gets only the messages it matches. An invalid selector is an ERROR naming where.
* ``SUBSCRIBE`` to a topic with ``activemq.noLocal:true`` (or ``no-local:true``): the subscription does
  not get the messages its own connection publishes (JMS noLocal); a durable one, none of those of any
  connection with the same ``client-id``.
* ``NACK`` requeues (delivery-count + 1; dead-letter queue past ``max_redeliveries``). A NACK
  carrying ``ackspec-ack-type:1`` is the reference client's ActiveMQ POISON ack (STOMP has none):
  the message goes to the dead-letter queue at once, as a ``rejected`` outcome does over AMQP
  (AMQ-ACKTYPE-POISON); without it a poisoned message came back until ``max_redeliveries``.
* ``RECEIPT``: sent in frame order, and only once every journal record written for this
  connection so far is durable (so a receipt on the last of many persistent SENDs covers all).
* Errors (malformed frame, unknown command, missing header, over a limit, frame before
  CONNECT, unknown ack id or transaction, duplicate subscription id, auth failure):
  ``ERROR`` with ``message`` (and ``receipt-id`` when the frame asked for a receipt), then the
  connection is closed. Other connections are unaffected.
"""

from __future__ import annotations

import enum
import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.core import BrokerCore, CoreError
from ackspec.reference.broker.effects import Close, Confirm, Deliver, Effect, Reject
from ackspec.reference.broker.hub import Hub
from ackspec.reference.broker.model import ACCEPT, REQUEUE, AckMode, Outcome, Settlement
from ackspec.reference.broker.selector import SelectorError, parse_selector
from ackspec.reference.broker.trace import NULL_TRACER, Tracer
from ackspec.reference.faults import ConfirmPolicy, FaultInjector
from ackspec.reference.stomp import frames as F
from ackspec.reference.stomp.codec import (
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_HEADER_LENGTH,
    DEFAULT_MAX_HEADERS,
    FrameParser,
    StompProtocolError,
    encode,
    escape,
)
from ackspec.reference.stomp.frames import ACK_TYPE_HEADER, POISON_ACK_TYPE, Frame, HeartBeat

POISON: Final = Settlement(Outcome.REJECTED, reason="POISON ack from the client (ackspec-ack-type:1)")

log = logging.getLogger("ackspec.reference.stomp")

SERVER_NAME: Final = "ackspec-reference/0.1"
SUPPORTED: Final = ("1.0", "1.1", "1.2")
_NO_RECEIPT: Final = object()

DURABLE_NAME_HEADERS: Final = ("activemq.subscriptionName", "durable-subscription-name")
NO_LOCAL_HEADERS: Final = ("activemq.noLocal", "no-local")
"""``true``: the subscription does not get its own connection's messages (JMS noLocal; ActiveMQ's header)."""
"""SUBSCRIBE/UNSUBSCRIBE headers naming a durable topic subscription (ActiveMQ's; Artemis's own)."""

RESERVED_HEADERS: Final = frozenset(
    {"destination", "transaction", "receipt", "content-length", "message-id", "subscription", "ack",
     "redelivered", "delivery-count", "persistent"}
)


@dataclass(frozen=True)
class SessionConfig:
    """Per-connection limits and heart-beat offer. Defaults are safe."""

    max_frame: int = DEFAULT_MAX_FRAME
    max_headers: int = DEFAULT_MAX_HEADERS
    max_header_length: int = DEFAULT_MAX_HEADER_LENGTH
    heartbeat_send_ms: int = 1000
    """How often we can send heart-beats (the cx we offer)."""
    heartbeat_receive_ms: int = 1000
    """How often we want the client's heart-beats (the cy we offer)."""
    max_subscriptions: int = 1000
    max_transactions: int = 100
    connect_timeout: float = 10.0
    """Seconds a connection may take to complete CONNECT (0: no limit): idle or slowloris sockets cannot
    hold connection slots forever. Bytes trickling in do not extend it."""
    idle_timeout: float = 600.0
    """Seconds a connected client without negotiated heart-beats may send nothing before it is closed with
    an ERROR (0: no limit); heart-beats, when negotiated, are the check instead."""


_HEART_BEAT: Final = re.compile(r"[0-9]{1,9},[0-9]{1,9}")


class State(enum.Enum):
    AWAIT_CONNECT = "await-connect"
    CONNECTED = "connected"
    DISCONNECTING = "disconnecting"
    CLOSED = "closed"

    __hash__ = object.__hash__
    """Members are singletons, so identity hashes them: :data:`ACCEPTS` is looked up by state on every frame,
    and ``Enum``'s own ``__hash__`` (of the name) is a Python call each time."""


# Transitions as data: which commands a state accepts. Anything else is a protocol error.
ACCEPTS: Final[dict[State, frozenset[str]]] = {
    State.AWAIT_CONNECT: frozenset({F.CONNECT, F.STOMP}),
    State.CONNECTED: frozenset({F.SEND, F.SUBSCRIBE, F.UNSUBSCRIBE, F.ACK, F.NACK, F.BEGIN, F.COMMIT, F.ABORT,
                                F.DISCONNECT}),
    State.DISCONNECTING: frozenset(),
    State.CLOSED: frozenset(),
}
READING: Final = frozenset(state for state, accepted in ACCEPTS.items() if accepted)
"""The states in which received frames are read (the others ignore input)."""

REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    F.SEND: ("destination",),
    F.SUBSCRIBE: ("destination",),
    F.BEGIN: ("transaction",),
    F.COMMIT: ("transaction",),
    F.ABORT: ("transaction",),
}
"""Headers every version requires; version-specific ones are checked in the handlers."""


class _Receipt:
    """A RECEIPT held by fault injection until ``due`` (the journal's wait is the hub's)."""

    __slots__ = ("due", "frame")

    def __init__(self, frame: bytes, due: float) -> None:
        self.frame = frame
        self.due = due


class _Answer(NamedTuple):
    """A receipt the session makes itself (a negative one, with ``extra`` headers): answered in turn."""

    receipt_id: str
    extra: tuple[tuple[str, str], ...] = ()


class StompSession:
    """One STOMP connection. ``conn_id`` must be unique in the hub."""

    ordered_confirms = True
    """A receipt acknowledges every frame before it: the hub keeps them in order (see :class:`~.hub.Hub`)."""

    def __init__(
        self,
        conn_id: str,
        hub: Hub,
        *,
        config: SessionConfig | None = None,
        auth: Authenticator | None = None,
        clock: Callable[[], float],
        faults: FaultInjector | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.conn_id = conn_id
        self.hub = hub
        self.core: BrokerCore = hub.core
        self.config = config or SessionConfig()
        self.auth = auth or Authenticator()
        self.clock = clock
        self.faults = faults
        self.tracer = tracer or NULL_TRACER
        self.state = State.AWAIT_CONNECT
        self.version = "1.2"
        self.login: str | None = None
        self.client_id: str | None = None  # CONNECT's client-id: owner of durable subscriptions
        self.parser = FrameParser(max_frame=self.config.max_frame, max_headers=self.config.max_headers,
                                  max_header_length=self.config.max_header_length,
                                  commands=F.CLIENT_COMMANDS)
        self._out: list[bytes] = []
        self._receipts: deque[_Receipt] = deque()
        self._delayed: list[tuple[float, bytes]] = []  # delayed deliveries
        self._batch: list[str] = []  # withheld SEND receipts (batch confirm policy)
        self._batch_started = 0.0
        self._nack_counter = 0
        self._receipt_dest: dict[str, str] = {}  # receipt id -> SEND destination, while faults are active
        self._frames_in = 0
        self._sub_modes: dict[str, AckMode] = {}
        self._msgid_to_delivery: dict[tuple[str, str], int] = {}  # 1.0/1.1 ACK by message-id
        self._dup_ack_ids: set[str] = set()
        self._send_interval = 0.0
        self._recv_timeout = 0.0
        now = clock()
        self._last_recv = now
        self._last_send = now
        self._opened_at = now
        self._pre_connect_bytes = 0
        self.sends = 0
        """SEND frames handled (producer flow control pauses producer-only connections: :mod:`..flow`)."""
        self._open_txs: set[str] = set()  # names BEGIN opened and no COMMIT/ABORT ended (the limit's count)
        self.on_output: Callable[[], None] | None = None
        """Called when output becomes pending (the host schedules a flush)."""
        self.close_requested = False
        """True once the connection must be closed (after :meth:`take_output` is written)."""
        self.error: str | None = None
        hub.attach(conn_id, self)

    # ------------------------------------------------------------------ input
    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket. Output accumulates for :meth:`take_output`."""
        if self.state not in READING:
            return
        self._last_recv = self.clock()
        if self.state is State.AWAIT_CONNECT:
            self._pre_connect_bytes += len(data)
            if self._pre_connect_bytes > self.config.max_frame:  # e.g. endless heart-beat EOLs before CONNECT
                self._fail(f"more than {self.config.max_frame} bytes before CONNECT", None)
                return
        try:
            items = self.parser.feed(data)
        except StompProtocolError as exc:
            self.tracer.trace("STOMP-ERROR-CLOSES", exc.message)
            self._fail(exc.message, None)
            return
        for item in items:
            if isinstance(item, HeartBeat):
                continue
            if self.state not in READING:
                return
            self.handle_frame(item)

    def handle_frame(self, frame: Frame) -> None:
        """Process one parsed frame (public for tests that skip the codec)."""
        cmd = frame.command
        if cmd not in ACCEPTS[self.state]:
            if self.state is State.AWAIT_CONNECT:
                self._fail(f"not connected: {cmd} before CONNECT", frame)
            elif cmd in (F.CONNECT, F.STOMP):
                self._fail("already connected", frame)
            elif cmd == F.NACK:
                self._fail("NACK is not part of STOMP 1.0", frame)
            else:
                self._fail(f"unexpected command {cmd}", frame)
            return
        if cmd == F.NACK and self.version == "1.0":
            self._fail("NACK is not part of STOMP 1.0", frame)
            return
        for name in REQUIRED.get(cmd, ()):
            if name not in frame:
                self._fail(f"{cmd} frame is missing the required '{name}' header", frame)
                return
        self._frames_in += 1
        faults = self.faults
        if faults is not None and faults.active and self._drop_after(frame):
            return
        try:
            _HANDLERS[cmd](self, frame)
        except CoreError as exc:
            if exc.requirement:
                self.tracer.trace(exc.requirement, exc.message)
            self._fail(exc.message, frame)

    def _drop_after(self, frame: Frame) -> bool:
        assert self.faults is not None
        for rule in self.faults.rules_for(None, self.conn_id, self.login):
            if rule.drop_after_frames is not None and self._frames_in > rule.drop_after_frames:
                log.info("fault: dropping %s after %d frames", self.conn_id, rule.drop_after_frames)
                self._close(abrupt=True)
                return True
        return False

    # ------------------------------------------------------------------ frame handlers
    def _on_connect(self, frame: Frame) -> None:
        accept = frame.get("accept-version")
        if accept is None:
            version = "1.0"
        else:
            offered = {v.strip() for v in accept.split(",")}
            common = [v for v in SUPPORTED if v in offered]
            if not common:
                self._fail(f"unsupported protocol version(s) {accept}; supported: {','.join(SUPPORTED)}",
                           frame, extra=(("version", ",".join(SUPPORTED)),))
                return
            version = common[-1]
        self.tracer.trace("STOMP-CONNECT-VERSION", version)
        login = frame.get("login")
        refusal = self.auth.check(login, frame.get("passcode"))
        if refusal is not None:
            self.tracer.trace("STOMP-CONNECT-AUTH", refusal)
            self._fail(refusal, frame)
            return
        refusal = self.auth.client_id_refusal(frame.get("client-id"), login)
        if refusal is not None:
            self._fail(refusal, frame)
            return
        cx, cy = 0, 0
        hb = frame.get("heart-beat")
        if hb is not None and version != "1.0":
            if not _HEART_BEAT.fullmatch(hb):  # ASCII digits only: int() would take "1_0" or full-width digits
                self._fail(f"invalid heart-beat header {hb!r} (expected two numbers, e.g. 1000,1000)", frame)
                return
            a, b = hb.split(",")
            cx, cy = int(a), int(b)
        sx, sy = self.config.heartbeat_send_ms, self.config.heartbeat_receive_ms
        send_ms = max(sx, cy) if sx and cy else 0
        recv_ms = max(cx, sy) if cx and sy else 0
        self._send_interval = send_ms / 1000
        self._recv_timeout = 2 * recv_ms / 1000
        if send_ms or recv_ms:
            self.tracer.trace("STOMP-HEARTBEAT-NEGOTIATION", f"{send_ms},{recv_ms}")
        self.version = version
        self.parser.version = version
        self.login = login
        self.client_id = frame.get("client-id")
        self.core.open(self.conn_id, user=login, client_id=self.client_id, exclusive=self.client_id is not None)
        self.state = State.CONNECTED
        headers: list[tuple[str, str]] = []
        if version != "1.0":
            headers.append(("version", version))
            headers.append(("heart-beat", f"{send_ms},{recv_ms}"))
        headers += [("server", SERVER_NAME), ("session", self.conn_id)]
        self._write(encode(Frame(F.CONNECTED, tuple(headers)), version))

    def _on_send(self, frame: Frame) -> None:
        dest = receipt = tx = None
        persistent = False
        user: list[tuple[str, str]] = []
        for name, value in frame.headers:  # one pass; first occurrence of a header wins
            if name not in RESERVED_HEADERS:
                user.append((name, value))
            elif name == "destination":
                dest = value if dest is None else dest
            elif name == "receipt":
                receipt = value if receipt is None else receipt
            elif name == "transaction":
                tx = value if tx is None else tx
            elif name == "persistent" and value == "true":
                persistent = True
        if not dest:
            self._fail("SEND frame has an empty 'destination' header", frame)
            return
        if self.auth.acl is not None and not self.auth.permits(self.login, "write", dest):
            self._fail(f"not authorised to write to {dest!r}", frame)
            return
        policy: ConfirmPolicy | None = None
        if self.faults is not None and self.faults.active:
            answered, policy = self._send_faults(self.faults, frame, dest, receipt)
            if answered:
                return
        self.sends += 1
        token: object = receipt if receipt is not None else _NO_RECEIPT
        if policy is not None and policy.mode == "batch" and receipt is not None and tx is None:
            token = ("batch", receipt)
        elif receipt is None and not persistent:
            token = None  # no receipt and nothing durable to wait for: no Confirm effect at all
        self.hub.apply(self.core.publish(self.conn_id, dest, frame.body, tuple(user), persistent=persistent,
                                         tx=tx, confirm=token))

    def _send_faults(self, faults: FaultInjector, frame: Frame, dest: str,
                     receipt: str | None) -> tuple[bool, ConfirmPolicy | None]:
        """Fault injection on a SEND: (whether it was answered here, rejected or negatively acknowledged;
        the confirmation policy that applies to it)."""
        for rule in faults.rules_for(dest, self.conn_id, self.login):
            if rule.reject_send is not None:
                self.tracer.trace("STOMP-SEND-ERROR-WHEN-UNPROCESSABLE", dest)
                self._fail(rule.reject_send, frame)
                return True, None
        policy = faults.confirm_policy(dest, self.conn_id, self.login)
        if policy is not None and policy.mode == "nack" and self._should_nack(frame, policy):
            if receipt is not None:
                self._answer(_Answer(receipt, (("ackspec-nack", "true"),
                                               ("message", "send rejected by fault injection"))))
            return True, policy
        if receipt is not None:
            self._receipt_dest[receipt] = dest  # receipt-side rules match on the SEND's destination
        return False, policy

    def _should_nack(self, frame: Frame, policy: ConfirmPolicy) -> bool:
        if frame.get("ackspec-nack") == "true":
            return True
        if policy.nack_every > 0:
            self._nack_counter += 1
            return self._nack_counter % policy.nack_every == 0
        return False

    def _on_subscribe(self, frame: Frame) -> None:
        dest = frame.get("destination") or ""
        sub_id = frame.get("id")
        if sub_id is None:
            if self.version != "1.0":
                self._fail("SUBSCRIBE frame is missing the required 'id' header", frame)
                return
            sub_id = dest
        if len(self._sub_modes) >= self.config.max_subscriptions:
            self._fail(f"too many subscriptions (limit {self.config.max_subscriptions})", frame)
            return
        mode_name = frame.get("ack", "auto")
        try:
            mode = AckMode(mode_name)
        except ValueError:
            self._fail(f"invalid ack mode {mode_name!r} (auto, client, client-individual)", frame)
            return
        prefetch: int | None = None
        raw = frame.get("activemq.prefetchSize") or frame.get("prefetch-count")
        if raw is not None:
            if not raw.isdigit():
                self._fail(f"invalid prefetch {raw!r}", frame)
                return
            prefetch = int(raw)
            self.tracer.trace("STOMP-SUBSCRIBE-PREFETCH", dest)
        if self.core.has_subscription(self.conn_id, sub_id):
            self.tracer.trace("STOMP-SUBSCRIBE-ID-UNIQUE", sub_id)
            self._fail(f"subscription id {sub_id!r} already in use on this connection", frame)
            return
        try:
            selector = parse_selector(frame.get("selector"))
        except SelectorError as exc:
            self.tracer.trace("JMS-3.8-INVALID-SELECTOR-REFUSED", dest)
            self._fail(f"invalid {exc}", frame)  # "invalid selector: <what> at position N"
            return
        durable = self._durable_key(frame)
        if durable is False or not self._may_subscribe(frame, dest, durable):
            return
        self._sub_modes[sub_id] = mode
        no_local = any((frame.get(h) or "").lower() == "true" for h in NO_LOCAL_HEADERS)
        try:
            effects = self.core.subscribe(self.conn_id, sub_id, dest, ack=mode, prefetch=prefetch,
                                          durable=durable, selector=selector, no_local=no_local)
        except CoreError:
            self._sub_modes.pop(sub_id, None)
            raise
        self.hub.apply(effects)
        self._receipt_for(frame)

    def _may_subscribe(self, frame: Frame, dest: str, durable: tuple[str, str] | None) -> bool:
        """Read permission (and admin for a durable subscription); fails the connection when missing. A
        durable subscription ties its client id to this login (:mod:`~ackspec.reference.broker.acl`)."""
        auth = self.auth
        for permission in ("read", "admin") if durable is not None else ("read",):
            if not auth.permits(self.login, permission, dest):
                what = "a durable subscription on" if permission == "admin" else "read from"
                self._fail(f"not authorised to {what} {dest!r}", frame)
                return False
        if durable is not None:
            auth.durable_held(durable[0], self.login)
        return True

    def _durable_key(self, frame: Frame) -> tuple[str, str] | Literal[False] | None:
        """The (client id, name) of the durable subscription ``frame`` names, None if it names none, or
        False after failing the connection (a name without a ``client-id`` on CONNECT)."""
        name = next((frame.get(h) for h in DURABLE_NAME_HEADERS if frame.get(h)), None)
        if name is None:
            return None
        if not self.client_id:
            self._fail(f"durable subscription {name!r} needs a 'client-id' header on CONNECT", frame)
            return False
        return (self.client_id, name)

    def _on_unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.get("id")
        if sub_id is None and self.version == "1.0":
            sub_id = frame.get("destination")
        if sub_id is None:
            self._fail("UNSUBSCRIBE frame is missing the required 'id' header", frame)
            return
        durable = self._durable_key(frame)
        if durable is False:
            return
        if durable is None or self.core.has_subscription(self.conn_id, sub_id):
            self.hub.apply(self.core.unsubscribe(self.conn_id, sub_id))
            self._sub_modes.pop(sub_id, None)
        if durable is not None:  # ... and delete the durable subscription (its consumer closed first)
            self.hub.apply(self.core.remove_durable(self.conn_id, durable))
        self._receipt_for(frame)

    def _ack_target(self, frame: Frame) -> int | None:
        if self.version == "1.2":
            ack_id = frame.get("id")
            if ack_id is None:
                self._fail(f"{frame.command} frame is missing the required 'id' header", frame)
                return None
            if ack_id in self._dup_ack_ids:
                self._dup_ack_ids.discard(ack_id)
                self._receipt_for(frame)
                return None
            if not ack_id.isdigit() or self.core.delivery_subscription(self.conn_id, int(ack_id)) is None:
                self._fail(f"{frame.command} of unknown ack id {ack_id!r} (never delivered, auto-acked, "
                           "or already acknowledged)", frame)
                return None
            return int(ack_id)
        mid = frame.get("message-id")
        if mid is None:
            self._fail(f"{frame.command} frame is missing the required 'message-id' header", frame)
            return None
        sub = frame.get("subscription")
        if sub is None and self.version == "1.1":
            self._fail(f"{frame.command} frame is missing the required 'subscription' header", frame)
            return None
        did = None
        if sub is not None:
            did = self._msgid_to_delivery.get((sub, mid))
        else:
            for (_s, m), d in self._msgid_to_delivery.items():
                if m == mid:
                    did = d
                    break
        if did is None or self.core.delivery_subscription(self.conn_id, did) is None:
            self._fail(f"{frame.command} of unknown message-id {mid!r}", frame)
            return None
        return did

    def _on_ack(self, frame: Frame) -> None:
        did = self._ack_target(frame)
        if did is None:
            return
        self._settle(frame, did, nack=False)

    def _on_nack(self, frame: Frame) -> None:
        did = self._ack_target(frame)
        if did is None:
            return
        self._settle(frame, did, nack=True)

    def _settle(self, frame: Frame, did: int, *, nack: bool) -> None:
        tx = frame.get("transaction")
        receipt = frame.get("receipt")
        self.sends += 1
        token: object = receipt if receipt is not None else _NO_RECEIPT
        settlement = ACCEPT
        if nack:
            settlement = POISON if frame.get(ACK_TYPE_HEADER) == POISON_ACK_TYPE else REQUEUE
        self.hub.apply(self.core.settle(self.conn_id, did, settlement, tx=tx, confirm=token))
        if self.version != "1.2":
            for key in [k for k, v in self._msgid_to_delivery.items() if v == did or
                        self.core.delivery_subscription(self.conn_id, v) is None]:
                del self._msgid_to_delivery[key]

    def _on_begin(self, frame: Frame) -> None:
        tx = frame.get("transaction") or ""
        if len(self._open_txs) >= self.config.max_transactions and tx not in self._open_txs:
            self._fail(f"too many open transactions (limit {self.config.max_transactions})", frame)
            return
        self.hub.apply(self.core.begin(self.conn_id, tx))
        self._open_txs.add(tx)
        self._receipt_for(frame)

    def _on_commit(self, frame: Frame) -> None:
        tx = frame.get("transaction") or ""
        self._open_txs.discard(tx)
        receipt = frame.get("receipt")
        faults = self.faults
        if faults is not None and faults.active:
            failed = next((r.fail_commit for r in faults.rules_for(None, self.conn_id, self.login)
                           if r.fail_commit is not None), None)
            if failed is not None:  # fault injection: roll back instead, and say so
                self.hub.apply(self.core.abort(self.conn_id, tx, confirm=_NO_RECEIPT))
                if receipt is not None:
                    self._answer(_Answer(receipt, (("ackspec-nack", "true"), ("message", failed))))
                return
        self.hub.apply(self.core.commit(self.conn_id, tx, confirm=receipt if receipt is not None else _NO_RECEIPT))

    def _on_abort(self, frame: Frame) -> None:
        tx = frame.get("transaction") or ""
        self._open_txs.discard(tx)
        receipt = frame.get("receipt")
        self.hub.apply(self.core.abort(self.conn_id, tx, confirm=receipt if receipt is not None else _NO_RECEIPT))

    def _on_disconnect(self, frame: Frame) -> None:
        self.tracer.trace("STOMP-DISCONNECT-RECEIPT-LAST", self.conn_id)
        self._flush_batch()
        self._receipt_for(frame)
        self.state = State.DISCONNECTING
        self.hub.apply(self.core.close(self.conn_id))
        self._maybe_finish_disconnect()

    # ------------------------------------------------------------------ effects from the core
    def on_effect(self, effect: Effect) -> None:
        if isinstance(effect, Deliver):
            self._deliver(effect)
        elif isinstance(effect, Reject):
            if isinstance(effect.token, str):
                self._fail(effect.reason, None, receipt_id=effect.token)
            elif isinstance(effect.token, tuple):
                self._fail(effect.reason, None, receipt_id=str(effect.token[1]))
            else:
                self._fail(effect.reason, None)
        elif isinstance(effect, Close):
            self._fail(effect.reason, None)

    def on_confirm(self, effect: Confirm) -> None:
        """The core's (or the session's own) confirmation, in order and, when durable, after the journal sync
        (the hub holds it until then)."""
        token = effect.token
        if effect.durable and self.hub.journaling:
            self.tracer.trace("STOMP-RECEIPT-PERSISTENT-DURABLE")
        if type(token) is str:  # a SEND's receipt id: the usual token
            self._queue_receipt(token)
        elif token is _NO_RECEIPT:
            return
        elif isinstance(token, _Answer):
            self._queue_receipt(token.receipt_id, token.extra)
        elif isinstance(token, tuple):  # batch confirm policy
            self._batch_receipt(str(token[1]))
        else:
            self._queue_receipt(str(token))

    def _deliver(self, d: Deliver) -> None:
        msg = d.message
        version = self.version
        sub = d.sub
        mode = self._sub_modes.get(sub, AckMode.AUTO)
        parts = [f"MESSAGE\nsubscription:{escape(sub, version)}\nmessage-id:{escape(msg.message_id, version)}\n"
                 f"destination:{escape(msg.destination, version)}\n"]
        ack_id = str(d.delivery_id)
        if mode is not AckMode.AUTO:
            parts.append(f"ack:{ack_id}\n")
            if version != "1.2":
                self._msgid_to_delivery[(sub, msg.message_id)] = d.delivery_id
        parts.append(f"redelivered:{'true' if d.redelivered else 'false'}\ndelivery-count:{d.delivery_count + 1}\n")
        if msg.persistent:
            parts.append("persistent:true\n")
        body = msg.body
        faults = self.faults
        headers = msg.headers
        if version == "1.0":
            headers = _representable_in_10(headers)
        for name, value in headers:
            if name:  # an empty name (possible from AMQP) would break the receiver's parser
                parts += (escape(name, version), ":", escape(value, version), "\n")
        parts.append(f"content-length:{len(body)}\n\n")
        data = "".join(parts).encode() + body + b"\x00"
        if faults is not None and faults.active:
            rules = faults.rules_for(msg.destination, self.conn_id, self.login)
            delay = max((r.delivery_delay for r in rules), default=0.0)
            dup = any(r.duplicate_delivery for r in rules)
            if dup:
                again = data.replace(b"\nredelivered:false\n", b"\nredelivered:true\n", 1)
                if mode is not AckMode.AUTO:
                    self._dup_ack_ids.add(ack_id)
                data += again
            if delay > 0:
                self._delayed.append((self.clock() + delay, data))
                return
        self._write(data)

    # ------------------------------------------------------------------ receipts
    def _receipt_for(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self._answer(receipt)

    def _answer(self, token: str | _Answer) -> None:
        """A receipt of the session's own, through the hub: after the confirmations it holds for us."""
        self.hub.apply([Confirm(self.conn_id, token)])

    def _queue_receipt(self, receipt_id: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        faults = self.faults
        delay = 0.0
        dest = self._receipt_dest.pop(receipt_id, None) if self._receipt_dest else None
        if faults is not None and faults.active:
            for rule in faults.rules_for(dest, self.conn_id, self.login):
                if rule.withhold_receipts:
                    return
                delay = max(delay, rule.receipt_delay)
            policy = faults.confirm_policy(dest, self.conn_id, self.login)
            if policy is not None and policy.mode == "delay":
                delay = max(delay, policy.delay)
        if extra:
            frame = encode(Frame(F.RECEIPT, (("receipt-id", receipt_id), *extra)), self.version)
        else:  # the common case, formatted directly
            frame = b"RECEIPT\nreceipt-id:" + escape(receipt_id, self.version).encode() + b"\n\n\x00"
        if not self._receipts and delay <= 0:
            self._write(frame)
            self.tracer.trace("STOMP-RECEIPT-AFTER-PROCESSING", receipt_id)
        else:
            self._receipts.append(_Receipt(frame, self.clock() + delay))
        if self.state is State.DISCONNECTING:
            self._maybe_finish_disconnect()

    def _batch_receipt(self, receipt_id: str) -> None:
        dest = self._receipt_dest.get(receipt_id)
        policy = self.faults.confirm_policy(dest, self.conn_id, self.login) if self.faults is not None else None
        if not self._batch:
            self._batch_started = self.clock()
        self._batch.append(receipt_id)
        if policy is None or len(self._batch) >= policy.batch_size:
            self._flush_batch()

    def _flush_batch(self) -> None:
        if self._batch:
            for covered in self._batch[:-1]:
                self._receipt_dest.pop(covered, None)
            receipt_id = self._batch[-1]
            self._batch.clear()
            self.tracer.trace("SOLACE-WINDOW-ACK-CUMULATIVE", receipt_id)
            self._queue_receipt(receipt_id)

    def _release_receipts(self, now: float) -> None:
        q = self._receipts
        while q and q[0].due <= now:
            self._write(q.popleft().frame)
        self._maybe_finish_disconnect()

    def _maybe_finish_disconnect(self) -> None:
        if (self.state is State.DISCONNECTING and not self._receipts and not self._batch
                and not self.hub.holds(self.conn_id)):
            self.state = State.CLOSED
            self.close_requested = True
            self.hub.detach(self.conn_id)
            if self.on_output is not None:
                self.on_output()

    # ------------------------------------------------------------------ time
    def tick(self, now: float | None = None) -> None:
        """Advance timers: delayed receipts/deliveries, batch timeout, heart-beats."""
        if now is None:
            now = self.clock()
        if self.state is State.CLOSED:
            return
        if self._receipts:
            self._release_receipts(now)
        if self._batch and self.faults is not None:
            policy = self.faults.confirm_policy(None, self.conn_id, self.login)
            if policy is None or now - self._batch_started >= policy.timeout:
                self._flush_batch()
        if self._delayed:
            due = [d for d in self._delayed if d[0] <= now]
            if due:
                self._delayed = [d for d in self._delayed if d[0] > now]
                for _t, data in due:
                    self._write(data)
        if self.state is State.AWAIT_CONNECT and self.config.connect_timeout:
            if now - self._opened_at >= self.config.connect_timeout:
                self._fail(f"no CONNECT within {self.config.connect_timeout:g} s", None)
            return
        if self.state is not State.CONNECTED:
            return
        idle = self.config.idle_timeout
        if idle and not self._recv_timeout and now - self._last_recv >= idle:
            self._fail(f"idle for {idle:g} s (nothing received; negotiate heart-beats to stay connected)", None)
            return
        if self._recv_timeout and now - self._last_recv > self._recv_timeout:
            self.tracer.trace("STOMP-HEARTBEAT-DEAD-PEER", self.conn_id)
            log.info("%s: no data for %.1fs, closing (heart-beat timeout)", self.conn_id, now - self._last_recv)
            self._close(abrupt=True)
            return
        if self._send_interval and now - self._last_send >= self._send_interval:
            self._write(b"\n")

    def next_deadline(self) -> float | None:
        """The earliest time :meth:`tick` has something to do (None: nothing scheduled)."""
        times = [r.due for r in self._receipts if r.due > 0]
        times += [t for t, _ in self._delayed]
        if self._batch:
            times.append(self._batch_started + 1.0)
        if self.state is State.CONNECTED:
            if self._send_interval:
                times.append(self._last_send + self._send_interval)
            if self._recv_timeout:
                times.append(self._last_recv + self._recv_timeout)
            elif self.config.idle_timeout:
                times.append(self._last_recv + self.config.idle_timeout)
        elif self.state is State.AWAIT_CONNECT and self.config.connect_timeout:
            times.append(self._opened_at + self.config.connect_timeout)
        return min(times) if times else None

    # ------------------------------------------------------------------ output and errors
    def _write(self, data: bytes) -> None:
        if not self._out and self.on_output is not None:
            self.on_output()
        self._out.append(data)
        self._last_send = self.clock()

    def take_output(self) -> bytes:
        """Bytes to send now (empty when none)."""
        if not self._out:
            return b""
        out = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        return out

    @property
    def producer_only(self) -> bool:
        """It has sent messages and consumes none (pausing it cannot hold back acknowledgements)."""
        return self.sends > 0 and not self._sub_modes

    @property
    def has_output(self) -> bool:
        return bool(self._out)

    def connection_lost(self) -> None:
        """The transport closed (cleanly or not): roll back and return unacked messages."""
        if self.state is State.CLOSED and not self.core.has_connection(self.conn_id):
            self.hub.detach(self.conn_id)
            return
        self._close(abrupt=True)

    def _close(self, *, abrupt: bool) -> None:
        was_open = self.core.has_connection(self.conn_id)
        self.state = State.CLOSED
        self.close_requested = True
        if self.on_output is not None:
            self.on_output()
        if was_open:
            self.hub.apply(self.core.close(self.conn_id, abrupt=abrupt))
        self.hub.detach(self.conn_id)

    def _fail(self, message: str, frame: Frame | None, *, receipt_id: str | None = None,
              extra: tuple[tuple[str, str], ...] = ()) -> None:
        """Send ERROR (with ``receipt-id`` when the frame asked for a receipt), then close."""
        headers: list[tuple[str, str]] = [("message", message.replace("\n", " ")[:500])]
        rid = receipt_id if receipt_id is not None else (frame.get("receipt") if frame is not None else None)
        if rid is not None:
            headers.append(("receipt-id", rid))
        headers += extra
        body = b""
        if frame is not None:
            body = f"The {frame.command} frame could not be processed: {message}\n".encode()
        headers.append(("content-type", "text/plain"))
        self._write(encode(Frame(F.ERROR, tuple(headers), body), self.version, content_length=True))
        self.error = message
        log.info("%s: ERROR %s", self.conn_id, message)
        self.tracer.trace("STOMP-ERROR-CLOSES", message)
        self._receipts.clear()
        self._close(abrupt=True)


_HANDLERS: Final[dict[str, Callable[[StompSession, Frame], None]]] = {
    F.CONNECT: StompSession._on_connect,
    F.STOMP: StompSession._on_connect,
    F.SEND: StompSession._on_send,
    F.SUBSCRIBE: StompSession._on_subscribe,
    F.UNSUBSCRIBE: StompSession._on_unsubscribe,
    F.ACK: StompSession._on_ack,
    F.NACK: StompSession._on_nack,
    F.BEGIN: StompSession._on_begin,
    F.COMMIT: StompSession._on_commit,
    F.ABORT: StompSession._on_abort,
    F.DISCONNECT: StompSession._on_disconnect,
}

__all__ = ["ACCEPTS", "SessionConfig", "State", "StompSession"]


def _representable_in_10(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The headers a STOMP 1.0 receiver can be given: 1.0 has no escaping, so a newline in a name or value
    (or a colon in a name) would end the header early and let a 1.1/1.2 or AMQP producer forge headers, or a
    whole frame, in the receiver's stream. Such headers are dropped for that receiver."""
    if not any("\n" in name or "\n" in value or ":" in name or "\r" in name for name, value in headers):
        return headers
    return tuple((name, value) for name, value in headers
                 if not ("\n" in name or "\n" in value or ":" in name or "\r" in name))
