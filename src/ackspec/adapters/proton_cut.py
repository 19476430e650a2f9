"""python-qpid-proton (AMQP 1.0) as a client under test, through its blocking API.

``sync_send`` is ``BlockingSender.send``, which waits for the broker's disposition and
raises on a rejected or released outcome; ``receive`` is ``BlockingReceiver.receive`` with
credit = prefetch, ``acknowledge`` is ``accept()``. The blocking API has no completion
listeners, no local transactions and no JMS sessions, so the JMS 7.3 and ack-mode tests are
not applicable. Confirmations are held by the AMQP confirmation proxy
(:mod:`ackspec.conformance.client.proxies.amqp`), so the blocking-send rule is observable.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from ackspec.adapters.cut import (
    ClientFeature,
    ClientUnderTest,
    CutError,
    NotApplicable,
    Received,
    installed_version,
)

PROTOCOL = "amqp"


def _address(destination: str) -> str:
    return destination  # the reference broker maps /queue/x and /topic/x the same over AMQP


class ProtonCUT(ClientUnderTest):
    name = "proton"
    protocol = PROTOCOL
    library = "python-qpid-proton"
    library_version = installed_version("python-qpid-proton")
    features = frozenset({ClientFeature.SYNC_SEND_CONFIRMED})

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._conn: Any = None
        self._senders: dict[str, Any] = {}
        self._receivers: dict[str, Any] = {}
        self._received: dict[str, Any] = {}

    def open(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        from proton.utils import BlockingConnection  # noqa: PLC0415

        if not url.startswith("amqp"):
            raise NotApplicable("the proton driver needs an amqp:// target")
        try:
            self._conn = BlockingConnection(url, timeout=10)
        except Exception as exc:
            raise CutError(type(exc).__name__, str(exc)) from exc

    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        if transacted:
            raise NotApplicable("proton's blocking API has no local transactions")
        return f"s{next(self._ids)}"

    def producer(self, session: str) -> str:
        return f"p{next(self._ids)}"

    def sync_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                  properties: Mapping[str, str] | None = None) -> str:
        from proton import Message  # noqa: PLC0415
        from proton.utils import SendException  # noqa: PLC0415

        key = f"{producer}:{destination}"
        if key not in self._senders:
            self._senders[key] = self._conn.create_sender(_address(destination))
        handle = f"m{next(self._ids)}"
        try:
            self._senders[key].send(Message(body=body, durable=persistent, properties=dict(properties or {})))
        except SendException as exc:
            raise CutError("SendRejectedError", str(exc)) from exc
        return handle

    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        if listener or selector:
            raise NotApplicable("proton blocking API: no listener/selector mapping")
        handle = f"c{next(self._ids)}"
        self._receivers[handle] = self._conn.create_receiver(_address(destination), credit=prefetch or 10)
        return handle

    def receive(self, consumer: str, timeout: float) -> Received | None:
        from proton import Timeout  # noqa: PLC0415

        receiver = self._receivers[consumer]
        try:
            message = receiver.receive(timeout=timeout)
        except Timeout:
            return None
        handle = f"r{next(self._ids)}"
        self._received[handle] = receiver
        body = message.body if isinstance(message.body, bytes) else str(message.body).encode()
        return Received(handle, body, message.delivery_count > 0, message.delivery_count + 1,
                        {str(k): str(v) for k, v in (message.properties or {}).items()})

    def acknowledge(self, message: str) -> None:
        self._received.pop(message).accept()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
