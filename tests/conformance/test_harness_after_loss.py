"""Redeliveries after a dead connection: a slow clean-up is waited for; a loss says what never came."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import pytest

from ackspec.adapters.settings import TargetSettings
from ackspec.conformance.harness import LOSS_CLEANUP_GRACE, Harness
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
                   settings=TargetSettings())


def test_what_comes_in_time_needs_no_grace() -> None:
    h, c = make_harness(), ScriptedClient(Arrival(1), Arrival(2))
    got = h.expect_n_after_loss(c, "s", 2, "R-1")  # type: ignore[arg-type]
    assert [d.seq for d in got] == [1, 2] and c.timeouts == [None, None]


def test_a_late_redelivery_is_waited_for_with_the_grace() -> None:
    h, c = make_harness(), ScriptedClient(None, Arrival(1), Arrival(2))  # the clean-up took a while
    got = h.expect_n_after_loss(c, "s", 2, "R-1")  # type: ignore[arg-type]
    assert [d.seq for d in got] == [1, 2]
    assert c.timeouts == [None] + [2.0 * LOSS_CLEANUP_GRACE] * 2


def test_a_loss_says_what_came_in_time_what_came_late_and_what_never_came() -> None:
    h, c = make_harness(), ScriptedClient(Arrival(2), None, Arrival(3), None)
    with pytest.raises(RequirementViolation, match=r"R-1") as caught:
        h.expect_n_after_loss(c, "s", 3, "R-1", "redeliveries after the crash")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "expected 3 redeliveries after the crash, got 2" in message
    assert "seqs [2] within the 2 s receive timeout, then [3] late; the rest never came" in message
