"""Publish windows, the broker's side (Solace, seed 004): when confirmations come, and what they promise.

A publisher keeps up to a window of N persistent sends unconfirmed. The broker confirms once a third of the
window is outstanding or once its timer (one second) ran out, and a confirmation means the message is
persisted. Each test is a property over the catalogue's window sizes (``SOLACE-WINDOW-BOUND``'s
``window_size``, 1..255) and burst sizes up to the window; the threshold and the timer are the target's
knobs (:mod:`ackspec.conformance.window`). The bursts are written without waiting and the confirmations
read as they come (:mod:`ackspec.conformance.suite.publish_burst`): no sleep decides anything, every wait
ends at the timer plus a tolerance plus the run's receive timeout.

They run where the target declares ``publish-window`` (the catalogue's capabilities decide; the reference
broker confirms every send once its journal synced, which satisfies all three rules at any window size).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import Capability, NotSupported
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.publish_burst import publish_burst
from ackspec.conformance.window import TIMER_TOLERANCE_S, WindowRules, threshold_lapses, timer_lapses, window_rules

requirement = pytest.mark.requirement

MAX_BURSTS = 3
"""Bursts per example of the threshold property: the second and third start from a fully confirmed window,
so a broker that miscounts what its last confirmation covered shows there."""

SLOW_FSYNC_S = 0.4
"""How much slower each journal fsync is made, where the target can, before a power loss: long enough that a
broker confirming before its fsync is still waiting for it when the power goes."""


def _window_sizes() -> st.SearchStrategy[int]:
    return drawn("SOLACE-WINDOW-BOUND", "window_size")


def _wait(harness: Harness, rules: WindowRules) -> float:
    """How long a burst's confirmations are read for: the timer, its tolerance, then the receive timeout."""
    return rules.timer + TIMER_TOLERANCE_S + harness.timeout


@requirement("SOLACE-WINDOW-ACK-THIRD")
def test_confirmation_once_a_third_of_the_window_is_outstanding(harness: Harness) -> None:
    """Any window size and bursts of at least a third of it, one after another once the previous one is
    confirmed: every third outstanding since the last confirmation is confirmed before the timer could have
    run out."""
    rules = window_rules(harness.knobs)

    @hypothesis_settings()
    @hypothesis_seed()
    @given(window=_window_sizes(), data=st.data())
    @harness.example
    def third(window: int, data: st.DataObject) -> None:
        step = rules.step(window)
        sizes = data.draw(st.lists(st.integers(step, window), min_size=1, max_size=MAX_BURSTS), label="bursts")
        q = harness.queue()
        harness.expect_left(q, reason="windowed sends are only confirmed here, not consumed")
        start = 0
        for size in sizes:
            burst = publish_burst(harness, q, range(start, start + size), window=window, wait=_wait(harness, rules))
            lapses = threshold_lapses(burst, step, rules.timer)
            harness.check(not lapses, f"window {window} (a confirmation due every {step} outstanding), burst "
                          f"{start + 1}..{start + size}: {'; '.join(lapses)}")
            if burst.confirmed < size:
                return  # the rest is the timer's rule; the next burst would not start from a confirmed window
            start += size

    third()


@requirement("SOLACE-WINDOW-ACK-TIMEOUT")
def test_confirmation_within_the_timer(harness: Harness) -> None:
    """Any window size and any burst up to it: what stays below the threshold (a short burst, or the tail of
    a long one) is confirmed within the timer plus :data:`TIMER_TOLERANCE_S` of being written."""
    rules = window_rules(harness.knobs)

    @hypothesis_settings()
    @hypothesis_seed()
    @given(window=_window_sizes(), data=st.data())
    @harness.example
    def timer(window: int, data: st.DataObject) -> None:
        size = data.draw(st.integers(1, window), label="burst")
        q = harness.queue()
        harness.expect_left(q, reason="windowed sends are only confirmed here, not consumed")
        burst = publish_burst(harness, q, range(size), window=window, wait=_wait(harness, rules))
        lapses = timer_lapses(burst, rules.timer)
        harness.check(not lapses, f"window {window}, threshold {rules.step(window)}, burst of {size}: "
                      f"{'; '.join(lapses)}")

    timer()


@requirement("SOLACE-ACK-MEANS-PERSISTED")
def test_confirmed_windowed_sends_survive_a_restart(harness: Harness) -> None:
    """Any window size and burst: once confirmed, a windowed send survives an abrupt restart (a power loss
    with the disk made slow where the target can simulate one, otherwise the restart its operator's command
    does). What was not confirmed when the broker went down may or may not survive."""
    rules = window_rules(harness.knobs)

    @hypothesis_settings(examples=2)  # a restart per example: the rule needs one
    @hypothesis_seed()
    @given(window=_window_sizes(), data=st.data())
    @harness.example
    def survive(window: int, data: st.DataObject) -> None:
        size = data.draw(st.integers(1, window), label="burst")
        q = harness.queue()
        with _slow_disk(harness):
            burst = publish_burst(harness, q, range(size), window=window, wait=_wait(harness, rules))
            how = _abrupt_restart(harness)
        harness.expect_dropped(q, range(burst.confirmed, size), reason="not confirmed when the broker went down")
        found = set(seqs(harness.drain(q)))
        missing = sorted(set(range(burst.confirmed)) - found)
        harness.check(not missing, f"window {window}, burst of {size}, {burst.confirmed} confirmed: seqs {missing} "
                      f"were confirmed and lost in the {how}")

    survive()


@contextlib.contextmanager
def _slow_disk(harness: Harness) -> Iterator[None]:
    """Each journal fsync made slower for the block, where the target can (the embedded broker)."""
    with contextlib.ExitStack() as stack:
        if harness.has(Capability.FAULT_INJECTION) and getattr(harness.adapter, "slow_fsync", None) is not None:
            stack.enter_context(harness.slow_fsync(SLOW_FSYNC_S))
        yield


def _abrupt_restart(harness: Harness) -> str:
    """A power loss where the target can simulate one, else its clean restart; says which."""
    try:
        harness.restart_broker(crash=True)
        return "power loss"
    except NotSupported:
        harness.restart_broker()
        return "restart"
