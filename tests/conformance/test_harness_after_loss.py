"""Redeliveries after a dead connection: a slow clean-up is waited for; a loss says what never came."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import pytest

from ackspec.adapters.settings import TargetSettings
from ackspec.conformance.harness import DRAIN_RETURN_GRACE, LOSS_CLEANUP_GRACE, SENTINEL_HEADER, Harness
from ackspec.conformance.verdicts import RequirementViolation
from ackspec.history import Recorder


class NoAdapter:
    """The harness only needs an adapter to open clients; these tests open none."""

    name = "none"
    protocol = "stomp"
    capabilities: frozenset[Any] = frozenset()


@dataclass
class Arrival:
    seq: int


class ScriptedClient:
    """Answers each receive from a script: a delivery, or None (nothing within that receive's timeout).

    Records the timeout of every receive, so a test sees how long the harness was willing to wait."""

    def __init__(self, *answers: Arrival | None) -> None:
        self.answers = deque(answers)
        self.timeouts: list[float | None] = []

    def receive(self, subscription: str, timeout: float | None = None) -> Arrival | None:
        self.timeouts.append(timeout)
        return self.answers.popleft() if self.answers else None


def make_harness() -> Harness:
    recorder = Recorder("run-1", target="reference")
    recorder.test = "t::after-loss"
    return Harness(NoAdapter(), recorder, run_tag="x", test_index=1, timeout=2.0,  # type: ignore[arg-type]
                   settings=TargetSettings(), requirements=["R-1"])


def test_what_comes_in_time_needs_no_grace() -> None:
    h, c = make_harness(), ScriptedClient(Arrival(1), Arrival(2))
    got = h.expect_n_after_loss(c, "s", 2)  # type: ignore[arg-type]
    assert [d.seq for d in got] == [1, 2] and c.timeouts == [None, None]


def test_a_late_redelivery_is_waited_for_with_the_grace() -> None:
    h, c = make_harness(), ScriptedClient(None, Arrival(1), Arrival(2))  # the clean-up took a while
    got = h.expect_n_after_loss(c, "s", 2)  # type: ignore[arg-type]
    assert [d.seq for d in got] == [1, 2]
    assert c.timeouts == [None] + [2.0 * LOSS_CLEANUP_GRACE] * 2


def test_a_loss_says_what_came_in_time_what_came_late_and_what_never_came() -> None:
    h, c = make_harness(), ScriptedClient(Arrival(2), None, Arrival(3), None)
    with pytest.raises(RequirementViolation, match=r"R-1") as caught:
        h.expect_n_after_loss(c, "s", 3, what="redeliveries after the crash")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "expected 3 redeliveries after the crash, got 2" in message
    assert "seqs [2] within the 2 s receive timeout, then [3] late; the rest never came" in message


SENTINEL = "sentinel"


@dataclass
class Message:
    seq: int | None
    headers: dict[str, str]
    ack_id: str | None = None


class DrainClient(ScriptedClient):
    """A fresh consumer for :meth:`Harness.drain`: the script's ``SENTINEL`` stands for the drain's own
    sentinel, so a test chooses where it lands among the messages a dead connection gives back."""

    def __init__(self, *answers: Arrival | str | None) -> None:
        super().__init__()
        self.script = deque(answers)
        self.token = ""

    def subscribe(self, destination: str, **options: Any) -> str:
        return "drain-sub"

    def send(self, destination: str, body: bytes, *, headers: dict[str, str], persistent: bool = False) -> None:
        self.token = headers[SENTINEL_HEADER]

    def receive(self, subscription: str, timeout: float | None = None) -> Message | None:  # type: ignore[override]
        self.timeouts.append(timeout)
        answer = self.script.popleft() if self.script else None
        if answer == SENTINEL:
            return Message(None, {SENTINEL_HEADER: self.token})
        return None if answer is None else Message(answer.seq, {})  # type: ignore[union-attr]

    def disconnect(self) -> None:
        pass


class OneClientAdapter(NoAdapter):
    def __init__(self, client: DrainClient) -> None:
        self.the_client = client

    def client(self, process: str, **options: Any) -> DrainClient:
        return self.the_client


def drained(client: DrainClient, returning: int) -> tuple[list[int | None], list[float | None]]:
    h = make_harness()
    h.adapter = OneClientAdapter(client)  # type: ignore[assignment]
    return [d.seq for d in h.drain("q", returning=returning)], client.timeouts


def test_a_drain_takes_what_comes_back_after_its_sentinel_within_the_grace() -> None:
    seqs, timeouts = drained(DrainClient(Arrival(0), SENTINEL, Arrival(1)), returning=2)
    assert seqs == [0, 1]  # seq 1 came back after the sentinel: late, not lost
    assert timeouts[-1] == 2.0 * DRAIN_RETURN_GRACE


def test_a_drain_that_got_what_it_expected_waits_no_longer() -> None:
    client = DrainClient(Arrival(0), Arrival(1), SENTINEL, Arrival(2))
    seqs, timeouts = drained(client, returning=2)
    assert seqs == [0, 1] and timeouts == [None, None, None]  # seq 2 (not expected back) is not waited for


def test_a_drain_gives_up_after_the_grace() -> None:
    seqs, timeouts = drained(DrainClient(SENTINEL, None), returning=1)
    assert seqs == [] and timeouts == [None, 2.0 * DRAIN_RETURN_GRACE]
