"""Sans-IO bookkeeping of sends: confirmations, completion order, windows, 7.3.4 waits.

Why a separate core: every rule of Jakarta Messaging 7.3 about *when* and *in which order*
something happens is a rule about this bookkeeping, not about sockets. The I/O layer tells
the core what happened (``sent``, ``on_receipt``, ``on_rejected``, ``on_connection_lost``)
and executes the actions it returns (wake a blocked sender, queue a callback on the
session's callback thread, emit a publish-window event). Unit tests drive it directly.

Rules encoded here:

* 7.3.1 a send completes only when its confidence is reached: a broker confirmation
  when the equivalent synchronous send would block (``block_on_durable_send`` /
  ``block_on_non_durable_send``, publish window, send-acknowledgement handler), otherwise
  once written to the transport;
* 7.3.3 / 7.3.8 completions are *released* strictly in send order per producer, across
  destinations and mixed with synchronous sends: a confirmed send waits behind an earlier
  unconfirmed one of the same producer;
* 7.3.2 a send removed with :meth:`SendTracker.abandon` (the write raised in the caller's
  thread) never produces a callback; every other send produces exactly one;
* 7.3.4 :meth:`SendTracker.incomplete` counts sends not yet completed *including* the
  callback still running, per producer, per session or for the whole connection;
* Solace publish window (seed 004): at most N windowed sends unacknowledged; one broker
  confirmation covers every earlier windowed send; a rejection is per message and frees
  one slot; per-message or windowed acknowledgement events;
* Artemis confirmation window (seed 000): with ``confirmation_window_size`` > 0 every send
  is confirmed and reported to the send-acknowledgement handler, and at most that many
  bytes are unconfirmed at once.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from ackspec.reference.client.options import AckEventMode, ClientOptions


class SendKind(StrEnum):
    BLOCKING = "blocking"  # synchronous send that waits for the broker
    FIRE = "fire"  # synchronous send that returns once written
    ASYNC = "async"  # send with a CompletionListener


class SendState(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    FAILED = "failed"


class Outcome(StrEnum):
    REJECTED = "rejected"  # the broker refused this message
    INDETERMINATE = "indeterminate"  # connection lost / timed out: unknown


@dataclass(eq=False, slots=True)
class PendingSend:
    """One send as the core tracks it. ``ref`` and ``listener`` are opaque to the core."""

    token: str
    number: int
    producer: str
    session: str
    destination: str
    kind: SendKind
    wants_receipt: bool
    windowed: bool
    acked_to_handler: bool
    size: int
    ref: object = None
    listener: object = None
    state: SendState = SendState.PENDING
    outcome: Outcome | None = None
    error: str | None = None
    released: bool = False
    callback_running: bool = False
    finished: bool = False


# -- actions returned to the I/O layer --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Complete:
    """Release this send: wake its blocked sender, or run its completion callback."""

    send: PendingSend


@dataclass(frozen=True, slots=True)
class SendAcknowledged:
    """Artemis SendAcknowledgementHandler.sendAcknowledged for a confirmed send."""

    send: PendingSend


@dataclass(frozen=True, slots=True)
class WindowAck:
    """A publish-window acknowledgement event.

    Per-message mode: one event per message (``sends`` has one element). Windowed mode: one
    event per broker acknowledgement, naming the last message and covering ``sends``."""

    sends: tuple[PendingSend, ...]
    last: PendingSend


@dataclass(frozen=True, slots=True)
class WindowReject:
    """An explicit per-message rejection (both event modes)."""

    send: PendingSend
    error: str


@dataclass(frozen=True, slots=True)
class WindowOpened:
    """Room appeared in the publish or confirmation window: wake blocked senders."""

    free: int


Action = Complete | SendAcknowledged | WindowAck | WindowReject | WindowOpened


def classify(options: ClientOptions, *, persistent: bool, transacted: bool, asynchronous: bool,
             ack_handler: bool) -> tuple[SendKind, bool, bool]:
    """Decide (kind, wants_receipt, windowed) for one send from the options (Artemis + Solace rules).

    In a transacted session only commit blocks (Artemis "Guarantees of sends and commits"), so
    sends there never wait; a windowed send is a persistent non-transacted send when a publish
    window is configured. An asynchronous send in a transaction asks for a receipt too.
    """
    windowed = options.publish_window_size > 0 and persistent and not transacted
    would_block = (not transacted) and (
        options.block_on_durable_send if persistent else options.block_on_non_durable_send)
    confirm_handler = ack_handler and options.confirmation_window_size > 0 and not transacted
    if asynchronous:
        # In a transaction the listener still waits for the broker to have taken the SEND, so that
        # commit()'s wait for incomplete sends (7.3.4) means something on the wire.
        return SendKind.ASYNC, would_block or windowed or confirm_handler or transacted, windowed
    if windowed:
        return SendKind.FIRE, True, True
    if would_block:
        return SendKind.BLOCKING, True, False
    return SendKind.FIRE, confirm_handler, False


class SendTracker:
    """Per-connection send bookkeeping. Not thread-safe: the I/O layer holds one lock around it."""

    def __init__(self, options: ClientOptions, *, token_prefix: str = "send-", cumulative: bool = True) -> None:
        self.options = options
        self.cumulative = cumulative
        """A confirmation covers every earlier windowed send (STOMP receipts); False: only its own
        send (AMQP dispositions settle exactly the deliveries they name)."""
        self._prefix = token_prefix
        self._numbers = itertools.count(1)
        self._by_token: dict[str, PendingSend] = {}
        self._per_producer: dict[str, deque[PendingSend]] = {}
        self._window: deque[PendingSend] = deque()  # windowed sends awaiting the broker, in send order
        self._unconfirmed_bytes = 0
        self._scopes: dict[str, int] = {}  # scope -> incomplete sends (absent: none)
        self._scope_names: dict[tuple[str, str], tuple[str, str, str]] = {}  # (producer, session) -> its scopes
        self.ack_handler_enabled = False

    # -- queries ------------------------------------------------------------------------------

    @property
    def window_in_flight(self) -> int:
        return len(self._window)

    @property
    def unconfirmed_bytes(self) -> int:
        return self._unconfirmed_bytes

    def has_room(self, *, windowed: bool, size: int) -> bool:
        """May a send of this shape be written now? The I/O layer blocks the sender while not."""
        if windowed and len(self._window) >= self.options.publish_window_size:
            return False
        limit = self.options.confirmation_window_size
        return not (self.ack_handler_enabled and limit > 0 and self._unconfirmed_bytes > 0
                    and self._unconfirmed_bytes + size > limit)

    def incomplete(self, scope: str) -> int:
        """Sends of a producer, session (``session:<id>``) or connection (``connection``) not finished."""
        return self._scopes.get(scope, 0)

    def get(self, token: str) -> PendingSend | None:
        return self._by_token.get(token)

    def pending_tokens(self) -> list[str]:
        return [t for t, s in self._by_token.items() if s.state is SendState.PENDING]

    # -- events from the I/O layer ----------------------------------------------------------------

    def submit(self, *, producer: str, session: str, destination: str, kind: SendKind, wants_receipt: bool,
               windowed: bool, size: int, ref: object = None, listener: object = None) -> PendingSend:
        """Register a send before it is written. Follow with :meth:`sent` or :meth:`abandon`."""
        number = next(self._numbers)
        send = PendingSend(token=f"{self._prefix}{number}", number=number, producer=producer, session=session,
                           destination=destination, kind=kind, wants_receipt=wants_receipt, windowed=windowed,
                           acked_to_handler=self.ack_handler_enabled and wants_receipt, size=size, ref=ref,
                           listener=listener)
        self._by_token[send.token] = send
        queue = self._per_producer.get(producer)
        if queue is None:
            queue = self._per_producer[producer] = deque()
        queue.append(send)
        if windowed:
            self._window.append(send)
        if wants_receipt:
            self._unconfirmed_bytes += size
        scopes = self._scopes
        for scope in self._scopes_of(send):
            scopes[scope] = scopes.get(scope, 0) + 1
        return send

    def abandon(self, token: str) -> list[Action]:
        """The write raised in the sending thread: the caller gets the exception, no callback (7.3.2)."""
        send = self._by_token.pop(token, None)
        if send is None:
            return []
        queue = self._per_producer.get(send.producer)
        if queue is not None and send in queue:
            queue.remove(send)
        actions: list[Action] = []
        if send in self._window:
            self._window.remove(send)
            actions.append(WindowOpened(self._free()))
        if send.wants_receipt:
            self._unconfirmed_bytes -= send.size
        self._finish_scopes(send)
        actions.extend(self._release(send.producer))
        return actions

    def sent(self, token: str) -> list[Action]:
        """The frame was handed to the transport. Sends without a receipt are now complete."""
        send = self._by_token.get(token)
        if send is None or send.wants_receipt or send.state is not SendState.PENDING:
            return []
        send.state = SendState.CONFIRMED
        return self._release(send.producer)

    def on_receipt(self, token: str) -> list[Action]:
        """The broker confirmed ``token``; in a publish window this covers every earlier windowed send."""
        send = self._by_token.get(token)
        if send is None or send.state is not SendState.PENDING:
            return []
        actions: list[Action] = []
        if send.windowed:
            covered: list[PendingSend] = []
            if not self.cumulative:
                self._window.remove(send)
                self._confirm(send)
                covered.append(send)
            while self.cumulative and self._window and self._window[0].number <= send.number:
                earlier = self._window.popleft()
                if earlier.state is SendState.PENDING:
                    self._confirm(earlier)
                    covered.append(earlier)
            if covered:
                if self.options.ack_event_mode is AckEventMode.WINDOWED:
                    actions.append(WindowAck(tuple(covered), covered[-1]))
                else:
                    actions.extend(WindowAck((s,), s) for s in covered)
                actions.append(WindowOpened(self._free()))
            producers = dict.fromkeys(s.producer for s in covered)
        else:
            self._confirm(send)
            if not self.ack_handler_enabled:  # the common case (a blocking send's receipt): its release only
                return self._release(send.producer)
            producers = {send.producer: None}
        if self.ack_handler_enabled:
            actions.extend(SendAcknowledged(s) for s in self._confirmed_for_handler())
        for producer in producers:
            actions.extend(self._release(producer))
        return actions

    def on_rejected(self, token: str, error: str) -> list[Action]:
        """The broker refused this one message (it stays refused; the window opens by one)."""
        send = self._by_token.get(token)
        if send is None or send.state is not SendState.PENDING:
            return []
        actions: list[Action] = []
        self._fail(send, Outcome.REJECTED, error)
        if send.windowed:
            self._window.remove(send)
            actions.append(WindowReject(send, error))
            actions.append(WindowOpened(self._free()))
        actions.extend(self._release(send.producer))
        return actions

    def on_connection_lost(self, error: str) -> list[Action]:
        """Every unconfirmed send becomes indeterminate and is reported (onException) in order."""
        pending = [s for s in self._by_token.values() if s.state is SendState.PENDING]
        for send in pending:
            self._fail(send, Outcome.INDETERMINATE, error)
        self._window.clear()
        actions: list[Action] = [WindowOpened(self._free())] if pending else []
        for producer in dict.fromkeys(s.producer for s in pending):
            actions.extend(self._release(producer))
        return actions

    def callback_returned(self, token: str) -> None:
        """The completion callback (or the woken sender) is done with this send."""
        send = self._by_token.pop(token, None)
        if send is None or send.finished:
            return
        send.callback_running = False
        self._finish_scopes(send)

    # -- internals ----------------------------------------------------------------------------------

    def _free(self) -> int:
        return max(0, self.options.publish_window_size - len(self._window))

    def _confirm(self, send: PendingSend) -> None:
        send.state = SendState.CONFIRMED
        if send.wants_receipt:
            self._unconfirmed_bytes -= send.size

    def _fail(self, send: PendingSend, outcome: Outcome, error: str) -> None:
        send.state = SendState.FAILED
        send.outcome = outcome
        send.error = error
        if send.wants_receipt:
            self._unconfirmed_bytes -= send.size

    def _confirmed_for_handler(self) -> list[PendingSend]:
        out: list[PendingSend] = []
        for send in self._by_token.values():
            if send.acked_to_handler and send.state is SendState.CONFIRMED:
                send.acked_to_handler = False
                out.append(send)
        out.sort(key=lambda s: s.number)
        return out

    def _release(self, producer: str) -> list[Action]:
        """Pop completed sends from the head of the producer's queue, in send order (7.3.8)."""
        queue = self._per_producer.get(producer)
        actions: list[Action] = []
        while queue and queue[0].state is not SendState.PENDING:
            send = queue.popleft()
            send.released = True
            send.callback_running = True
            actions.append(Complete(send))
        if queue is not None and not queue:
            del self._per_producer[producer]
        return actions

    def _scopes_of(self, send: PendingSend) -> tuple[str, str, str]:
        key = (send.producer, send.session)
        names = self._scope_names.get(key)
        if names is None:
            if len(self._scope_names) > 1000:  # many short-lived producers: start over rather than grow
                self._scope_names.clear()
            names = self._scope_names[key] = (send.producer, f"session:{send.session}", "connection")
        return names

    def _finish_scopes(self, send: PendingSend) -> None:
        if send.finished:
            return
        send.finished = True
        scopes = self._scopes
        for scope in self._scopes_of(send):
            left = scopes.get(scope)
            if left is not None:
                if left > 1:
                    scopes[scope] = left - 1
                else:
                    del scopes[scope]


__all__ = [
    "Action", "Complete", "Outcome", "PendingSend", "SendAcknowledged", "SendKind", "SendState", "SendTracker",
    "WindowAck", "WindowOpened", "WindowReject", "classify",
]
