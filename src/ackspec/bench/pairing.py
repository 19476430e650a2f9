"""The arithmetic of a paired benchmark: block order, per-pair ratios, a distribution-free interval
for their median, and the verdict it supports.

Why pairs. On a shared machine a target's rate drifts by 2x within minutes, so two medians taken a
few seconds apart compare two different machines. Running the two targets in short alternating
blocks and dividing within each pair cancels drift slower than a pair; alternating which target goes
first in each pair cancels the drift within one. The median of the pair ratios then gets an interval
from the order statistics alone (no assumption about the ratios' distribution): with ``n`` pairs the
interval ``[x_(k), x_(n-k+1)]`` covers the true median with probability ``1 - 2 P(B <= k - 1)``,
``B ~ Binomial(n, 1/2)``; ``k`` is the largest that keeps that at or above the confidence asked for.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

PARITY_SHOWN = "parity shown"
BEHIND = "behind"
NOT_RESOLVED = "not resolved"


def pair_order(pair: int) -> tuple[int, int]:
    """Which target runs first in pair number ``pair`` (0-based): the first target in even pairs, the
    second in odd ones, so that a steady drift favours neither."""
    return (0, 1) if pair % 2 == 0 else (1, 0)


def block_ratio(seconds_first: float, seconds_second: float) -> float:
    """Rate of the first target over the second's for one pair of equally long blocks: the inverse
    ratio of their times."""
    return seconds_second / seconds_first


@dataclass(frozen=True)
class MedianInterval:
    """The median of some ratios and the order statistics bracketing it at ``coverage`` or more."""

    median: float
    low: float
    high: float
    coverage: float
    """The exact probability that ``[low, high]`` holds the true median (at least the confidence asked)."""


def _binomial_half_cdf(n: int, k: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    total: int = sum(comb(n, i) for i in range(k + 1))
    return total / float(2**n)


def median_interval(values: Sequence[float], confidence: float = 0.95) -> MedianInterval | None:
    """The median of ``values`` and its distribution-free interval at ``confidence``; None when there
    are too few values for any interval to reach it (fewer than 6 at 95%)."""
    n = len(values)
    xs = sorted(values)
    k = 0
    while k + 1 <= n // 2 and 1 - 2 * _binomial_half_cdf(n, k) >= confidence:
        k += 1
    if k == 0:
        return None
    coverage = 1 - 2 * _binomial_half_cdf(n, k - 1)
    return MedianInterval(statistics.median(xs), xs[k - 1], xs[n - k], coverage)


def verdict(interval: MedianInterval | None) -> str:
    """``parity shown`` when the interval's low end is at least 1 (the first target at least as fast),
    ``behind`` when its high end is under 1, else ``not resolved`` (also with too few pairs)."""
    if interval is None:
        return NOT_RESOLVED
    if interval.low >= 1.0:
        return PARITY_SHOWN
    if interval.high < 1.0:
        return BEHIND
    return NOT_RESOLVED
