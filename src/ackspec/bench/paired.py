"""``ackspec bench --paired BLOCK``: two targets compared in short alternating blocks on connections
kept open, a ratio per pair, and a verdict from the median's distribution-free interval
(:mod:`ackspec.bench.pairing` says why and how)."""

from __future__ import annotations

import contextlib
import json
import platform
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ackspec.bench.client import Endpoint
from ackspec.bench.pairing import MedianInterval, block_ratio, median_interval, pair_order, verdict
from ackspec.bench.runner import open_targets
from ackspec.bench.scenarios import BlockSession, Scenario
from ackspec.bench.targets import TargetSpec
from ackspec.errors import AckspecError

WARM_UP_BLOCKS = 1
"""Blocks each target runs before the first counted pair (a JVM broker compiles its hot path then)."""


@dataclass
class PairedRow:
    """One scenario: the two targets' block times (seconds), pair by pair, and what they show."""

    scenario: str
    block: int
    seconds: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    error: str | None = None

    @property
    def ratios(self) -> list[float]:
        return [block_ratio(a, b) for a, b in zip(*self.seconds, strict=True)]

    @property
    def interval(self) -> MedianInterval | None:
        return median_interval(self.ratios)

    def median_rate(self, side: int) -> float | None:
        times = self.seconds[side]
        return self.block / statistics.median(times) if times else None


@dataclass
class PairedResult:
    targets: tuple[str, str]
    pairs: int
    block: int
    body_bytes: int
    rows: list[PairedRow] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        rows = []
        for row in self.rows:
            interval = row.interval
            rows.append({**asdict(row), "ratios": row.ratios, "verdict": verdict(interval),
                         "interval": asdict(interval) if interval else None,
                         "median_rates": [row.median_rate(0), row.median_rate(1)]})
        return {"format": "ackspec-bench-paired/1", "targets": list(self.targets), "pairs": self.pairs,
                "block": self.block, "body_bytes": self.body_bytes, "warm_up_blocks": WARM_UP_BLOCKS,
                "ratio_definition": f"{self.targets[0]} msg/s / {self.targets[1]} msg/s, per pair",
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "rows": rows}


def run_pair_blocks(sessions: Sequence[BlockSession], row: PairedRow, pairs: int,
                    progress: Callable[[str], None]) -> None:
    """Warm-up blocks, then ``pairs`` pairs of one block per target, the order alternating per pair."""
    for _ in range(WARM_UP_BLOCKS):
        for session in sessions:
            session.block(row.block)
    for pair in range(pairs):
        for side in pair_order(pair):
            row.seconds[side].append(sessions[side].block(row.block))
        first, second = (times[-1] for times in row.seconds)
        progress(f"bench: {row.scenario:<18} pair {pair + 1}/{pairs}: {row.block / first:,.0f} / "
                 f"{row.block / second:,.0f} msg/s, ratio {block_ratio(first, second):.3f}")


def _paired_row(name: str, open_session: Callable[[Endpoint, bytes], BlockSession], endpoints: Sequence[Endpoint],
                body: bytes, block: int, pairs: int, progress: Callable[[str], None]) -> PairedRow:
    """Both targets' connections open at once for the whole row; a failure becomes the row's error."""
    row = PairedRow(name, block)
    try:
        with contextlib.ExitStack() as stack:
            sessions = []
            for endpoint in endpoints:
                session = open_session(endpoint, body)
                stack.callback(session.close)
                sessions.append(session)
            run_pair_blocks(sessions, row, pairs, progress)
    except (AckspecError, OSError) as exc:
        row.error = str(exc)
        progress(f"bench: {name}: ERROR {exc}")
    return row


def run_paired(targets: Sequence[TargetSpec], scenarios: Sequence[Scenario], *, block: int, pairs: int,
               body_bytes: int, progress: Callable[[str], None]) -> PairedResult:
    """Each scenario in turn, its two targets in alternating blocks of ``block`` messages (times the
    scenario's scale, as with ``--messages``: a quarter for the persistent rows); the first target's
    rate over the second's per pair."""
    if len(targets) != 2:
        raise AckspecError(f"bench: --paired compares exactly two targets, got {len(targets)}")
    sessions = {s.name: s.session for s in scenarios if s.session is not None}
    scales = {s.name: s.scale for s in scenarios}
    unpairable = [s.name for s in scenarios if s.name not in sessions]
    if unpairable:
        raise AckspecError(f"bench: --paired cannot run {', '.join(unpairable)} (pairable: "
                           "send-receipt-each, persistent-1, persistent-8)")
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    result = PairedResult((targets[0].label, targets[1].label), pairs, block, body_bytes)
    with contextlib.ExitStack() as stack:
        endpoints, failures = open_targets(stack, targets, progress)
        if failures:
            raise AckspecError("bench: " + "; ".join(f"{label}: {error}" for label, error in failures.items()))
        for name, open_session in sessions.items():
            n = max(1, int(block * scales[name]))
            result.rows.append(_paired_row(name, open_session, list(endpoints.values()), body, n, pairs, progress))
    return result


def format_paired(result: PairedResult) -> str:
    """One line per scenario: median rates, median ratio, its interval and coverage, pairs, verdict."""
    first, second = result.targets
    lines = [f"paired: {first} vs {second}, {result.pairs} pairs of blocks (order alternating per pair, "
             f"{WARM_UP_BLOCKS} warm-up block each), {result.body_bytes}-byte bodies"]
    for row in result.rows:
        if row.error is not None:
            lines.append(f"{row.scenario}: error: {row.error}")
            continue
        interval = row.interval
        rates = (f"{row.median_rate(0) or 0:,.0f} / {row.median_rate(1) or 0:,.0f} msg/s "
                 f"(median of {row.block}-message blocks)")
        if interval is None:
            lines.append(f"{row.scenario}: {rates}; too few pairs for an interval: {verdict(None)}")
            continue
        lines.append(f"{row.scenario}: {rates}; ratio {first}/{second} median {interval.median:.3f}, "
                     f"{interval.coverage:.1%} interval [{interval.low:.3f}, {interval.high:.3f}], "
                     f"{len(row.ratios)} pairs: {verdict(interval)}")
    return "\n".join(lines)


def write_paired(result: PairedResult, out: Path) -> list[Path]:
    """bench-paired.json and bench-paired.txt in ``out``; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "bench-paired.json", out / "bench-paired.txt"]
    written[0].write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    written[1].write_text(format_paired(result) + "\n", encoding="utf-8")
    return written
