"""Serve the shim protocol (docs/shim-protocol.md) for one client under test.

Every request runs on its own thread, because verbs block (a synchronous send waits for a
confirmation the test is still holding) while the test keeps issuing others. Responses
carry the request ``id``; events (``{"event": ...}``) are written synchronously by the
thread that raises them, so an event always precedes the reply of a call that waited for
it. Writes to stdout are serialised by one lock so lines never interleave.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import IO, Any

from ackspec.adapters.cut import ClientUnderTest, CutError, CutEvent, NotApplicable, Received
from ackspec.adapters.shim import PROTOCOL, VERSION


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _body(args: dict[str, Any]) -> bytes:
    if "body_b64" in args:
        return base64.b64decode(args.pop("body_b64"))
    return str(args.pop("body", "")).encode()


class ShimServer:
    def __init__(self, cut: ClientUnderTest, out: IO[str]) -> None:
        self.cut = cut
        self.out = out
        self._lock = threading.Lock()

    def write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":"))
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    def _on_event(self, event: CutEvent) -> None:
        # Written synchronously from the thread that raised the event, before it goes on (e.g. before a
        # completion callback returns), so the test sees events and replies in the order they happened.
        self.write({"event": event.kind, "detail": _jsonable(dict(event.detail))})

    def handle(self, request: dict[str, Any]) -> None:
        rid = request.get("id")
        op = str(request.get("op", ""))
        args = dict(request.get("args") or {})
        try:
            result = self.dispatch(op, args)
        except NotApplicable as exc:
            self.write({"id": rid, "ok": False, "error": {"kind": "NotApplicable", "message": str(exc)}})
        except CutError as exc:
            self.write({"id": rid, "ok": False, "error": {"kind": exc.kind, "message": str(exc)}})
        except Exception as exc:
            self.write({"id": rid, "ok": False, "error": {"kind": type(exc).__name__, "message": str(exc)}})
        else:
            self.write({"id": rid, "ok": True, "result": _jsonable(result)})

    def dispatch(self, op: str, args: dict[str, Any]) -> Any:
        cut = self.cut
        if op in ("sync_send", "async_send"):
            body = _body(args)
            fn: Callable[..., Any] = getattr(cut, op)
            return fn(args.pop("producer"), args.pop("destination"), body, **args)
        if op == "receive":
            received: Received | None = cut.receive(args["consumer"], float(args.get("timeout", 5.0)))
            return None if received is None else asdict(received)
        if op in {"open", "session", "producer", "touch_message", "message_id", "set_publish_event_listener",
                  "set_send_ack_handler", "consumer", "acknowledge", "recover", "commit", "rollback",
                  "close_producer", "close_session", "close_consumer", "set_listener_action", "release_listeners",
                  "close", "crash"}:
            return getattr(cut, op)(**args)
        raise CutError("UnknownOperation", f"unknown op {op!r}")

    def serve(self, stdin: IO[str]) -> None:
        self.write({"hello": PROTOCOL, "version": VERSION, "name": self.cut.name,
                    "library": self.cut.library or self.cut.name, "library_version": self.cut.library_version,
                    "protocol": self.cut.protocol, "features": sorted(str(f) for f in self.cut.features)})
        self.cut.events.subscribe(self._on_event)
        for raw in stdin:
            line = raw.strip()
            if not line:
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError as exc:
                self.write({"id": None, "ok": False, "error": {"kind": "BadRequest", "message": exc.msg}})
                continue
            if request.get("op") == "shutdown":
                self.write({"id": request.get("id"), "ok": True, "result": None})
                break
            threading.Thread(target=self.handle, args=(request,), daemon=True).start()


def main(cut: ClientUnderTest) -> int:
    ShimServer(cut, sys.stdout).serve(sys.stdin)
    return 0
