"""Mutants built from outside the reference broker are caught, and only by the property-based tests.

The mutants of ``tests/quality/outside_mutants.py`` subclass the broker core with a bug that needs a
drawn value or an interleaving to show: the whole STOMP suite runs against each (as ``ackspec run``
does by default over STOMP: same seed and depth, no shrinking), and the tests that fail must be among the
properties or state machines named here, charging one of the requirements the bug breaks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from ackspec.conformance.config import NO_SHRINK_ENV

from .outside_mutants import OUTSIDE_MUTANTS

ROOT = Path(__file__).resolve().parents[2]

# mutant -> (the tests that catch it, all property-based; requirements of which they must fail at least one)
CAUGHT_BY: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "tx-loss-after-rollback": (frozenset({"test_transaction_model.py::test_transactions_state_machine"}),
                               frozenset({"JMS-6.2.7-COMMIT-ATOMIC", "JMS-6.2.10-SESSION-TRANSACTED"})),
    "prefetch-above-7": (frozenset({"test_delivery.py::test_prefetch_bounds_unacked_deliveries",
                                    "test_ack_backlog.py::test_client_ack_backlog_stays_within_its_limit"}),
                         frozenset({"STOMP-SUBSCRIBE-PREFETCH", "AMQ-PREFETCH-PUSH-BOUND",
                                    "JMS-6.2.10-CLIENT-ACK-BACKLOG-BOUND"})),
}


def _run(mutant: str, out: Path) -> list[dict[str, object]]:
    cmd = [sys.executable, "-m", "tests.quality.outside_mutants", mutant, "--no-report", "--out", str(out),
           "--target", "reference://embedded"]  # one target: a run without one covers both protocols and a client
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, cwd=ROOT,
                          env={**os.environ, NO_SHRINK_ENV: "1"})
    results = out / "results.json"
    assert results.exists(), f"no results ({proc.returncode}): {proc.stderr[-2000:]}"
    tests: list[dict[str, object]] = json.loads(results.read_text())["tests"]
    return tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[list[dict[str, object]]]]]:
    root = tmp_path_factory.mktemp("outside")
    with ThreadPoolExecutor(len(OUTSIDE_MUTANTS)) as pool:
        yield {m: pool.submit(_run, m, root / m) for m in OUTSIDE_MUTANTS}


def test_every_outside_mutant_has_its_catcher() -> None:
    assert set(CAUGHT_BY) == set(OUTSIDE_MUTANTS)


@pytest.mark.parametrize("mutant", sorted(CAUGHT_BY))
def test_only_the_property_test_catches_it(mutant: str, runs: dict[str, Future[list[dict[str, object]]]]) -> None:
    tests = runs[mutant].result()
    catchers, broken = CAUGHT_BY[mutant]
    failing = {str(t["test"]) for t in tests if t["verdict"] in ("fail", "error", "stale")}
    failed = {str(t["requirement"]) for t in tests if t["verdict"] == "fail"}
    assert failed & broken, f"{mutant} not caught as {sorted(broken)}; failures: {sorted(failed)}"
    assert {f.rsplit("/", 1)[-1] for f in failing} <= catchers, f"{mutant}: failing tests {sorted(failing)}"
