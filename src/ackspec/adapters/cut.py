"""The client under test: one small typed interface for client-side conformance.

The main suite tests *brokers* through :mod:`ackspec.adapters.base`. Client-side rules
(Jakarta Messaging 7.3, synchronous-send flags, publish windows, consumer ack behaviour)
are about what a *client library* does, so the roles flip: the broker is the fault-
injecting reference broker, and the thing under test is a client library driven through
:class:`ClientUnderTest`.

Handles are strings chosen by the driver (``"s1"``, ``"p1"``, ``"m7"``...). Everything a
client does asynchronously is reported as a :class:`CutEvent` in :attr:`ClientUnderTest.events`,
which tests wait on with a timeout (never sleep). Event kinds a driver emits:

=================  ====================================================================
``completion``     onCompletion ran: ``send``, ``thread``, ``sender_thread``, ``session``, ``concurrent``
                   (callbacks of that session running at that moment, including this one)
``exception``      onException ran: ``send``, ``thread``, ``error``
``callback-result``result of an action performed inside a callback: ``action``, ``outcome``
                   (``ok`` / ``IllegalStateError`` / other exception name)
``window-ack``     publish-window ack event: ``sends`` (tuple), ``last``
``window-reject``  publish-window rejection: ``send``
``send-ack``       send-acknowledgement handler call: ``send``
``send-blocked``   a sender waits for room in a window
``ack``            an acknowledgement of ActiveMQ type ``ack_type`` (int) for ``messages``
``message``        a MessageListener got ``message`` (handle) with ``body``
``dispatch``       the broker pushed a message to ``consumer`` (``message_id``), reported as it arrives
``listener-blocked`` a listener with the ``block`` action is waiting for ``release_listeners``
``callback-blocked`` a completion callback with the ``block`` action (``send``) is waiting for ``release_listeners``
``listener-returned`` a listener's ``on_message`` returned: ``consumer``, ``message``
=================  ====================================================================

Drivers declare :class:`ClientFeature` values; a test needing a missing one is skipped
as not applicable, naming the feature.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from typing import Any


class ClientFeature(StrEnum):
    SYNC_SEND_CONFIRMED = "sync-send-confirmed"  # a blocking send waits for the broker's confirmation
    ASYNC_SEND = "async-send"  # send with a completion listener (JMS 7.3)
    SEND_FLAGS = "send-flags"  # block_on_durable_send / block_on_non_durable_send / block_on_acknowledge
    TRANSACTIONS = "transactions"
    PUBLISH_WINDOW = "publish-window"  # Solace window with ack event modes
    CONFIRMATION_WINDOW = "confirmation-window"  # Artemis confirmation window + send-ack handler
    CALLBACK_ACTIONS = "callback-actions"  # perform close/commit inside a completion callback
    MESSAGE_ACCESS = "message-access"  # the sent message object can be touched (7.3.6 / 7.3.9)
    ACK_MODES = "ack-modes"  # AUTO, CLIENT, DUPS_OK, INDIVIDUAL, transacted sessions
    ACK_TYPES = "ack-types"  # the ActiveMQ ack types it sends are reported as ``ack`` events
    LISTENER = "listener"  # MessageListener delivery
    RECOVER = "recover"
    SELECTOR = "selector"
    PREFETCH = "prefetch"
    HEARTBEAT = "heartbeat"  # the open option heart_beat="cx,cy" (STOMP CONNECT heart-beat offer)
    DEAD_PEER = "dead-peer"  # promises to drop a peer silent beyond the heart-beat interval (a MAY rule made a check)
    DISPATCH_EVENTS = "dispatch-events"  # each message the broker pushes: a ``dispatch`` event, among the acks
    CLOSE_CONSUMER = "close-consumer"  # MessageConsumer.close (ends a blocked receive, waits for a listener)
    CONTEXT = "context"  # the simplified API (JMSContext): context, close_context; its handle stands for a session


class CutError(Exception):
    """The client under test raised; ``kind`` is its exception class name (e.g. IllegalStateError)."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


def installed_version(distribution: str) -> str:
    """The installed version of a Python distribution (a driver's ``library_version``), or ""."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return ""


class NotApplicable(Exception):
    """The driver lacks a feature the test needs."""


@dataclass(frozen=True, slots=True)
class CutEvent:
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    index: int = 0
    time: float = 0.0

    def __getitem__(self, key: str) -> Any:
        return self.detail[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.detail.get(key, default)


class CutEvents:
    """Thread-safe append-only event list with waiting."""

    def __init__(self) -> None:
        self._events: list[CutEvent] = []
        self._cond = threading.Condition()
        self._listeners: list[Callable[[CutEvent], None]] = []

    def subscribe(self, listener: Callable[[CutEvent], None]) -> None:
        """Call ``listener`` synchronously, in order, for every later event (the shim server writes them out)."""
        with self._cond:
            self._listeners.append(listener)

    def append(self, kind: str, /, **detail: Any) -> CutEvent:
        with self._cond:
            event = CutEvent(kind, detail, len(self._events), time.monotonic())
            self._events.append(event)
            self._cond.notify_all()
            for listener in self._listeners:  # under the lock: listeners see events in index order
                listener(event)
            return event

    def of(self, *kinds: str) -> list[CutEvent]:
        with self._cond:
            return [e for e in self._events if not kinds or e.kind in kinds]

    def wait_for(self, predicate: Callable[[list[CutEvent]], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._events), timeout)

    def wait_count(self, kind: str | tuple[str, ...], count: int, timeout: float) -> list[CutEvent]:
        kinds = (kind,) if isinstance(kind, str) else kind
        self.wait_for(lambda evs: sum(1 for e in evs if e.kind in kinds) >= count, timeout)
        return self.of(*kinds)


@dataclass(frozen=True, slots=True)
class Received:
    handle: str
    body: bytes
    redelivered: bool
    delivery_count: int | None
    properties: Mapping[str, str] = field(default_factory=dict)


CALLBACK_ACTIONS = ("close-producer", "close-session", "close-context", "close-connection", "commit", "rollback",
                    "block")
LISTENER_ACTIONS = ("close-consumer", "close-session", "close-connection", "block")


class ClientUnderTest(abc.ABC):
    """A client library behind a small, typed set of verbs (see the module docstring)."""

    name = "abstract"
    features: frozenset[ClientFeature] = frozenset()
    protocol = "stomp"  # the wire protocol it speaks: stomp, amqp, core, openwire
    library = ""  # the library under test, as its maintainers name it (empty: the driver's name)
    library_version = ""  # its version, read from the installed library where possible

    def __init__(self) -> None:
        self.events = CutEvents()

    def require(self, *needed: ClientFeature) -> None:
        missing = [f for f in needed if f not in self.features]
        if missing:
            raise NotApplicable(f"{self.name} lacks {', '.join(missing)}")

    # -- lifecycle --------------------------------------------------------------------------
    @abc.abstractmethod
    def open(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        """Connect. ``options``: block_on_durable_send, block_on_non_durable_send, block_on_acknowledge,
        publish_window_size, ack_event_mode, confirmation_window_size, prefetch, optimize_acknowledge,
        optimize_acknowledge_timeout, maximum_redeliveries, heart_beat (drivers ignore what they lack)."""

    @abc.abstractmethod
    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str: ...

    @abc.abstractmethod
    def producer(self, session: str) -> str:
        """A producer of ``session``, or of a JMSContext: a context handle stands for a session here and in
        :meth:`commit` and :meth:`rollback`."""

    def context(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        """A JMSContext (the simplified API, feature ``context``) of its own connection, like ``session``'s modes.

        Sends through its producers are ``JMSProducer.setAsync(listener).send``; their callbacks' actions
        are ``close-context``, ``commit``, ``rollback`` or ``block``. A client without a simplified API has
        no context: the rules' context case is not applicable to it."""
        raise NotApplicable(f"{self.name} has no simplified API (JMSContext)")

    def close_context(self, context: str) -> None:
        raise NotApplicable(f"{self.name} has no simplified API (JMSContext)")

    # -- sends --------------------------------------------------------------------------------
    @abc.abstractmethod
    def sync_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                  properties: Mapping[str, str] | None = None) -> str:
        """Synchronous send; returns the send's handle; raises :class:`CutError`."""

    def async_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                   properties: Mapping[str, str] | None = None, on_callback: str | None = None) -> str:
        """Send with a completion listener; returns the send's handle at once.

        ``on_callback``: an action of :data:`CALLBACK_ACTIONS` the listener performs on its own
        producer/session/connection; its outcome is reported as a ``callback-result`` event (``block``
        reports ``callback-blocked`` and waits for :meth:`release_listeners`)."""
        raise NotApplicable(f"{self.name} has no asynchronous send")

    def touch_message(self, send: str) -> str:
        """Read the sent message's body; ``"ok"`` or the exception class name (7.3.9)."""
        raise NotApplicable(f"{self.name} does not expose the sent message")

    def message_id(self, send: str) -> str | None:
        """The provider-set message id of a completed send (7.3.6)."""
        raise NotApplicable(f"{self.name} does not expose the sent message")

    def set_publish_event_listener(self) -> None:
        raise NotApplicable(f"{self.name} has no publish window")

    def set_send_ack_handler(self) -> None:
        raise NotApplicable(f"{self.name} has no send-acknowledgement handler")

    # -- consumers ----------------------------------------------------------------------------
    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        """``listener``: deliver to a MessageListener (``message`` events); it raises for the first
        ``fail_first`` deliveries."""
        raise NotApplicable(f"{self.name} has no consumer support in this driver")

    def receive(self, consumer: str, timeout: float) -> Received | None:
        raise NotApplicable(f"{self.name} has no synchronous receive")

    def close_consumer(self, consumer: str) -> None:
        raise NotApplicable(f"{self.name} cannot close consumers")

    def set_listener_action(self, action: str | None) -> None:
        """MessageListeners created from now on perform ``action`` inside ``on_message``: one of
        :data:`LISTENER_ACTIONS`; the outcome is reported as a ``callback-result`` event (``block``
        reports ``listener-blocked`` and waits for :meth:`release_listeners`)."""
        raise NotApplicable(f"{self.name} cannot act inside a MessageListener")

    def release_listeners(self) -> None:
        """Let listeners (message listeners and completion callbacks) blocked by the ``block`` action return."""
        raise NotApplicable(f"{self.name} cannot act inside a MessageListener")

    def acknowledge(self, message: str) -> None:
        raise NotApplicable(f"{self.name} has no message.acknowledge()")

    def recover(self, session: str) -> None:
        raise NotApplicable(f"{self.name} has no recover()")

    # -- transactions and closing ---------------------------------------------------------------
    def commit(self, session: str) -> None:
        raise NotApplicable(f"{self.name} has no transactions")

    def rollback(self, session: str) -> None:
        raise NotApplicable(f"{self.name} has no transactions")

    def close_producer(self, producer: str) -> None:
        raise NotApplicable(f"{self.name} cannot close producers")

    def close_session(self, session: str) -> None:
        raise NotApplicable(f"{self.name} cannot close sessions")

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection (waiting for incomplete sends where the client does)."""

    def crash(self) -> None:
        """Drop the connection abruptly."""
        raise NotApplicable(f"{self.name} cannot drop its connection")
