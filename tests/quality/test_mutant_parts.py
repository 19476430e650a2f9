"""The mutant brokers of mutants.py, checked part by part (no suite run): each really is wrong.

These are the quick checks: the sans-IO core and STOMP session of a mutant behave differently from the
reference broker's on a small scenario, the model-based test of the core catches the core mutants, and a
broker that receipts before its fsync loses a receipted message in a crash. ``test_mutants.py`` and
``test_amqp_mutants.py`` check that the suite catches each of them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from ackspec.reference.broker import AckMode, BrokerCore, CoreConfig, Deliver, Effect
from ackspec.reference.broker.selector import parse_selector
from ackspec.reference.parts import REFERENCE_PARTS, BrokerParts
from ackspec.reference.server import EmbeddedBroker
from reference.raw_stomp import Raw
from reference.stomp_harness import Broker
from reference.test_core_stateful import QueueMachine
from reference.test_crash_restart import _bodies_after_restart

from .mutants import MUTANTS


def _delivers(effects: list[Effect]) -> list[Deliver]:
    return [e for e in effects if isinstance(e, Deliver)]


@pytest.mark.parametrize("mutant", ["lose-message", "duplicate-no-flag", "reorder", "ignore-ack",
                                    "client-as-individual", "leak-tx-sends", "ignore-prefetch"])
def test_core_mutants_change_behaviour(mutant: str) -> None:
    def run(core: BrokerCore) -> list[list[tuple[bytes, bool]]]:
        core.open("p")
        core.open("c")
        core.begin("p", "t")
        core.publish("p", "/queue/a", b"tx", tx="t")
        for i in range(4):
            core.publish("p", "/queue/a", b"%d" % i)
        out = core.subscribe("c", "s", "/queue/a", ack=AckMode.CLIENT, prefetch=2)
        ds = _delivers(out)
        out2 = core.settle("c", ds[-1].delivery_id)
        core.abort("p", "t")
        return [[(d.message.body, d.redelivered) for d in x] for x in (ds, _delivers(out2))]

    assert run(MUTANTS[mutant].core()) != run(BrokerCore())


@pytest.mark.parametrize("destination", ["/queue/colours", "/topic/colours"])
def test_selector_ignored_delivers_unmatched_messages(destination: str) -> None:
    def run(core: BrokerCore) -> list[bytes]:
        for conn in ("p", "c1"):
            core.open(conn)
        out = core.subscribe("c1", "s", destination, selector=parse_selector("colour = 'red'"))
        for colour in ("red", "blue"):
            out += core.publish("p", destination, colour.encode(), (("colour", colour),))
        return [d.message.body for d in _delivers(out)]

    assert run(BrokerCore(CoreConfig())) == [b"red"]
    assert run(MUTANTS["selector-ignored"].core(CoreConfig())) == [b"red", b"blue"]


def test_no_local_ignored_delivers_own_messages() -> None:
    for parts, expected in ((REFERENCE_PARTS, []), (MUTANTS["no-local-ignored"], [b"own"])):
        core = parts.core()
        core.open("c1")
        core.subscribe("c1", "mine", "/topic/t", no_local=True)
        assert [d.message.body for d in _delivers(core.publish("c1", "/topic/t", b"own", ()))] == expected


@pytest.mark.parametrize("mutant", ["early-receipt", "no-receipt", "mangle-header", "mangle-body", "error-no-close",
                                    "message-no-subscription", "message-no-destination", "error-no-message",
                                    "error-no-receipt-id", "wrong-receipt-id", "reorder-receipts",
                                    "double-escape-headers", "truncate-body-at-nul"])
def test_session_mutants_change_what_a_client_sees(mutant: str) -> None:
    def run(parts: BrokerParts) -> list[tuple[str, tuple[tuple[str, str], ...], bytes]]:
        b = Broker(journaling=True, parts=parts)
        c, p = b.client(), b.client()
        c.send("SUBSCRIBE", destination="/queue/a", id="1")
        p.send("SEND", b"bo\x00dy", destination="/queue/a", persistent="true", receipt="r", foo="b:r",
               content_length="5")
        p.send("SEND", b"two", destination="/queue/a", receipt="r2")
        out = [(f.command, f.headers, f.body) for f in p.frames() + c.frames()]
        c.send("ACK", id="999", receipt="r3")
        out += [(f.command, f.headers, f.body) for f in c.frames()]
        out.append(("closed", (("closed", str(c.closed)),), b""))
        return out

    assert run(MUTANTS[mutant]) != run(REFERENCE_PARTS)


@pytest.mark.parametrize("mutant", ["lose-message", "duplicate-no-flag", "reorder", "ignore-ack", "ignore-prefetch"])
def test_the_core_model_catches_mutant(mutant: str) -> None:
    """The model-based test of the core is not vacuous: each deliberately broken core is caught."""
    machine = type(f"Mutant{mutant}", (QueueMachine,), {"core_class": MUTANTS[mutant].core})
    with pytest.raises((AssertionError, ExceptionGroup)):  # hypothesis groups several distinct failures
        run_state_machine_as_test(machine, settings=settings(max_examples=200, stateful_step_count=30, deadline=None,
                                                            suppress_health_check=list(HealthCheck),
                                                            database=None, print_blob=False))


def test_early_receipt_loses_what_no_fsync_covered_in_a_crash() -> None:
    """A broker that receipts before its fsync (the early-receipt mutant) loses a receipted message in a crash,
    while a clean restart would have kept it: the crash restart is what exposes it."""
    for crash, expected in ((False, [b"x"]), (True, [])):
        with EmbeddedBroker(parts=MUTANTS["early-receipt"]) as b:
            assert b.server is not None and b.server.journal is not None
            b.server.journal.sync_delay = 0.5
            p = Raw(b).connect()
            p.send("SEND", b"x", destination="/queue/crash2", persistent="true", receipt="r1")
            assert p.recv().get("receipt-id") == "r1"  # receipted at once, the fsync still pending
            b.restart(crash=crash)
            assert _bodies_after_restart(b, "/queue/crash2") == expected, f"crash={crash}"
