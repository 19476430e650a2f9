"""Suite quality over AMQP 1.0: mutants of the reference broker are caught through its AMQP listener.

Same idea as test_mutants.py (STOMP), with ``--target reference+amqp://embedded``: each mutant
makes the embedded broker wrong in one way, and the suite, driven over AMQP by the proton driver,
must report a *fail* for a requirement the bug breaks; the clean broker must show no failure in
the same modules. Only a handful of mutants are run here, each restricted to the one module that
sees it, to keep this file fast; the three that needed AMQP-specific work are the point:

``early-receipt``
    ``accepted`` for a durable transfer before the journal fsync. Caught by the power-loss test
    (slow disk + crash restart) in suite/amqp/test_durable.py.
``client-as-individual``
    AMQP has no cumulative acknowledgement; a client settles many deliveries at once with one
    disposition *range*, and the mutant applies a range to its last delivery only (see
    reference/amqp/mutants.py). Caught by the cumulative-ack test (the driver writes a CLIENT-mode
    ack as one range).
``ignore-prefetch``
    over AMQP: ignore link credit (every flow read as 1000 more credit), so transfers exceed
    what the receiver granted. Caught by the credit tests.

Mutants not listed have no AMQP form (STOMP frame layer: ERROR frames, MESSAGE headers,
receipt ids and order, header escaping, NUL-truncated bodies; the core's STOMP prefetch, which
AMQP credit replaces) or are caught by the same tests as a listed one.
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

TARGET = "reference+amqp://embedded"

# mutant -> (suite modules to run, requirements of which at least one must fail)
EXPECTED: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "early-receipt": (("amqp/test_durable",), frozenset({"AMQP-3.2.1-ACCEPTED-AFTER-DURABLE"})),
    "client-as-individual": (("suite/test_ack",), frozenset({"STOMP-ACK-CLIENT-CUMULATIVE"})),
    "ignore-prefetch": (("amqp/test_credit",), frozenset({"AMQP-2.6.7-CREDIT-BOUND",
                                                          "AMQP-2.6.7-INITIAL-CREDIT-ZERO"})),
    "no-receipt": (("amqp/test_settlement",), frozenset({"AMQP-3.4-OUTCOMES"})),
    "no-redelivered-flag": (("amqp/test_outcomes",), frozenset({"AMQP-3.2.1-FIRST-ACQUIRER"})),
    "stuck-delivery-count": (("amqp/test_outcomes",), frozenset({"AMQP-3.4.5-MODIFIED-FAILED-COUNTS"})),
    "abort-keeps-acks": (("amqp/test_transactions",), frozenset({"AMQP-4.4.2-RETIREMENT-ON-DISCHARGE"})),
}

CLEAN_MODULES = ("amqp/test_durable", "suite/test_ack", "amqp/test_credit", "amqp/test_settlement",
                 "amqp/test_outcomes", "amqp/test_transactions")
WORKERS = int(os.environ.get("ACKSPEC_QUALITY_WORKERS", "3"))


def run_suite(out: Path, modules: tuple[str, ...], fault: str | None) -> dict[str, set[str]]:
    cmd = [sys.executable, "-m", "ackspec", "run", "--target", TARGET, "--no-report", "--timeout", "1",
           "--examples", "4", "--out", str(out)]
    for module in modules:
        cmd += ["--only", f"*{module}.py::*"]
    if fault:
        cmd += ["--fault", fault]
    env = {**os.environ, NO_SHRINK_ENV: "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)
    results = out / "results.json"
    assert results.exists(), f"no results ({proc.returncode}): {proc.stderr[-2000:]}"
    verdicts: dict[str, set[str]] = {}
    for t in json.loads(results.read_text())["tests"]:
        verdicts.setdefault(t["verdict"], set()).add(t["requirement"])
    return verdicts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[dict[str, set[str]]]]]:
    root = tmp_path_factory.mktemp("quality-amqp")
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {"(clean)": pool.submit(run_suite, root / "clean", CLEAN_MODULES, None)}
        for mutant, (modules, _expected) in EXPECTED.items():
            futures[mutant] = pool.submit(run_suite, root / mutant, modules, mutant)
        yield futures
        for f in futures.values():
            f.cancel()


def test_expected_mutants_exist() -> None:
    assert set(EXPECTED) <= set(MUTANTS)


def test_clean_broker_has_no_failures(runs: dict[str, Future[dict[str, set[str]]]]) -> None:
    verdicts = runs["(clean)"].result()
    assert not verdicts.get("fail"), f"failures against the clean broker over AMQP: {sorted(verdicts['fail'])}"
    assert not verdicts.get("error"), f"suite errors against the clean broker: {sorted(verdicts['error'])}"
    assert verdicts.get("pass"), "nothing passed: the AMQP modules did not run"


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_mutant_is_caught_over_amqp(mutant: str, runs: dict[str, Future[dict[str, set[str]]]]) -> None:
    _modules, expected = EXPECTED[mutant]
    verdicts = runs[mutant].result()
    failed = verdicts.get("fail", set())
    assert failed & expected, f"mutant {mutant} not caught over AMQP as {sorted(expected)}; failures: {sorted(failed)}"
    assert not verdicts.get("error"), f"suite errors under {mutant}: {sorted(verdicts['error'])}"
