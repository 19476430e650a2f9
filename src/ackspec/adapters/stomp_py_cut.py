"""stomp.py (the STOMP client library) as a client under test.

stomp.py has no JMS layer: no sessions, no completion listeners, no send flags. The
driver maps the verbs onto its own API and adds nothing that would hide its behaviour:

* ``sync_send`` outside a transaction sends with a ``receipt`` header and waits for
  stomp.py to hand that receipt to its listener (stomp.py's documented way to confirm a
  send); inside a transaction it is stomp.py's plain ``send`` with ``transaction``;
* ``commit``/``rollback`` are stomp.py's ``commit``/``abort`` exactly (they ask for no
  receipt, so they do not wait for the broker), followed by ``begin`` of the next one;
* sessions are bookkeeping; ``ack_mode`` 1/2/4 map to STOMP ``auto``/``client``/
  ``client-individual`` subscriptions; ``acknowledge`` is stomp.py's ``ack``;
* ``close`` is stomp.py's ``disconnect`` (which waits for its DISCONNECT receipt).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Mapping
from typing import Any

import stomp

from ackspec.adapters.cut import (
    ClientFeature,
    ClientUnderTest,
    CutError,
    NotApplicable,
    Received,
    installed_version,
)
from ackspec.adapters.settings import TargetSettings
from ackspec.adapters.stomp_py import stomp_connection

STOMP_ACK = {1: "auto", 2: "client", 4: "client-individual"}


class _Listener(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self, cut: StompPyCUT) -> None:
        self.cut = cut

    def on_message(self, frame: Any) -> None:
        sub = frame.headers.get("subscription", "")
        box = self.cut._inboxes.get(sub)
        if box is not None:
            box.put(frame)

    def on_receipt(self, frame: Any) -> None:
        with self.cut._cond:
            self.cut._receipts.add(frame.headers.get("receipt-id", ""))
            self.cut._cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cut._cond:
            self.cut._error = frame.headers.get("message", "ERROR")
            self.cut._cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cut._cond:
            self.cut._lost = True
            self.cut._cond.notify_all()


class StompPyCUT(ClientUnderTest):
    name = "stomp.py"
    library = "stomp.py"
    library_version = installed_version("stomp.py")
    features = frozenset({ClientFeature.SYNC_SEND_CONFIRMED, ClientFeature.TRANSACTIONS, ClientFeature.HEARTBEAT})
    timeout = 30.0

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._receipts: set[str] = set()
        self._error: str | None = None
        self._lost = False
        self._conn: Any = None
        self._sessions: dict[str, dict[str, Any]] = {}
        self._producers: dict[str, str] = {}
        self._inboxes: dict[str, queue.Queue[Any]] = {}
        self._sub_session: dict[str, str] = {}
        self._received: dict[str, tuple[str, str, str]] = {}  # handle -> (ack id, subscription, session)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def open(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        settings = TargetSettings.from_url(url)
        cx, cy = (int(x) for x in str((options or {}).get("heart_beat", "0,0")).split(","))
        self._conn = stomp_connection(settings, (cx, cy), self.timeout)
        self._conn.set_listener("ackspec", _Listener(self))
        try:
            self._conn.connect(settings.login, settings.passcode, wait=True)
        except Exception as exc:
            raise CutError(type(exc).__name__, str(exc)) from exc

    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        handle = self._id("s")
        tx = self._conn.begin() if transacted else None
        self._sessions[handle] = {"tx": tx, "ack": STOMP_ACK.get(ack_mode, "auto"), "closed": False}
        return handle

    def producer(self, session: str) -> str:
        handle = self._id("p")
        self._producers[handle] = session
        return handle

    def _wait_receipt(self, receipt: str) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: receipt in self._receipts or self._error is not None or self._lost,
                                     self.timeout)
            if receipt in self._receipts:
                return
        raise CutError("ConnectionLost" if ok else "Timeout", self._error or "no receipt")

    def sync_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                  properties: Mapping[str, str] | None = None) -> str:
        session = self._sessions[self._producers[producer]]
        if session["closed"]:
            raise CutError("IllegalStateError", "session closed")
        handle = self._id("m")
        headers = dict(properties or {})
        headers["persistent"] = "true" if persistent else "false"
        if session["tx"] is not None:
            self._conn.send(destination, body, headers=headers, transaction=session["tx"])
            return handle
        headers["receipt"] = handle
        self._conn.send(destination, body, headers=headers)
        self._wait_receipt(handle)
        return handle

    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        if listener or selector:
            raise NotApplicable("stomp.py driver: no MessageListener/selector mapping")
        handle = self._id("c")
        self._inboxes[handle] = queue.Queue()
        self._sub_session[handle] = session
        headers = {"activemq.prefetchSize": str(prefetch)} if prefetch else {}
        self._conn.subscribe(destination, handle, ack=self._sessions[session]["ack"], headers=headers)
        return handle

    def receive(self, consumer: str, timeout: float) -> Received | None:
        try:
            frame = self._inboxes[consumer].get(timeout=timeout)
        except queue.Empty:
            return None
        handle = self._id("r")
        h = frame.headers
        self._received[handle] = (h.get("ack", ""), consumer, self._sub_session[consumer])
        count = h.get("delivery-count")
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
        return Received(handle, body, h.get("redelivered") == "true", int(count) if count else None, dict(h))

    def acknowledge(self, message: str) -> None:
        ack_id, _sub, session = self._received[message]
        s = self._sessions[session]
        if s["closed"]:
            raise CutError("IllegalStateError", "session closed")
        if s["ack"] != "auto":
            self._conn.ack(ack_id, transaction=s["tx"])

    def commit(self, session: str) -> None:
        s = self._sessions[session]
        self._conn.commit(s["tx"])
        s["tx"] = self._conn.begin()

    def rollback(self, session: str) -> None:
        s = self._sessions[session]
        self._conn.abort(s["tx"])
        s["tx"] = self._conn.begin()

    def close_session(self, session: str) -> None:
        s = self._sessions[session]
        if s["closed"]:
            return
        for consumer, owner in self._sub_session.items():
            if owner == session:
                self._conn.unsubscribe(consumer)
        s["closed"] = True

    def crash(self) -> None:
        self._conn.transport.disconnect_socket()

    def close(self) -> None:
        if self._conn is not None and self._conn.is_connected():
            self._conn.disconnect()
