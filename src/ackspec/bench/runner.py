"""Runs every scenario against every target, a few repetitions each, and collects the medians."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ackspec.bench.report import BenchResult, Cell
from ackspec.bench.scenarios import SCENARIOS, Scenario
from ackspec.bench.targets import TargetSpec, running_target
from ackspec.errors import AckspecError


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_bench(
    targets: Sequence[TargetSpec],
    *,
    messages: int,
    repetitions: int = 3,
    body_bytes: int = 100,
    scenarios: Sequence[Scenario] = SCENARIOS,
    progress: Callable[[str], None] = _stderr,
) -> BenchResult:
    """Measures msg/s. A failing scenario is recorded as an error in its cell, not fatal to the
    others; a target that cannot be reached at all marks all its cells as errors."""
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    result = BenchResult([(s.name, s.title) for s in scenarios], [t.label for t in targets], repetitions, body_bytes)
    for target in targets:
        try:
            with running_target(target) as endpoint:
                for scenario in scenarios:
                    n = max(1, int(messages * scenario.scale))
                    cell = Cell(scenario.name, target.label, n)
                    result.cells[(scenario.name, target.label)] = cell
                    for rep in range(repetitions):
                        try:
                            rate = scenario.run(endpoint, n, body)
                        except (AckspecError, OSError) as exc:
                            cell.error = str(exc)
                            progress(f"bench: {target.label:<10} {scenario.name:<26} run {rep + 1}: ERROR {exc}")
                            break
                        cell.runs.append(rate)
                        progress(f"bench: {target.label:<10} {scenario.name:<26} run {rep + 1}/{repetitions}: "
                                 f"{rate:,.0f} msg/s ({n} messages)")
        except AckspecError as exc:
            progress(f"bench: {target.label}: {exc}")
            for scenario in scenarios:
                cell = result.cells.setdefault((scenario.name, target.label), Cell(scenario.name, target.label, 0))
                if not cell.runs and cell.error is None:
                    cell.error = str(exc)
    return result
