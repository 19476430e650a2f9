"""Suite quality: every mutant of the reference broker is caught, and the clean broker passes.

Each mutant (``ackspec.reference.faults.MUTANTS``) makes the embedded reference
broker wrong in one way. The suite, run against it (``ackspec run --fault``),
must report a *fail* verdict for at least one requirement that the bug breaks;
against the clean broker it must report no failure at all. This is the suite's
own acceptance test: a suite that misses a mutant has a blind spot.

Each run is a subprocess restricted to the families that can see the bug, with a
short receipt/message timeout, so a missing message costs one second, not five.
The runs are started together on a small pool when the module starts (most of
their time is spent waiting on sockets and timeouts, not on the CPU) and each
parametrized test waits for its own.
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
from ackspec.reference.faults import MUTANTS

# mutant -> (suite modules to run, requirements of which at least one must fail)
EXPECTED: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "lose-message": (("test_ack", "test_delivery"), frozenset({
        "STOMP-ACK-AUTO", "STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-4.1.2-QUEUE-ONE-CONSUMER",
        "JMS-6.2.9.1-PER-PRODUCER-ORDER", "JMS-4.2-TOPIC-EVERY-SUBSCRIBER"})),
    "duplicate-no-flag": (("test_delivery",), frozenset({
        "JMS-4.1.2-QUEUE-ONE-CONSUMER", "JMS-6.2.12-NO-DUPLICATE-PRODUCTION"})),
    "reorder": (("test_delivery", "test_properties"), frozenset({"JMS-6.2.9.1-PER-PRODUCER-ORDER"})),
    "ignore-ack": (("test_ack",), frozenset({"JMS-6.2.11-NO-DUPLICATE-AFTER-ACK"})),
    "client-as-individual": (("test_ack",), frozenset({"STOMP-ACK-CLIENT-CUMULATIVE"})),
    "leak-tx-sends": (("test_transactions",), frozenset({
        "STOMP-TX-SEND-INVISIBLE", "STOMP-TX-ABORT-DISCARDS-SENDS"})),
    "early-receipt": (("test_receipts",), frozenset({"STOMP-RECEIPT-PERSISTENT-DURABLE"})),
    "no-receipt": (("test_receipts",), frozenset({"STOMP-RECEIPT-AFTER-PROCESSING"})),
    "mangle-header": (("test_frames",), frozenset({"STOMP-SEND-HEADERS-PASSED", "STOMP-HEADER-ESCAPING"})),
    "mangle-body": (("test_frames",), frozenset({"STOMP-SEND-BODY-INTACT"})),
    "error-no-close": (("test_frames",), frozenset({"STOMP-ERROR-CLOSES"})),
    "ignore-prefetch": (("test_delivery",), frozenset({"STOMP-SUBSCRIBE-PREFETCH"})),
    # the wider net
    "nack-ignored": (("test_nack",), frozenset({"AMQ-REDELIVERY-MAX", "AMQ-REDELIVERY-POISON-TO-DLQ"})),
    "nack-acks": (("test_nack",), frozenset({"AMQ-REDELIVERY-MAX", "AMQ-REDELIVERY-POISON-TO-DLQ"})),
    "abort-keeps-acks": (("test_transactions",), frozenset({"STOMP-TX-ABORT-ACKS-UNDONE"})),
    "abort-keeps-sends": (("test_transactions",), frozenset({"STOMP-TX-ABORT-DISCARDS-SENDS"})),
    "commit-drops-one": (("test_transactions",), frozenset({"STOMP-TX-COMMIT-ATOMIC"})),
    "no-redelivered-flag": (("test_nack",), frozenset({"STOMP-REDELIVERED-HEADER"})),
    "stuck-delivery-count": (("test_nack",), frozenset({
        "JMS-3.5.11-DELIVERY-COUNT-INCREMENTS", "STOMP-DELIVERY-COUNT-HEADER"})),
    "no-dead-letter": (("test_nack",), frozenset({"AMQ-REDELIVERY-MAX", "AMQ-REDELIVERY-POISON-TO-DLQ"})),
    "early-dead-letter": (("test_nack",), frozenset({"AMQ-REDELIVERY-MAX"})),
    "prefetch-off-by-one": (("test_delivery",), frozenset({"STOMP-SUBSCRIBE-PREFETCH"})),
    "topic-one-subscriber": (("test_delivery",), frozenset({"JMS-4.2-TOPIC-EVERY-SUBSCRIBER"})),
    "queue-to-two": (("test_delivery",), frozenset({
        "JMS-4.1.2-QUEUE-ONE-CONSUMER", "JMS-6.2.12-NO-DUPLICATE-PRODUCTION"})),
    "reorder-receipts": (("test_receipts",), frozenset({"STOMP-RECEIPT-ORDER", "STOMP-DISCONNECT-RECEIPT-LAST"})),
    "wrong-receipt-id": (("test_receipts",), frozenset({"STOMP-RECEIPT-AFTER-PROCESSING"})),
    "error-no-message": (("test_frames",), frozenset({"STOMP-ERROR-MESSAGE-HEADER"})),
    "error-no-receipt-id": (("test_frames",), frozenset({"STOMP-ERROR-RECEIPT-ID"})),
    "message-no-subscription": (("test_delivery",), frozenset({"STOMP-MESSAGE-REQUIRED-HEADERS"})),
    "message-no-destination": (("test_delivery",), frozenset({"STOMP-MESSAGE-REQUIRED-HEADERS"})),
    "truncate-body-at-nul": (("test_frames",), frozenset({"STOMP-SEND-BODY-INTACT"})),
    "double-escape-headers": (("test_frames",), frozenset({"STOMP-HEADER-ESCAPING"})),
}

CLEAN_MODULES = ("test_ack", "test_nack", "test_transactions", "test_receipts", "test_delivery", "test_frames",
                 "test_properties")
WORKERS = int(os.environ.get("ACKSPEC_QUALITY_WORKERS", "3"))
"""Concurrent suite runs (each mostly waits on sockets and receive timeouts)."""


def run_suite(out: Path, modules: tuple[str, ...], fault: str | None) -> dict[str, set[str]]:
    cmd = [sys.executable, "-m", "ackspec", "run", "--no-report", "--timeout", "1", "--examples", "4",
           "--out", str(out)]
    for module in modules:
        cmd += ["--only", f"{module}.py::*"]
    if fault:
        cmd += ["--fault", fault]
    env = {**os.environ, NO_SHRINK_ENV: "1"}  # the verdict is all we need: no shrinking
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)
    results = out / "results.json"
    assert results.exists(), f"no results ({proc.returncode}): {proc.stderr[-2000:]}"
    verdicts: dict[str, set[str]] = {}
    for t in json.loads(results.read_text())["tests"]:
        verdicts.setdefault(t["verdict"], set()).add(t["requirement"])
    return verdicts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[dict[str, set[str]]]]]:
    """Every suite run of this module, started at once on a small pool (clean run first)."""
    root = tmp_path_factory.mktemp("quality")
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {"(clean)": pool.submit(run_suite, root / "clean", CLEAN_MODULES, None)}
        for mutant in sorted(EXPECTED, key=lambda m: (-len(EXPECTED[m][0]), m)):  # longest runs first
            futures[mutant] = pool.submit(run_suite, root / mutant, EXPECTED[mutant][0], mutant)
        yield futures
        for f in futures.values():
            f.cancel()


def test_every_mutant_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_mutant_is_caught(mutant: str, runs: dict[str, Future[dict[str, set[str]]]]) -> None:
    _modules, expected = EXPECTED[mutant]
    verdicts = runs[mutant].result()
    failed = verdicts.get("fail", set())
    assert failed & expected, f"mutant {mutant} not caught as {sorted(expected)}; failures: {sorted(failed)}"
    assert not verdicts.get("error"), f"suite errors under {mutant}: {sorted(verdicts['error'])}"


def test_clean_reference_broker_passes(runs: dict[str, Future[dict[str, set[str]]]]) -> None:
    verdicts = runs["(clean)"].result()
    bad = {v: sorted(r) for v, r in verdicts.items() if v in ("fail", "error", "stale", "indeterminate")}
    assert not bad, f"the clean reference broker is reported non-conformant: {bad}"
