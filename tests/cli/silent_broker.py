"""A broker that never answers: it accepts TCP connections, reads what it is sent, and says nothing.

The worst case for a suite's waits (issue 16): a connect succeeds, so nothing fails fast,
and every reply (CONNECTED, a receipt, an AMQP open) has to be waited out. A test fixture,
not part of the reference broker.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator


class SilentBroker:
    """Listens on 127.0.0.1 (an ephemeral port); :meth:`stop` closes everything it accepted."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="silent-broker", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    with contextlib.suppress(BlockingIOError):
                        conn, _ = self._listener.accept()
                        conn.setblocking(False)
                        self._selector.register(conn, selectors.EVENT_READ)
                        self.accepted += 1
                    continue
                try:
                    data = sock.recv(65536)  # read and drop: the peer's writes never block
                except OSError:
                    data = b""
                if not data:
                    self._selector.unregister(sock)
                    sock.close()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        for key in list(self._selector.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()


@contextlib.contextmanager
def silent_broker() -> Iterator[SilentBroker]:
    broker = SilentBroker()
    try:
        yield broker
    finally:
        broker.stop()
