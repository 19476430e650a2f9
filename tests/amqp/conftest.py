"""An in-process reference broker with the AMQP listener on an ephemeral port, one per test.

The core, hub and listener run on an asyncio loop in a background thread; tests
drive it through real sockets with proton clients (the ackspec adapter or raw
proton engines). ``journal_sync`` lets a test hold back the simulated journal
sync to observe that durable confirmations wait for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.history import Recorder
from ackspec.reference.amqp.listener import AmqpListener
from ackspec.reference.broker import BrokerCore, CoreConfig
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.hub import Hub

T = TypeVar("T")


class RunningBroker:
    def __init__(self, config: CoreConfig | None = None, *, users: dict[str, str] | None = None,
                 allow_anonymous: bool = True, journaling: bool = False, receive_window: int = 1000) -> None:
        self.core = BrokerCore(config or CoreConfig())
        self.hub = Hub(self.core)
        self.hub.journaling = journaling
        self.listener = AmqpListener(self.hub, Authenticator(users or {}, allow_anonymous),
                                     receive_window=receive_window)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.host, self.port = asyncio.run_coroutine_threadsafe(self.listener.start("127.0.0.1", 0),
                                                                self.loop).result(5)

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the broker's loop (the core is not thread-safe)."""
        async def run() -> T:
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(5)

    def sync_journal(self) -> int:
        """What the I/O layer does after an fsync: mark every queued record durable."""
        def sync() -> int:
            _records, last = self.hub.take_journal()
            self.hub.mark_synced(last)
            return last
        return self.call(sync)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.listener.stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def broker() -> Iterator[RunningBroker]:
    running = RunningBroker(users={"alice": "secret"}, allow_anonymous=True)
    yield running
    running.stop()


@pytest.fixture
def adapter(broker: RunningBroker) -> Iterator[ProtonAdapter]:
    recorder = Recorder("amqp-unit", target=broker.url)
    yield ProtonAdapter(broker.url, recorder, timeout=3.0)
    recorder.close()
