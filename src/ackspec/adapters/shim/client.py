"""A client under test in another process, spoken to over the JSON-lines shim protocol.

See docs/shim-protocol.md. ``--ackspec-client "shim:java -jar my-jms-shim.jar"`` runs the
client-side conformance tests through any program that implements it.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError, NotApplicable, Received

HELLO_TIMEOUT = 30.0
CALL_TIMEOUT = 60.0


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            return base64.b64decode(value["b64"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


class ShimCUT(ClientUnderTest):
    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__()
        self.argv = list(argv)
        self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      bufsize=1)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._hello: dict[str, Any] | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        with self._cond:
            if not self._cond.wait_for(lambda: self._hello is not None or self._closed, HELLO_TIMEOUT):
                raise CutError("ShimError", f"no hello from {' '.join(self.argv)}")
        if self._hello is None:
            raise CutError("ShimError", f"shim {' '.join(self.argv)} exited before its hello")
        self.name = f"shim:{self._hello.get('name', '?')}"
        self.protocol = str(self._hello.get("protocol") or "stomp")
        self.has_gate = bool(self._hello.get("gate"))  # holds broker answers itself (verbs gate_*; core_gate.py)
        self.library = str(self._hello.get("library") or self._hello.get("name") or "")
        self.library_version = str(self._hello.get("library_version") or "")
        self.features = frozenset(ClientFeature(f) for f in self._hello.get("features", [])
                                  if f in {x.value for x in ClientFeature})

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue  # shims may log to stdout by mistake; ignore non-JSON lines
            with self._cond:
                if "hello" in msg:
                    self._hello = msg
                elif "event" in msg:
                    self.events.append(str(msg["event"]), **_decode(msg.get("detail") or {}))
                elif "id" in msg:
                    self._replies[int(msg["id"])] = msg
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def call(self, op: str, **args: Any) -> Any:
        rid = next(self._ids)
        line = json.dumps({"id": rid, "op": op, "args": args}) + "\n"
        with self._lock:
            if self._proc.stdin is None or self._proc.poll() is not None:
                raise CutError("ShimError", "the shim process has exited")
            self._proc.stdin.write(line)
            self._proc.stdin.flush()
        with self._cond:
            if not self._cond.wait_for(lambda: rid in self._replies or self._closed, CALL_TIMEOUT):
                raise CutError("ShimError", f"no reply to {op}")
            reply = self._replies.pop(rid, None)
        if reply is None:
            raise CutError("ShimError", f"the shim exited during {op}")
        if not reply.get("ok"):
            error = reply.get("error") or {}
            if error.get("kind") in ("NotApplicable", "UnknownOperation"):  # an older shim lacks the verb
                raise NotApplicable(str(error.get("message")))
            raise CutError(str(error.get("kind", "Error")), str(error.get("message", "")))
        return _decode(reply.get("result"))

    # -- verbs ------------------------------------------------------------------------------
    def open(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        self.call("open", url=url, options=dict(options or {}))

    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        return str(self.call("session", transacted=transacted, ack_mode=ack_mode))

    def producer(self, session: str) -> str:
        return str(self.call("producer", session=session))

    def context(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        return str(self.call("context", transacted=transacted, ack_mode=ack_mode))

    def close_context(self, context: str) -> None:
        self.call("close_context", context=context)

    def sync_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                  properties: Mapping[str, str] | None = None) -> str:
        return str(self.call("sync_send", producer=producer, destination=destination,
                             body_b64=base64.b64encode(body).decode(), persistent=persistent,
                             properties=dict(properties or {})))

    def async_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                   properties: Mapping[str, str] | None = None, on_callback: str | None = None) -> str:
        return str(self.call("async_send", producer=producer, destination=destination,
                             body_b64=base64.b64encode(body).decode(), persistent=persistent,
                             properties=dict(properties or {}), on_callback=on_callback))

    def touch_message(self, send: str) -> str:
        return str(self.call("touch_message", send=send))

    def message_id(self, send: str) -> str | None:
        result = self.call("message_id", send=send)
        return None if result is None else str(result)

    def set_publish_event_listener(self) -> None:
        self.call("set_publish_event_listener")

    def set_send_ack_handler(self) -> None:
        self.call("set_send_ack_handler")

    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        return str(self.call("consumer", session=session, destination=destination, prefetch=prefetch,
                             listener=listener, selector=selector, fail_first=fail_first))

    def receive(self, consumer: str, timeout: float) -> Received | None:
        result = self.call("receive", consumer=consumer, timeout=timeout)
        if result is None:
            return None
        return Received(str(result["handle"]), bytes(result["body"]), bool(result["redelivered"]),
                        result.get("delivery_count"), dict(result.get("properties") or {}))

    def acknowledge(self, message: str) -> None:
        self.call("acknowledge", message=message)

    def recover(self, session: str) -> None:
        self.call("recover", session=session)

    def commit(self, session: str) -> None:
        self.call("commit", session=session)

    def rollback(self, session: str) -> None:
        self.call("rollback", session=session)

    def close_producer(self, producer: str) -> None:
        self.call("close_producer", producer=producer)

    def close_session(self, session: str) -> None:
        self.call("close_session", session=session)

    def close_consumer(self, consumer: str) -> None:
        self.call("close_consumer", consumer=consumer)

    def set_listener_action(self, action: str | None) -> None:
        self.call("set_listener_action", action=action)

    def release_listeners(self) -> None:
        self.call("release_listeners")

    def crash(self) -> None:
        self.call("crash")

    @property
    def running(self) -> bool:
        """The shim process is still there (a closed client's is not): gates skip closed clients."""
        return self._proc.poll() is None

    def close(self) -> None:
        try:
            if self._proc.poll() is None:
                self.call("close")
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._proc.poll() is None:
            try:
                with self._lock:
                    assert self._proc.stdin is not None
                    self._proc.stdin.write(json.dumps({"id": 0, "op": "shutdown"}) + "\n")
                    self._proc.stdin.flush()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(timeout=5)
