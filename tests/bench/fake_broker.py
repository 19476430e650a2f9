"""A tiny threaded STOMP broker for the bench's unit tests: just enough semantics (queues,
receipts, auto / client-individual subscriptions) for the scenarios to run. Loopback, port 0."""

from __future__ import annotations

import socket
import threading
from collections import defaultdict, deque

from ackspec.reference.stomp.codec import FrameParser
from ackspec.reference.stomp.frames import Frame


class FakeBroker:
    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.queues: dict[str, deque[bytes]] = defaultdict(deque)
        self.subscribers: dict[str, tuple[socket.socket, str]] = {}
        self.counter = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _deliver(self, conn: socket.socket, sub: str, dest: str, body: bytes) -> None:
        self.counter += 1
        head = f"MESSAGE\ndestination:{dest}\nsubscription:{sub}\nmessage-id:m{self.counter}\nack:a{self.counter}\n"
        conn.sendall(f"{head}content-length:{len(body)}\n\n".encode() + body + b"\x00")

    def _serve(self, conn: socket.socket) -> None:
        parser = FrameParser()
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for frame in parser.feed(data):
                    if isinstance(frame, Frame) and not self._handle(conn, frame):
                        return

    def _handle(self, conn: socket.socket, frame: Frame) -> bool:
        with self.lock:
            cmd, dest = frame.command, frame.get("destination", "")
            if cmd == "CONNECT":
                conn.sendall(b"CONNECTED\nversion:1.2\n\n\x00")
            elif cmd == "SEND":
                if dest in self.subscribers:
                    self._deliver(*self.subscribers[dest], dest, frame.body)
                else:
                    self.queues[dest].append(frame.body)
            elif cmd == "SUBSCRIBE":
                sub = frame.get("id", "")
                self.subscribers[dest] = (conn, sub)
                while self.queues[dest]:
                    self._deliver(conn, sub, dest, self.queues[dest].popleft())
            elif cmd == "UNSUBSCRIBE":
                for key, (c, sub) in list(self.subscribers.items()):
                    if c is conn and sub == frame.get("id"):
                        del self.subscribers[key]
            if (receipt := frame.get("receipt")) is not None:
                conn.sendall(f"RECEIPT\nreceipt-id:{receipt}\n\n\x00".encode())
            return cmd != "DISCONNECT"
