"""An in-process reference broker with only the AMQP listener, on an ephemeral port, per test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from ackspec.reference.amqp.listener import AmqpListener
from ackspec.reference.broker import BrokerCore, CoreConfig, Effect, JournalAppend


class LoopGateway:
    """Routes core effects to the AMQP listener; journal appends are counted (no disk in unit tests)."""

    def __init__(self, config: CoreConfig | None = None, users: dict[str, str] | None = None,
                 allow_anonymous: bool = True) -> None:
        self.core = BrokerCore(config or CoreConfig())
        self.users = users or {}
        self._anonymous = allow_anonymous
        self.listener = AmqpListener(self)
        self.journal: list[object] = []

    @property
    def allow_anonymous(self) -> bool:
        return self._anonymous

    def authenticate(self, user: str, password: str) -> bool:
        return self.users.get(user) == password

    def execute(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, JournalAppend):
                self.journal.append(effect.record)
            else:
                self.listener.apply(effect.conn, effect)


class RunningBroker:
    def __init__(self, gateway: LoopGateway) -> None:
        self.gateway = gateway
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.host, self.port = asyncio.run_coroutine_threadsafe(gateway.listener.start("127.0.0.1", 0),
                                                                self.loop).result(5)

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def call(self, fn, *args):  # type: ignore[no-untyped-def]
        """Run ``fn`` on the broker's loop (the core is not thread-safe)."""
        async def run():  # type: ignore[no-untyped-def]
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(5)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.gateway.listener.stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def broker() -> Iterator[RunningBroker]:
    running = RunningBroker(LoopGateway(users={"alice": "secret"}))
    yield running
    running.stop()
