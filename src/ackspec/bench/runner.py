"""Runs every scenario against every target, a few repetitions each, and collects the medians."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from ackspec.bench.client import Endpoint
from ackspec.bench.report import BenchResult, Cell
from ackspec.bench.scenarios import SCENARIOS, Scenario
from ackspec.bench.targets import TargetSpec, running_target
from ackspec.errors import AckspecError

E = TypeVar("E")
"""An endpoint, STOMP or AMQP: whatever a scenario's ``run`` takes."""


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
    others; a target that cannot be reached at all marks all its cells as errors.

    Every target is up for the whole run and the targets take turns within each repetition of
    each scenario (rep 1 of A, B, C, then rep 2 of A, B, C, ...): on a shared, noisy machine the
    load then falls on all targets alike, so the ratios of one run stay meaningful."""
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    result = BenchResult([(s.name, s.title) for s in scenarios], [t.label for t in targets], repetitions, body_bytes)
    with contextlib.ExitStack() as stack:
        endpoints, failures = open_targets(stack, targets, progress)
        for label, error in failures.items():
            for scenario in scenarios:
                result.cells[(scenario.name, label)] = Cell(scenario.name, label, 0, error=error)
        for scenario in scenarios:
            n = max(1, int(messages * scenario.scale))
            cells = {label: Cell(scenario.name, label, n) for label in endpoints}
            for label, cell in cells.items():
                result.cells[(scenario.name, label)] = cell
            take_turns(cells, endpoints, scenario.run, body, repetitions, progress)
    return result


def open_targets(stack: contextlib.ExitStack, targets: Sequence[TargetSpec],
                 progress: Callable[[str], None]) -> tuple[dict[str, Endpoint], dict[str, str]]:
    """Brings every target up for the whole run (``stack`` stops what it started): the endpoints by
    label, and the one-line error of each target that could not be reached."""
    endpoints: dict[str, Endpoint] = {}
    failures: dict[str, str] = {}
    for target in targets:
        try:
            endpoints[target.label] = stack.enter_context(running_target(target))
        except AckspecError as exc:
            progress(f"bench: {target.label}: {exc}")
            failures[target.label] = str(exc)
    return endpoints, failures


def take_turns(cells: Mapping[str, Cell], endpoints: Mapping[str, E], run: Callable[[E, int, bytes], float],
               body: bytes, repetitions: int, progress: Callable[[str], None], *, name_width: int = 26) -> None:
    """Measure one scenario: in each repetition every target in turn runs it once, ``run(endpoint,
    cell.messages, body)`` giving msg/s into its cell.

    A failure is recorded as the error of that target's cell and ends its runs, not the others'."""
    for rep in range(repetitions):
        for label, endpoint in endpoints.items():
            cell = cells[label]
            if cell.error is not None:
                continue
            name = f"{cell.scenario:<{name_width}}"
            try:
                rate = run(endpoint, cell.messages, body)
            except (AckspecError, OSError) as exc:
                cell.error = str(exc)
                progress(f"bench: {label:<10} {name} run {rep + 1}: ERROR {exc}")
                continue
            cell.runs.append(rate)
            progress(f"bench: {label:<10} {name} run {rep + 1}/{repetitions}: "
                     f"{rate:,.0f} msg/s ({cell.messages} messages)")
