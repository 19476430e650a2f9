"""One callback thread per session: serial callbacks, never on the sending thread.

Jakarta Messaging 7.3.8 asks for at most one CompletionListener callback at a time per
session and never on the thread that called ``send``; 6.2.13 asks for serial delivery to
a session's MessageListeners. A FIFO queue drained by one dedicated thread gives both, and
keeps the per-producer order the send tracker released callbacks in.

While a callback runs, a thread-local records which connection, session and producer it
belongs to, so ``close``/``commit``/``rollback`` called from inside it can raise
``IllegalStateError`` (7.3.4) instead of deadlocking (the ActiveMQ design, seed 001).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

_context = threading.local()


def current_scopes() -> frozenset[int]:
    """ids of the connection/session/producer whose callback is running on this thread."""
    scopes: frozenset[int] = getattr(_context, "scopes", frozenset())
    return scopes


def in_callback_of(obj: object) -> bool:
    return id(obj) in current_scopes()


LISTENER_SCOPE = -1
"""Marker scope of MessageListener tasks (as opposed to CompletionListener callbacks)."""


def in_message_listener() -> bool:
    return LISTENER_SCOPE in current_scopes()


@contextlib.contextmanager
def outside_callbacks() -> Iterator[None]:
    """Run deferred work (a close a listener asked for) without the callback's scopes."""
    saved = current_scopes()
    _context.scopes = frozenset()
    try:
        yield
    finally:
        _context.scopes = saved


def is_callback_thread() -> bool:
    return bool(getattr(_context, "executor", False))


Task = tuple[Callable[[], None], frozenset[int]]


class SessionExecutor:
    """A FIFO of callbacks run on one daemon thread."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._idle = threading.Condition()
        self._pending = 0
        self.running_now = 0  # number of callbacks running (0 or 1): 7.3.8 checks
        self.max_concurrent = 0

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, fn: Callable[[], None], scopes: frozenset[int]) -> None:
        with self._idle:
            self._pending += 1
        self._queue.put((fn, scopes))

    def wait_idle(self, timeout: float | None = None) -> bool:
        if threading.current_thread() is self._thread:
            return True
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def shutdown(self) -> None:
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        _context.executor = True
        while True:
            task = self._queue.get()
            if task is None:
                return
            fn, scopes = task
            _context.scopes = scopes
            self.running_now += 1
            self.max_concurrent = max(self.max_concurrent, self.running_now)
            try:
                fn()
            except Exception:  # a callback's own bug must not kill the session thread
                log.exception("callback raised")
            finally:
                self.running_now -= 1
                _context.scopes = frozenset()
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()
