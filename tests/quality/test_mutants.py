"""Suite quality: every mutant of the reference broker is caught, and the clean broker passes.

Each mutant (``tests/quality/mutants.py``, built from outside the broker) makes the embedded
reference broker wrong in one way. The suite, run against it
(``ackspec run --broker-parts tests.quality.mutants:NAME``),
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

from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from .mutants import CONFORMANT, MUTANTS
from .runner import Verdicts, assert_caught, run_suite, start_runs

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
    "durable-forgets": (("test_delivery",), frozenset({"JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS"})),
    "selector-ignored": (("test_selectors",), frozenset({"JMS-3.8-SELECTOR-FILTERS", "AMQ-ACKTYPE-UNMATCHED"})),
    "no-local-ignored": (("test_selectors",), frozenset({"JMS-NO-LOCAL-OWN-CONNECTION"})),
    "client-id-shared": (("test_client_id",), frozenset({"JMS-6.1.2-CLIENT-ID-IN-USE"})),
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
    # a Solace-style publish window whose confirmations come late, or before the journal synced
    "window-ack-late-third": (("test_publish_window",), frozenset({"SOLACE-WINDOW-ACK-THIRD"})),
    "window-ack-late-timer": (("test_publish_window",), frozenset({"SOLACE-WINDOW-ACK-TIMEOUT"})),
    "window-ack-before-sync": (("test_publish_window",), frozenset({"SOLACE-ACK-MEANS-PERSISTED"})),
}

CLEAN_MODULES = ("test_ack", "test_nack", "test_transactions", "test_receipts", "test_delivery", "test_frames",
                 "test_properties", "test_publish_window")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Verdicts]]]:
    """Every suite run of this module, started at once on a small pool (clean run first)."""
    yield from start_runs(tmp_path_factory.mktemp("quality"), CLEAN_MODULES, EXPECTED, pattern="{module}.py::*")


def test_every_mutant_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_mutant_is_caught(mutant: str, runs: dict[str, Future[Verdicts]]) -> None:
    assert_caught(mutant, EXPECTED, runs[mutant].result())


def test_clean_reference_broker_passes(runs: dict[str, Future[Verdicts]]) -> None:
    verdicts = runs["(clean)"].result()
    bad = {v: sorted(r) for v, r in verdicts.items() if v in ("fail", "error", "stale", "indeterminate")}
    assert not bad, f"the clean reference broker is reported non-conformant: {bad}"


# conformant variant -> the suite modules it must pass
CONFORMANT_MODULES: dict[str, tuple[str, ...]] = {
    "solace-style-window": ("test_publish_window",),
}


@pytest.mark.parametrize("variant", sorted(CONFORMANT))
def test_conformant_variant_passes(variant: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A broker that differs from the reference one and still conforms (a Solace-style publish window that
    confirms a third of the window at a time, and the rest on its timer) is not failed by the suite."""
    verdicts = run_suite(tmp_path_factory.mktemp(variant), [f"{m}.py::*" for m in CONFORMANT_MODULES[variant]],
                         variant)
    bad = {v: sorted(r) for v, r in verdicts.items() if v in ("fail", "error", "stale", "indeterminate")}
    assert not bad, f"the conformant variant {variant} is reported non-conformant: {bad}"
    assert verdicts.get("pass"), f"nothing passed against {variant}: the modules did not run"
