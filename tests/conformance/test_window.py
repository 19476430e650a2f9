"""The publish-window timeline checks (ackspec.conformance.window): decided from the confirmations alone."""

from __future__ import annotations

import pytest

from ackspec.conformance.window import (
    Burst,
    Confirmation,
    WindowKnobError,
    WindowRules,
    covered_prefix,
    threshold_lapses,
    timer_lapses,
    window_rules,
)


def burst(n: int, *confirmations: tuple[float, int]) -> Burst:
    return Burst((0.0,) * n, tuple(Confirmation(at, covered) for at, covered in confirmations))


def test_step_is_a_third_rounded_up_and_at_least_one() -> None:
    rules = WindowRules(threshold=1 / 3, timer=1.0)
    assert [rules.step(w) for w in (1, 2, 3, 4, 12, 50, 255)] == [1, 1, 1, 2, 4, 17, 85]
    assert WindowRules(threshold=1.0, timer=1.0).step(7) == 7


def test_prompt_confirmations_meet_the_threshold() -> None:
    assert threshold_lapses(burst(8, (0.01, 4), (0.02, 8)), step=4, timer=1.0) == []
    assert threshold_lapses(burst(8, *((0.01 * i, i) for i in range(1, 9))), step=4, timer=1.0) == []


def test_a_third_held_until_the_timer_is_a_lapse() -> None:
    lapses = threshold_lapses(burst(8, (0.01, 4), (1.01, 8)), step=4, timer=1.0)
    assert len(lapses) == 1 and "messages 5..8" in lapses[0]


def test_the_count_restarts_after_each_confirmation() -> None:
    """An early confirmation of 5 leaves 3 outstanding of a step of 4: waiting for the timer is then allowed."""
    assert threshold_lapses(burst(8, (0.01, 5), (1.2, 8)), step=4, timer=1.0) == []
    assert threshold_lapses(burst(9, (0.01, 5), (1.2, 9)), step=4, timer=1.0) != []


def test_never_confirmed_third_is_a_lapse() -> None:
    assert "never confirmed" in threshold_lapses(burst(4), step=4, timer=1.0)[0]


def test_timer_tolerance_bounds_a_tail() -> None:
    assert timer_lapses(burst(3, (1.2, 3)), timer=1.0, tolerance=0.5) == []
    assert "later than" in timer_lapses(burst(3, (1.6, 3)), timer=1.0, tolerance=0.5)[0]
    assert "message 3 of 3 was never confirmed" in timer_lapses(burst(3, (0.1, 2)), timer=1.0)[0]


def test_covered_prefix_stops_at_the_first_gap() -> None:
    assert covered_prefix([True, True, False, True]) == 2
    assert covered_prefix([]) == 0


def test_knobs_default_to_the_catalogue_and_are_checked_against_its_domains() -> None:
    rules = window_rules({})
    assert abs(rules.threshold - 1 / 3) < 1e-9 and rules.timer == 1.0
    assert window_rules({"publish-window-ack-threshold": 0.5, "publish-window-ack-timeout-s": 2}).timer == 2.0
    with pytest.raises(WindowKnobError, match="outside"):
        window_rules({"publish-window-ack-threshold": 1.5})
    with pytest.raises(WindowKnobError, match="outside"):
        window_rules({"publish-window-ack-timeout-s": 0})
    with pytest.raises(WindowKnobError, match="not a number"):
        window_rules({"publish-window-ack-timeout-s": "soon"})
