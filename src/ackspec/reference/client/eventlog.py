"""The client's event log: what the client did and saw, for tests to wait on.

Tests never sleep: they wait for an event (``wait_for``) with a timeout. Entries are
frozen; the log is thread-safe because the reader thread, callback threads and the
application all append to it.

Kinds (``ClientEvent.kind``):

``send``          a SEND was written (detail: token, destination, producer, kind, receipt)
``send-blocked``  a sender is waiting for room in the publish/confirmation window
``confirmed``     the broker confirmed a send (token)
``rejected``      the broker rejected a send (token, error)
``complete``      a completion was released to its sender/callback (token, ok, producer)
``callback``      a CompletionListener method ran (token, method, thread)
``window-ack``    a publish-window acknowledgement event (tokens, last)
``window-reject`` a publish-window rejection event (token)
``send-ack``      SendAcknowledgementHandler call (token)
``ack``           an acknowledgement of an ActiveMQ ack type (ack_type, consumer, ack_ids, wire)
``pull``          a pull request (prefetch 0)
``deliver``       a message was handed to the application (consumer, ack_id, delivery_count)
``connection-lost`` the transport went away (error)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ClientEvent:
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    time: float = 0.0
    index: int = 0

    def __getitem__(self, key: str) -> Any:
        return self.detail[key]


class EventLog:
    """Append-only, thread-safe. Appending is on every send's path, so it is kept small: one plain lock,
    a tuple (the :class:`ClientEvent` is made when somebody reads the log or listens to it), and a wake-up
    only when somebody waits (``wait_for`` counts them)."""

    def __init__(self) -> None:
        self._raw: list[tuple[str, Mapping[str, Any], float]] = []
        self._events: list[ClientEvent] = []  # ClientEvents of _raw[:len(_events)]
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._listeners: tuple[Callable[[ClientEvent], None], ...] = ()  # replaced, never mutated

    def append(self, kind: str, /, **detail: Any) -> None:
        with self._lock:
            self._raw.append((kind, detail, time.monotonic()))
            if self._waiting:
                self._cond.notify_all()
            listeners = self._listeners
            event = self._caught_up()[-1] if listeners else None
        if event is not None:
            for listener in listeners:
                listener(event)

    def _caught_up(self) -> list[ClientEvent]:
        """Every event as a ClientEvent (the lock is held)."""
        events, raw = self._events, self._raw
        for index in range(len(events), len(raw)):
            kind, detail, stamp = raw[index]
            events.append(ClientEvent(kind, detail, stamp, index))
        return events

    def subscribe(self, listener: Callable[[ClientEvent], None]) -> None:
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def events(self, kind: str | None = None) -> list[ClientEvent]:
        with self._lock:
            return [e for e in self._caught_up() if kind is None or e.kind == kind]

    def wait_for(self, predicate: Callable[[list[ClientEvent]], bool], timeout: float) -> bool:
        """Wait until ``predicate(all events)`` holds; False on timeout."""
        with self._cond:
            self._waiting += 1
            try:
                return self._cond.wait_for(lambda: predicate(self._caught_up()), timeout)
            finally:
                self._waiting -= 1

    def wait_count(self, kind: str, count: int, timeout: float) -> bool:
        return self.wait_for(lambda evs: sum(1 for e in evs if e.kind == kind) >= count, timeout)
