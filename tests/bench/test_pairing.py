"""The paired benchmark's arithmetic on given numbers (no timing), and one tiny paired run against two
fake brokers that checks the report's shape, not its figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ackspec.bench.pairing import (
    BEHIND,
    NOT_RESOLVED,
    PARITY_SHOWN,
    block_ratio,
    median_interval,
    pair_order,
    verdict,
)
from ackspec.cli import main

from .fake_broker import FakeBroker


def test_order_alternates_so_each_target_goes_first_in_half_the_pairs() -> None:
    orders = [pair_order(k) for k in range(6)]
    assert orders == [(0, 1), (1, 0)] * 3


def test_block_ratio_is_the_first_targets_rate_over_the_seconds() -> None:
    # 500 messages in 0.5 s (1,000 msg/s) against 500 in 1.0 s (500 msg/s)
    assert block_ratio(0.5, 1.0) == pytest.approx(2.0)
    assert block_ratio(2.0, 1.0) == pytest.approx(0.5)


def test_six_pairs_give_the_extremes_at_96_9_percent() -> None:
    interval = median_interval([1.3, 0.9, 1.1, 1.0, 1.2, 0.95])
    assert interval is not None
    assert (interval.low, interval.high) == (0.9, 1.3)
    assert interval.median == pytest.approx(1.05)
    assert interval.coverage == pytest.approx(1 - 2 / 64)


def test_five_pairs_are_too_few_for_95_percent() -> None:
    assert median_interval([1.0, 1.1, 1.2, 1.3, 1.4]) is None
    assert verdict(None) == NOT_RESOLVED


def test_twenty_pairs_use_the_6th_and_15th_order_statistics() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # 20 .. 1, unsorted on purpose
    interval = median_interval(values)
    assert interval is not None
    assert (interval.low, interval.high) == (6.0, 15.0)
    assert interval.median == 10.5
    assert interval.coverage == pytest.approx(1 - 2 * 21700 / 2**20)
    assert interval.coverage >= 0.95


def test_a_lower_confidence_narrows_the_interval() -> None:
    values = [float(v) for v in range(1, 21)]
    wide, narrow = median_interval(values, 0.95), median_interval(values, 0.5)
    assert wide is not None and narrow is not None
    assert wide.low < narrow.low <= narrow.high < wide.high


@pytest.mark.parametrize(("ratios", "expected"), [
    ([1.0, 1.02, 1.05, 1.1, 1.2, 1.3], PARITY_SHOWN),   # low end exactly 1.0 counts as parity
    ([0.8, 0.85, 0.9, 0.92, 0.95, 0.99], BEHIND),
    ([0.8, 0.85, 0.9, 1.0, 1.1, 1.2], NOT_RESOLVED),
    ([0.99, 1.1, 1.2, 1.3, 1.4, 1.5], NOT_RESOLVED),      # one pair below 1 is enough to leave it open
])
def test_verdict_follows_the_interval(ratios: list[float], expected: str) -> None:
    assert verdict(median_interval(ratios)) == expected


@pytest.fixture
def brokers() -> Iterator[tuple[FakeBroker, FakeBroker]]:
    pair = (FakeBroker(), FakeBroker())
    yield pair
    for broker in pair:
        broker.close()


def test_tiny_paired_run_reports_each_pairable_scenario(brokers: tuple[FakeBroker, FakeBroker], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = brokers
    targets = f"a=stomp://127.0.0.1:{a.port},b=stomp://127.0.0.1:{b.port}"
    code = main(["bench", "--targets", targets, "--paired", "8", "--pairs", "6", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads((tmp_path / "bench-paired.json").read_text())
    assert data["targets"] == ["a", "b"] and data["block"] == 8
    assert [row["block"] for row in data["rows"]] == [8, 2, 2]
    assert [row["scenario"] for row in data["rows"]] == ["send-receipt-each", "persistent-1", "persistent-8"]
    for row in data["rows"]:
        assert row["error"] is None and len(row["ratios"]) == 6
        assert row["verdict"] in {PARITY_SHOWN, BEHIND, NOT_RESOLVED}
        assert row["interval"]["low"] == min(row["ratios"]) and row["interval"]["high"] == max(row["ratios"])
        assert f"{row['scenario']}: " in out


def test_paired_mode_refuses_three_targets_and_unpairable_scenarios(brokers: tuple[FakeBroker, FakeBroker],
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    a, b = brokers
    two = f"a=stomp://127.0.0.1:{a.port},b=stomp://127.0.0.1:{b.port}"
    assert main(["bench", "--targets", two + ",reference", "--paired", "8", "--out", str(tmp_path)]) != 0
    assert "exactly two targets" in capsys.readouterr().err
    assert main(["bench", "--targets", two, "--paired", "8", "--scenarios", "consume-auto",
                 "--out", str(tmp_path)]) != 0
    assert "cannot run consume-auto" in capsys.readouterr().err
