"""Suite quality: every mutant of the reference broker is caught, and the clean broker passes.

Each mutant (``ackspec.reference.faults.MUTANTS``) makes the embedded reference
broker wrong in one way. The suite, run against it (``ackspec run --fault``),
must report a *fail* verdict for at least one requirement that the bug breaks;
against the clean broker it must report no failure at all. This is the suite's
own acceptance test: a suite that misses a mutant has a blind spot.

Each run is a subprocess restricted to the families that can see the bug, with a
short receipt/message timeout, so a missing message costs one second, not five.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
}

UNDETECTABLE = {
    "early-receipt": "EmbeddedBroker.restart() stops the broker cleanly, so writes that were receipted before "
                     "their fsync still reach the journal; catching it needs a restart that drops unsynced data",
}


def run_suite(tmp: Path, modules: tuple[str, ...], fault: str | None) -> dict[str, set[str]]:
    out = tmp / (fault or "clean")
    cmd = [sys.executable, "-m", "ackspec", "run", "--no-report", "--timeout", "1", "--examples", "4",
           "--out", str(out)]
    for module in modules:
        cmd += ["--only", f"{module}.py::*"]
    if fault:
        cmd += ["--fault", fault]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    results = out / "results.json"
    assert results.exists(), f"no results ({proc.returncode}): {proc.stderr[-2000:]}"
    verdicts: dict[str, set[str]] = {}
    for t in json.loads(results.read_text())["tests"]:
        verdicts.setdefault(t["verdict"], set()).add(t["requirement"])
    return verdicts


def test_every_mutant_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_mutant_is_caught(mutant: str, tmp_path: Path) -> None:
    if mutant in UNDETECTABLE:
        pytest.xfail(UNDETECTABLE[mutant])
    modules, expected = EXPECTED[mutant]
    verdicts = run_suite(tmp_path, modules, mutant)
    failed = verdicts.get("fail", set())
    assert failed & expected, f"mutant {mutant} not caught as {sorted(expected)}; failures: {sorted(failed)}"
    assert not verdicts.get("error"), f"suite errors under {mutant}: {sorted(verdicts['error'])}"


def test_clean_reference_broker_passes(tmp_path: Path) -> None:
    verdicts = run_suite(tmp_path, ("test_ack", "test_nack", "test_transactions", "test_receipts",
                                    "test_delivery", "test_frames", "test_properties"), None)
    bad = {v: sorted(r) for v, r in verdicts.items() if v in ("fail", "error", "stale", "indeterminate")}
    assert not bad, f"the clean reference broker is reported non-conformant: {bad}"
