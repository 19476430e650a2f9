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
    tests/quality/amqp_frames.py). Caught by the cumulative-ack test (the driver writes a CLIENT-mode
    ack as one range).
``ignore-prefetch``
    over AMQP: ignore link credit (every flow read as 1000 more credit), so transfers exceed
    what the receiver granted. Caught by the credit tests.

Mutants not listed have no AMQP form (STOMP frame layer: ERROR frames, MESSAGE headers,
receipt ids and order, header escaping, NUL-truncated bodies; the core's STOMP prefetch, which
AMQP credit replaces) or are caught by the same tests as a listed one.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from .mutants import AMQP_MUTANTS, MUTANTS
from .runner import Verdicts, assert_caught, start_runs

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
    # the selector and no-local source filters, mapped by the listener onto the core's
    "selector-ignored": (("suite/test_selectors",), frozenset({"JMS-3.8-SELECTOR-FILTERS", "AMQ-ACKTYPE-UNMATCHED"})),
    "no-local-ignored": (("suite/test_selectors",), frozenset({"JMS-NO-LOCAL-OWN-CONNECTION"})),
    "client-id-shared": (("suite/test_client_id",), frozenset({"JMS-6.1.2-CLIENT-ID-IN-USE"})),
    # frame-level rules the raw AMQP peer tests (suite/amqp/test_raw_frames.py)
    "announced-not-final": (("amqp/test_raw_frames",), frozenset({"AMQP-2.7.5-TERMINAL-STATE-FINAL"})),
    "credit-from-own-count": (("amqp/test_raw_frames",), frozenset({"AMQP-2.6.7-CREDIT-RECEIVER-SETS"})),
    # one transfer beyond credit, late: only as the receiver detaches (the last barrier the test reads to)
    "late-transfer-at-detach": (("amqp/test_raw_frames",), frozenset({"AMQP-2.6.7-CREDIT-RECEIVER-SETS"})),
    # a burst of windowed transfers: the last one's outcome held forever; accepted before the journal synced
    "window-ack-late-timer": (("suite/test_publish_window",), frozenset({"SOLACE-WINDOW-ACK-TIMEOUT"})),
    "window-ack-before-sync": (("suite/test_publish_window",), frozenset({"SOLACE-ACK-MEANS-PERSISTED"})),
}

CLEAN_MODULES = ("amqp/test_durable", "suite/test_ack", "amqp/test_credit", "amqp/test_settlement",
                 "amqp/test_outcomes", "amqp/test_transactions", "suite/test_selectors",
                 "suite/test_client_id", "amqp/test_raw_frames", "suite/test_publish_window")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Verdicts]]]:
    yield from start_runs(tmp_path_factory.mktemp("quality-amqp"), CLEAN_MODULES, EXPECTED,
                          pattern="*{module}.py::*", target=TARGET)


def test_expected_mutants_exist() -> None:
    assert set(EXPECTED) <= set(MUTANTS) | set(AMQP_MUTANTS)


def test_clean_broker_has_no_failures(runs: dict[str, Future[Verdicts]]) -> None:
    verdicts = runs["(clean)"].result()
    assert not verdicts.get("fail"), f"failures against the clean broker over AMQP: {sorted(verdicts['fail'])}"
    assert not verdicts.get("error"), f"suite errors against the clean broker: {sorted(verdicts['error'])}"
    assert verdicts.get("pass"), "nothing passed: the AMQP modules did not run"


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_mutant_is_caught_over_amqp(mutant: str, runs: dict[str, Future[Verdicts]]) -> None:
    assert_caught(mutant, EXPECTED, runs[mutant].result(), " over AMQP")
