"""The broker's side of a publish window (Solace, seed 004), judged from the confirmations a burst got.

A publisher with a window of N sends a burst of persistent messages without waiting, then watches the
confirmations come back (STOMP RECEIPTs, which acknowledge every earlier frame; AMQP ``accepted``
dispositions). What the client saw is a :class:`Burst`: when each message was written and, in arrival
order, how many of the burst's first messages each confirmation left confirmed. Two rules are then
decided from that timeline alone, without a sleep:

* SOLACE-WINDOW-ACK-THIRD: once ``step`` = ceil(threshold x N) messages are outstanding since the last
  confirmation, the broker confirms without waiting for its timer. A confirmation the timer caused comes
  no earlier than ``timer`` after the first message it covers was written; so each ``step``-th message
  after a confirmation must be confirmed before ``timer`` has passed since the first of them was written.
* SOLACE-WINDOW-ACK-TIMEOUT: what stays below the threshold is still confirmed once the timer ran out:
  every message is confirmed within ``timer`` + :data:`TIMER_TOLERANCE_S` of being written.

The target states its threshold and timer as knobs (``publish-window-ack-threshold``,
``publish-window-ack-timeout-s``); without them the catalogue's defaults (a third, one second) hold.
STOMP and AMQP negotiate no publish window, so the suite announces its window in every send
(:data:`WINDOW_HEADER`, a STOMP header or an AMQP application property): a broker that sizes its
confirmation batches by the publisher's window reads it there; one that confirms every send promptly
(the reference broker) needs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ackspec.spec import load_catalogue
from ackspec.spec.domains import Interval

WINDOW_HEADER = "ackspec-publish-window"
"""Header (STOMP) or application property (AMQP) naming the publisher's window size on every windowed send."""

THRESHOLD_KNOB = "publish-window-ack-threshold"
TIMER_KNOB = "publish-window-ack-timeout-s"

TIMER_TOLERANCE_S = 0.5
"""Seconds a timer-driven confirmation may come after ``timer`` has passed and still be on time: a broker's
timer fires on its event loop's next turn (the reference broker's scheduler wakes within milliseconds), the
journal sync and the loopback round trip follow, and on this 2-core machine shared by several test runs a
turn of a busy process was seen to take a few hundred milliseconds. Later than that is a held confirmation,
not scheduling noise."""


class WindowKnobError(ValueError):
    """A target's publish-window knob outside the catalogue's domain: one readable line."""


@dataclass(frozen=True)
class WindowRules:
    """The confirmation schedule a target declares: the threshold fraction and the timer in seconds."""

    threshold: float
    timer: float

    def step(self, window: int) -> int:
        """Outstanding messages of a window of ``window`` that oblige a confirmation (at least one)."""
        return max(1, math.ceil(self.threshold * window - 1e-9))


def window_rules(knobs: Mapping[str, Any]) -> WindowRules:
    """The target's knobs, or the catalogue's defaults, each checked against the catalogue's domain."""
    catalogue = load_catalogue()
    values = []
    for knob, rid, name in ((THRESHOLD_KNOB, "SOLACE-WINDOW-ACK-THIRD", "ack_threshold"),
                            (TIMER_KNOB, "SOLACE-WINDOW-ACK-TIMEOUT", "ack_timeout")):
        parameter = catalogue.get(rid).parameters[name]
        raw = knobs.get(knob, parameter.default)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise WindowKnobError(f"knob {knob}: {raw!r} is not a number") from None
        if isinstance(parameter.values, Interval) and not _within(parameter.values, value):
            raise WindowKnobError(f"knob {knob}: {value:g} is outside {rid}'s domain of {name}")
        values.append(value)
    return WindowRules(threshold=values[0], timer=values[1])


def _within(domain: Interval, value: float) -> bool:
    low_ok = value > domain.low if domain.low_open else value >= domain.low
    if domain.high is None:
        return low_ok
    return low_ok and (value < domain.high if domain.high_open else value <= domain.high)


@dataclass(frozen=True)
class Confirmation:
    """A confirmation as the publisher saw it: when it arrived and how many of the burst it covers from the
    start (a STOMP receipt for message i covers 0..i; AMQP outcomes count up to the first unsettled one)."""

    at: float
    covered: int


@dataclass(frozen=True)
class Burst:
    """One burst of windowed sends: each message's write time, and the confirmations in arrival order."""

    sent: tuple[float, ...]
    confirmations: tuple[Confirmation, ...]

    @property
    def confirmed(self) -> int:
        """How many of the burst's first messages were confirmed in the end."""
        return max((c.covered for c in self.confirmations), default=0)

    def first_covering(self, count: int) -> Confirmation | None:
        """The first confirmation that covers the first ``count`` messages."""
        return next((c for c in self.confirmations if c.covered >= count), None)


def threshold_lapses(burst: Burst, step: int, timer: float) -> list[str]:
    """Where a burst waited for the timer though ``step`` messages were outstanding (SOLACE-WINDOW-ACK-THIRD)."""
    lapses: list[str] = []
    starts = sorted({0, *(c.covered for c in burst.confirmations)})
    for start in starts:
        need = start + step
        if need > len(burst.sent):
            continue
        deadline = burst.sent[start] + timer
        got = burst.first_covering(need)
        if got is None:
            lapses.append(f"messages {start + 1}..{need} ({step} outstanding) were never confirmed")
        elif got.at >= deadline:
            lapses.append(f"messages {start + 1}..{need} ({step} outstanding) were confirmed "
                          f"{got.at - burst.sent[start]:.3f} s after the first was written: only once the "
                          f"{timer:g} s timer could have run out")
    return lapses[:1]  # the first lapse explains the rest


def timer_lapses(burst: Burst, timer: float, tolerance: float = TIMER_TOLERANCE_S) -> list[str]:
    """Messages not confirmed within ``timer`` + ``tolerance`` of being written (SOLACE-WINDOW-ACK-TIMEOUT)."""
    for index, written in enumerate(burst.sent):
        got = burst.first_covering(index + 1)
        late = timer + tolerance
        if got is None:
            return [f"message {index + 1} of {len(burst.sent)} was never confirmed (timer {timer:g} s)"]
        if got.at - written > late:
            return [f"message {index + 1} of {len(burst.sent)} was confirmed {got.at - written:.3f} s after it "
                    f"was written: later than the {timer:g} s timer plus {tolerance:g} s"]
    return []


def covered_prefix(outcomes: Sequence[bool]) -> int:
    """How many messages from the start are confirmed, given which ones are (AMQP settles each on its own)."""
    count = 0
    for done in outcomes:
        if not done:
            break
        count += 1
    return count
