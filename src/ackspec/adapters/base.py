"""The one interface between a conformance test and a system under test.

A test never talks to a socket or a client library directly: it opens a
:class:`Client` from an :class:`Adapter` and calls the verbs below. Each driver
(stomp.py, the in-process reference broker, python-qpid-proton, the reference
client, the JSON-lines shim) implements the underscore hooks; the public verbs,
implemented once here, record every operation in the history before and after
calling the hook. Drivers therefore cannot forget to record, and every driver
records the same way.

Drivers declare :class:`Capability` values. A test asks for the capabilities it
needs with :meth:`Adapter.require`; a missing one raises :class:`NotSupported`,
which the suite reports as *not-applicable* naming the capability.

Timeouts: every wait takes an explicit timeout in seconds; a driver that runs
out of time completes the operation as ``info`` (indeterminate) and raises
:class:`Indeterminate`, never pretends success or failure.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from ackspec.history import PRODUCER_HEADER, SEQ_HEADER, Op, Pending, Recorder
from ackspec.spec.capabilities import Capability as Capability  # noqa: PLC0414 - re-exported: the drivers name it

T = TypeVar("T")


class AckMode(StrEnum):
    """Acknowledgement modes a subscription can ask for (STOMP names; AMQP maps onto them)."""

    AUTO = "auto"
    CLIENT = "client"  # cumulative
    CLIENT_INDIVIDUAL = "client-individual"


class NackOutcome(StrEnum):
    """What a negative acknowledgement asks for. STOMP has only NACK; AMQP has all four."""

    NACK = "nack"  # STOMP NACK
    RELEASED = "released"
    MODIFIED_FAILED = "modified"  # modified with delivery-failed=true
    MODIFIED_UNDELIVERABLE = "modified-undeliverable-here"
    REJECTED = "rejected"


HARNESS_CAPABILITIES: frozenset[Capability] = frozenset({Capability.BROKER_RESTART})
"""Capabilities the harness provides around any driver (a restart command for a real target): a driver
does not limit them."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message as a consumer saw it."""

    destination: str
    subscription: str
    body: bytes
    headers: Mapping[str, str]
    message_id: str | None
    ack_id: str | None
    seq: int | None
    producer: str | None
    redelivered: bool | None
    delivery_count: int | None  # JMSXDeliveryCount semantics: 1 on first delivery, None if not reported


@dataclass(frozen=True, slots=True)
class SendResult:
    """How a send ended: ``confirmed`` only when the target confirmed it (receipt, accepted outcome)."""

    seq: int | None
    confirmed: bool
    message_id: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


class AdapterError(Exception):
    """The target reported an error for an operation (STOMP ERROR, AMQP error condition)."""


class TargetUnreachable(AdapterError):
    """Nothing answered the connection attempt (refused, nothing listening, no route): the target is down,
    which says nothing about the requirement a test was checking; reported as an error, not a failure."""


class NotSupported(AdapterError):
    """The driver or target lacks a capability the test needs; reported as not-applicable."""

    def __init__(self, capability: Capability | str, detail: str = "") -> None:
        self.capability = str(capability)
        super().__init__(f"needs capability {self.capability}" + (f": {detail}" if detail else ""))


class Indeterminate(AdapterError):
    """The outcome is unknown (timeout, connection lost before the confirmation)."""


class ConnectionLost(Indeterminate):
    """The connection went away while an operation was outstanding."""


class Adapter(abc.ABC):
    """A driver for one kind of client against one target URL."""

    name: str = "abstract"
    protocol: str = "any"  # "stomp" | "amqp" | "jms"

    def __init__(self, url: str, recorder: Recorder, *, timeout: float = 5.0) -> None:
        self.url = url
        self.recorder = recorder
        self.timeout = timeout

    @property
    @abc.abstractmethod
    def capabilities(self) -> frozenset[Capability]:
        """What this driver can do against this target."""

    def require(self, *needed: Capability) -> None:
        for cap in needed:
            if cap not in self.capabilities:
                raise NotSupported(cap, f"{self.name} against {self.url}")

    def client(self, process: str, **options: Any) -> Client:
        """Open one connection, recorded as ``connect``."""
        pending = self.recorder.invoke(Op.CONNECT, process)
        try:
            client = self._open(process, **options)
        except Exception as exc:
            pending.fail(error=str(exc))
            raise
        pending.ok()
        return client

    @abc.abstractmethod
    def _open(self, process: str, **options: Any) -> Client:
        """Connect and return a client; raise :class:`AdapterError` on refusal."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release driver-wide resources (threads, event loops)."""


SELECTOR_OPTION = "selector"
"""The subscribe option a driver turns into its protocol's selector (STOMP's header of that name, which
ActiveMQ and Artemis read; the AMQP selector filter)."""
NO_LOCAL_OPTION = "no-local"
"""The subscribe option (value ``true``) a driver turns into its protocol's noLocal."""


class Client(abc.ABC):
    """One connection to the target. Public verbs record; ``_hooks`` talk to the wire."""

    def __init__(self, adapter: Adapter, process: str) -> None:
        self.adapter = adapter
        self.process = process
        self.recorder = adapter.recorder
        self.timeout = adapter.timeout
        self._subscriptions: dict[str, tuple[str, AckMode]] = {}

    # -- verbs ---------------------------------------------------------------------

    def subscribe(self, destination: str, *, ack: AckMode = AckMode.AUTO, prefetch: int | None = None,
                  headers: Mapping[str, str] | None = None, durable: str | None = None,
                  selector: str | None = None, no_local: bool = False) -> str:
        """Open a consumer. With ``durable`` (topics only) it consumes the durable subscription of that
        name (created, or resumed with what it kept), owned by the connection's ``client_id`` (an option
        of :meth:`Adapter.client`): JMS ``createDurableConsumer``. With ``selector``, a JMS message
        selector: the consumer gets only the messages it matches (needs :attr:`Capability.SELECTORS`). With
        ``no_local`` (topics), not the messages this connection publishes (needs :attr:`Capability.NO_LOCAL`)."""
        value: dict[str, object] = {k: v for k, v in (("durable", durable), ("selector", selector)) if v is not None}
        if no_local:
            value["no_local"] = True
        pending = self.recorder.invoke(Op.SUBSCRIBE, self.process, destination=destination,
                                       ack_mode=str(ack), limit=prefetch, **({"value": value} if value else {}))
        headers = dict(headers or {})
        for wanted, capability, option, text in ((selector is not None, Capability.SELECTORS, SELECTOR_OPTION,
                                                  selector or ""),
                                                 (no_local, Capability.NO_LOCAL, NO_LOCAL_OPTION, "true")):
            if not wanted:
                continue
            if capability not in self.adapter.capabilities:
                error = NotSupported(capability, f"{self.adapter.name} against {self.adapter.url}")
                pending.fail(error=str(error))
                raise error
            headers[option] = text
        if durable is None:
            sub_id = self._guard(pending, self._subscribe, destination, ack, prefetch, headers)
        else:
            sub_id = self._guard(pending, self._subscribe_durable, destination, durable, ack, prefetch, headers)
        self._subscriptions[sub_id] = (destination, ack)
        pending.ok(subscription=sub_id)
        return sub_id

    def unsubscribe(self, subscription: str) -> None:
        """Close a consumer; a durable subscription it consumed is kept (see :meth:`remove_durable`)."""
        destination, _ = self._subscriptions.get(subscription, (None, AckMode.AUTO))
        pending = self.recorder.invoke(Op.UNSUBSCRIBE, self.process, destination=destination,
                                       subscription=subscription)
        self._guard(pending, self._unsubscribe, subscription)
        self._subscriptions.pop(subscription, None)
        pending.ok()

    def remove_durable(self, destination: str, name: str) -> None:
        """Delete this client's durable subscription ``name`` on topic ``destination`` and what it kept
        (JMS ``Session.unsubscribe``); it must have no open consumer."""
        pending = self.recorder.invoke(Op.UNSUBSCRIBE, self.process, destination=destination,
                                       value={"durable": name, "removed": True})
        self._guard(pending, self._remove_durable, destination, name)
        pending.ok()

    def send(self, destination: str, body: bytes = b"", *, seq: int | None = None, producer: str | None = None,
             persistent: bool = False, confirm: bool = True, transaction: str | None = None,
             headers: Mapping[str, str] | None = None) -> SendResult:
        """Send one message; with ``confirm`` wait for the target's confirmation.

        An unconfirmed send completes as ``info``: we do not know whether it arrived.
        """
        all_headers = dict(headers or {})
        if seq is not None:
            all_headers[SEQ_HEADER] = str(seq)
        if producer is not None:
            all_headers[PRODUCER_HEADER] = producer
        pending = self.recorder.invoke(Op.SEND, self.process, destination=destination, seq=seq,
                                       producer=producer, persistent=persistent, transaction=transaction)
        result = self._guard(pending, self._send, destination, body, all_headers, persistent, confirm,
                             transaction)
        result = SendResult(seq=seq, confirmed=result.confirmed, message_id=result.message_id,
                            detail=result.detail)
        if result.confirmed:
            pending.ok(message_id=result.message_id)
        else:
            pending.info(error="not confirmed: no receipt asked for", message_id=result.message_id)
        return result

    def receive(self, subscription: str, timeout: float | None = None) -> Delivery | None:
        """Wait up to ``timeout`` for the next delivery on a subscription; ``None`` if none came."""
        destination, ack = self._subscriptions.get(subscription, (None, AckMode.AUTO))
        pending = self.recorder.invoke(Op.RECEIVE, self.process, destination=destination,
                                       subscription=subscription, ack_mode=str(ack))
        delivery = self._guard(pending, self._receive, subscription, self.timeout if timeout is None else timeout)
        if delivery is None:
            pending.ok(value="empty")
        else:
            pending.ok(seq=delivery.seq, producer=delivery.producer, message_id=delivery.message_id,
                       ack_id=delivery.ack_id, redelivered=delivery.redelivered,
                       delivery_count=delivery.delivery_count, destination=delivery.destination)
        return delivery

    def ack(self, delivery: Delivery, *, transaction: str | None = None, confirm: bool = True) -> None:
        pending = self.recorder.invoke(Op.ACK, self.process, destination=delivery.destination,
                                       subscription=delivery.subscription, seq=delivery.seq,
                                       message_id=delivery.message_id, ack_id=delivery.ack_id,
                                       transaction=transaction)
        self._guard(pending, self._ack, delivery, transaction, confirm)
        self._complete_unconfirmed(pending, confirm)

    def nack(self, delivery: Delivery, *, outcome: NackOutcome = NackOutcome.NACK,
             transaction: str | None = None, confirm: bool = True) -> None:
        pending = self.recorder.invoke(Op.NACK, self.process, destination=delivery.destination,
                                       subscription=delivery.subscription, seq=delivery.seq,
                                       message_id=delivery.message_id, ack_id=delivery.ack_id,
                                       transaction=transaction, outcome=str(outcome))
        self._guard(pending, self._nack, delivery, outcome, transaction, confirm)
        self._complete_unconfirmed(pending, confirm)

    def begin(self, transaction: str) -> str:
        pending = self.recorder.invoke(Op.BEGIN, self.process, transaction=transaction)
        self._guard(pending, self._begin, transaction)
        pending.ok()
        return transaction

    def commit(self, transaction: str) -> None:
        pending = self.recorder.invoke(Op.COMMIT, self.process, transaction=transaction)
        self._guard(pending, self._commit, transaction)
        pending.ok()

    def abort(self, transaction: str) -> None:
        pending = self.recorder.invoke(Op.ABORT, self.process, transaction=transaction)
        self._guard(pending, self._abort, transaction)
        pending.ok()

    def disconnect(self) -> None:
        """Clean disconnect (STOMP: DISCONNECT with receipt, waited for)."""
        pending = self.recorder.invoke(Op.DISCONNECT, self.process)
        self._guard(pending, self._disconnect)
        pending.ok()

    def crash(self) -> None:
        """Abrupt loss of the connection: the socket is closed with no goodbye."""
        pending = self.recorder.invoke(Op.CRASH, self.process)
        self._guard(pending, self._crash)
        pending.ok()

    # -- helpers -------------------------------------------------------------------

    def _complete_unconfirmed(self, pending: Pending, confirm: bool) -> None:
        if confirm:
            pending.ok()
        else:
            pending.info(error="not confirmed: no receipt asked for")

    def _guard(self, pending: Pending, fn: Callable[..., T], *args: Any) -> T:
        """Run a hook, completing the pending record as fail/info when it raises."""
        try:
            return fn(*args)
        except NotSupported as exc:
            pending.fail(error=str(exc))
            raise
        except Indeterminate as exc:
            pending.info(error=str(exc) or type(exc).__name__)
            raise
        except AdapterError as exc:
            pending.fail(error=str(exc))
            raise
        except Exception as exc:
            pending.info(error=f"{type(exc).__name__}: {exc}")
            raise

    # -- hooks for drivers -----------------------------------------------------------

    @abc.abstractmethod
    def _subscribe(self, destination: str, ack: AckMode, prefetch: int | None,
                   headers: dict[str, str]) -> str: ...

    @abc.abstractmethod
    def _unsubscribe(self, subscription: str) -> None: ...

    def _subscribe_durable(self, destination: str, name: str, ack: AckMode, prefetch: int | None,
                           headers: dict[str, str]) -> str:
        """Consume durable subscription ``name``; drivers that can, override this and ``_remove_durable``."""
        raise NotSupported(Capability.DURABLE_SUBSCRIPTIONS, f"{self.adapter.name} has no durable subscriptions")

    def _remove_durable(self, destination: str, name: str) -> None:
        raise NotSupported(Capability.DURABLE_SUBSCRIPTIONS, f"{self.adapter.name} has no durable subscriptions")

    @abc.abstractmethod
    def _send(self, destination: str, body: bytes, headers: dict[str, str], persistent: bool, confirm: bool,
              transaction: str | None) -> SendResult: ...

    @abc.abstractmethod
    def _receive(self, subscription: str, timeout: float) -> Delivery | None: ...

    @abc.abstractmethod
    def _ack(self, delivery: Delivery, transaction: str | None, confirm: bool) -> None: ...

    @abc.abstractmethod
    def _nack(self, delivery: Delivery, outcome: NackOutcome, transaction: str | None, confirm: bool) -> None: ...

    @abc.abstractmethod
    def _begin(self, transaction: str) -> None: ...

    @abc.abstractmethod
    def _commit(self, transaction: str) -> None: ...

    @abc.abstractmethod
    def _abort(self, transaction: str) -> None: ...

    @abc.abstractmethod
    def _disconnect(self) -> None: ...

    @abc.abstractmethod
    def _crash(self) -> None: ...
