"""Confirmation gates for a client whose protocol no proxy speaks, held inside the client by its shim.

The Java shim holds the Artemis client's answers with the client's own interceptors
(adapters/java CoreGate: a blocking request is a send with ``requiresResponse``, a commit, a
rollback, an acknowledgement asking for a response; its response is held by parking the
connection's reader). This module gives the tests the same ``hold`` / ``wait_held`` / ``release``
API as the proxies, over the shim verbs ``gate_hold``, ``gate_release``, ``gate_seen`` and the
``gate-held`` events. An asynchronous answer (a response carrying its send's correlation id: with a
confirmation window, Artemis 2.40 asks one for each send that does not block) is kept from the client
one by one, so it can be released in any order or rejected; a blocking answer is held by parking the
connection's reader (everything behind it waits), so it cannot be rejected (not applicable).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ackspec.adapters.cut import NotApplicable


@dataclass(frozen=True, slots=True)
class HeldAnswer:
    receipt_id: str
    command: str
    destination: str | None


_UNANSWERED = ("these CompletionListener sends were written without a confirmation window (confirmationWindowSize "
               "-1): the client completes them unanswered, so the core gate has no answer to hold")


class ClientGate:
    """One ``hold(command, destination)`` over every gated client of the test."""

    def __init__(self, clients: Sequence[Any], command: str, destination: str | None) -> None:
        self.command, self.destination = command, destination
        self._gates = [(cut, cut.call("gate_hold", command=command, destination=destination)) for cut in clients]
        self._released: set[str] = set()

    def _held(self) -> list[tuple[Any, int, HeldAnswer]]:
        out = []
        for n, (cut, _gate) in enumerate(self._gates):
            for event in cut.events.of("gate-held"):
                if event["command"] != self.command:
                    continue
                if self.destination is not None and event.get("destination") != self.destination:
                    continue
                rid = f"{n}:{event['id']}"
                if rid not in self._released:
                    out.append((cut, int(event["id"]), HeldAnswer(rid, event["command"], event.get("destination"))))
        return out

    def pending(self) -> list[HeldAnswer]:
        return [held for _, _, held in self._held()]

    def wait_held(self, count: int, timeout: float) -> list[HeldAnswer]:
        """Wait until ``count`` answers are held; fewer on timeout, unless the requests were CompletionListener
        sends written without a confirmation window: no broker answer confirms them, so the rule cannot be
        decided here (not applicable), rather than failed."""
        deadline = time.monotonic() + timeout
        if len(self.pending()) < count and self._windowed():  # noted as they were written: never to be held
            raise NotApplicable(_UNANSWERED)
        while len(self.pending()) < count and time.monotonic() < deadline:
            self._gates[0][0].events.wait_count("gate-held", 10**9, 0.02) if self._gates else time.sleep(0.02)
        held = self.pending()
        if len(held) < count and self._windowed():
            raise NotApplicable(_UNANSWERED)
        return held

    def _windowed(self) -> int:
        return sum(int(cut.call("gate_seen", command=self.command, destination=self.destination, windowed=True))
                   for cut, _ in self._gates)

    def _take(self, receipt_id: str | None) -> tuple[Any, int, HeldAnswer]:
        held = [entry for entry in self._held() if receipt_id is None or entry[2].receipt_id == receipt_id]
        if not held:
            raise KeyError(f"no held answer {receipt_id}")
        self._released.add(held[0][2].receipt_id)
        return held[0]

    def release(self, receipt_id: str | None = None) -> HeldAnswer:
        """Hands one held answer (the oldest, or ``receipt_id``) to the client. Asynchronous answers are kept
        one by one, so any order works; a held blocking answer parks its connection, so only one is held."""
        cut, ident, answer = self._take(receipt_id)
        cut.call("gate_release", id=ident)
        return answer

    def reject(self, receipt_id: str | None = None, message: str = "") -> HeldAnswer:
        """Replaces a held asynchronous answer by an exception response; the shim refuses (not applicable)
        for a blocking answer held by parking the connection's reader."""
        cut, ident, answer = self._take(receipt_id)
        cut.call("gate_reject", id=ident, message=message or "rejected by the ackspec core gate")
        return answer

    def release_all(self) -> list[HeldAnswer]:
        return [self.release() for _ in self._held()]

    def close(self) -> None:
        for cut, gate in self._gates:
            cut.call("gate_release", gate=gate, close=True)


class ClientGateProxy:
    """The proxy API (the part tests use) over the gated clients a test opened."""

    def __init__(self, clients: list[Any]) -> None:
        self.clients = clients

    def _gated(self) -> list[Any]:
        """The test's clients that hold answers themselves and are still running (a closed one answers nothing)."""
        return [c for c in self.clients if c.has_gate and getattr(c, "running", True)]

    def hold(self, command: str = "SEND", destination: str | None = None) -> ClientGate:
        return ClientGate(self._gated(), command, destination)

    def seen(self, command: str = "SEND", destination: str | None = None) -> int:
        return sum(int(c.call("gate_seen", command=command, destination=destination)) for c in self._gated())

    def settle(self, timeout: float = 5.0) -> bool:
        return True  # the client's outgoing interceptor notes a request on the writing thread, before it returns

    def _only_client(self) -> Any:
        gated = self._gated()
        if len(gated) != 1:
            raise NotApplicable("the core gate keeps no frame order across clients")
        return gated[0]

    def first_seen(self, command: str, destination: str | None = None) -> int | None:
        """Where the client's first such request falls on the sequence its writes and the releases share."""
        found = self._only_client().call("gate_first_seen", command=command, destination=destination)
        return None if found is None else int(found)

    def released_after(self, receipt_id: str) -> int | None:
        """Where the release of this held answer falls on that sequence (``receipt_id`` as ``hold`` names it)."""
        at = self._only_client().call("gate_released_at", id=int(receipt_id.split(":")[1]))
        return None if at is None else int(at)

    def clear(self) -> None:
        for c in self._gated():
            c.call("gate_clear")
