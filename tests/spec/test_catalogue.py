"""The bundled catalogue: valid, big enough, sourced, consistent, and covering every seed concept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ackspec.adapters.base import Capability
from ackspec.spec import Catalogue, Level, load_catalogue
from ackspec.spec.data import CATALOGUE_DIR

ID_CONVENTION = re.compile(r"^(JMS|STOMP|AMQP|AMQ|ARTEMIS|SOLACE)(-\d+(\.\d+)*)?(-[A-Z0-9]+)+$")
SEEDS = ["000_93c1ab1d35904afa.txt", "001_746a10e189792b58.txt", "003_d5bc7f3cee6177eb.txt",
         "004_993d2fb8adbd6bed.txt"]


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return load_catalogue()


def test_catalogue_validates_and_has_at_least_120_requirements(catalogue: Catalogue) -> None:
    assert len(catalogue) >= 120
    assert len(catalogue.families) == len(list(CATALOGUE_DIR.glob("*.yaml")))


def test_every_family_file_has_requirements(catalogue: Catalogue) -> None:
    for family in catalogue.families:
        assert catalogue.in_family(family), family


def test_every_requirement_has_a_source(catalogue: Catalogue) -> None:
    for req in catalogue:
        assert req.source.document.strip() and req.source.section.strip(), req.id


def test_ids_are_unique_and_follow_the_convention(catalogue: Catalogue) -> None:
    assert len(set(catalogue.ids)) == len(catalogue.ids)
    bad = [rid for rid in catalogue.ids if not ID_CONVENTION.match(rid)]
    assert bad == []


def test_section_in_id_matches_the_source_section(catalogue: Catalogue) -> None:
    for req in catalogue:
        match = re.match(r"^[A-Z]+-(\d+(?:\.\d+)*)-", req.id)
        if match and req.source.seed is None:  # seed-sourced rules cite the seed's heading
            assert req.source.section.startswith(match.group(1)) or match.group(1) in req.source.section, req.id


def test_every_capability_named_exists(catalogue: Catalogue) -> None:
    known = {c.value for c in Capability}
    for req in catalogue:
        assert set(req.capabilities) <= known, req.id


def test_untestable_requirements_say_why(catalogue: Catalogue) -> None:
    for req in catalogue:
        assert req.testable or (req.untestable_reason and len(req.untestable_reason) > 10), req.id


def test_every_level_is_used(catalogue: Catalogue) -> None:
    assert {r.level for r in catalogue} == set(Level)


def test_every_seed_is_a_source(catalogue: Catalogue) -> None:
    seeds = {r.source.seed for r in catalogue}
    assert set(SEEDS) <= seeds


def test_jms_7_3_has_every_rule_7_3_1_to_7_3_9(catalogue: Catalogue) -> None:
    sections = {r.source.section.split()[0] for r in catalogue.in_family("jms-send-async")}
    assert {f"7.3.{n}" for n in range(1, 10)} <= sections


def test_ack_modes_are_data_with_their_numbers(catalogue: Catalogue) -> None:
    params = catalogue.get("AMQ-ACKMODE-VALUES").parameters
    values = {name: p.default for name, p in params.items()}
    assert values == {"SESSION_TRANSACTED": 0, "AUTO_ACKNOWLEDGE": 1, "CLIENT_ACKNOWLEDGE": 2,
                      "DUPS_OK_ACKNOWLEDGE": 3, "INDIVIDUAL_ACKNOWLEDGE": 4}
    for rid, value in [("JMS-6.2.10-SESSION-TRANSACTED", 0), ("JMS-6.2.10-AUTO-ACK", 1),
                       ("JMS-6.2.10-CLIENT-ACK-CUMULATIVE", 2), ("JMS-6.2.10-DUPS-OK", 3),
                       ("AMQ-ACKMODE-INDIVIDUAL", 4)]:
        assert catalogue.get(rid).parameters["ack_mode"].default == value


def test_activemq_ack_types_are_data_with_their_numbers(catalogue: Catalogue) -> None:
    expected = {"DELIVERED": 0, "POISON": 1, "STANDARD": 2, "REDELIVERED": 3, "INDIVIDUAL": 4, "UNMATCHED": 5}
    for name, value in expected.items():
        assert catalogue.get(f"AMQ-ACKTYPE-{name}").parameters["ack_type"].default == value


def test_prefetch_factors_and_defaults_are_data(catalogue: Catalogue) -> None:
    get = catalogue.get
    assert get("AMQ-OPTIMIZE-ACK-BATCH-FACTOR").parameters["batch_factor"].default == 0.65
    assert get("AMQ-CLIENT-DELIVERED-ACK-HALF-PREFETCH").parameters["delivered_factor"].default == 0.5
    assert get("AMQ-PREFETCH-DEFAULT").parameters["prefetchSize"].default == 1000
    assert get("AMQ-PREFETCH-ZERO-PULL").parameters["prefetchSize"].default == 0
    assert get("AMQ-PREFETCH-LISTENER-MIN-ONE").parameters["min_prefetch"].default == 1


def test_sync_send_flags_have_the_seed_defaults(catalogue: Catalogue) -> None:
    defaults = {
        ("ARTEMIS-BLOCK-ON-DURABLE-SEND", "blockOnDurableSend"): True,
        ("ARTEMIS-BLOCK-ON-NON-DURABLE-SEND", "blockOnNonDurableSend"): False,
        ("ARTEMIS-BLOCK-ON-ACKNOWLEDGE", "blockOnAcknowledge"): False,
        ("ARTEMIS-JOURNAL-SYNC-TRANSACTIONAL", "journal-sync-transactional"): True,
        ("ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL", "journal-sync-non-transactional"): True,
    }
    for (rid, name), value in defaults.items():
        param = catalogue.get(rid).parameters[name]
        assert param.type == "boolean" and param.default is value, rid


def test_solace_window_rules_are_data(catalogue: Catalogue) -> None:
    assert abs(catalogue.get("SOLACE-WINDOW-ACK-THIRD").parameters["ack_threshold"].default - 1 / 3) < 1e-9
    assert catalogue.get("SOLACE-WINDOW-ACK-TIMEOUT").parameters["ack_timeout"].default == 1.0
    modes = catalogue.get("SOLACE-ACK-EVENT-PER-MESSAGE").parameters["ack_event_mode"].domain
    assert modes == ("per-message", "windowed")


@pytest.mark.parametrize("rid", [
    "STOMP-ACK-CLIENT-CUMULATIVE", "STOMP-ACK-CLIENT-INDIVIDUAL", "STOMP-NACK-CLIENT-CUMULATIVE",
    "STOMP-RECEIPT-AFTER-PROCESSING", "STOMP-TX-COMMIT-ATOMIC", "STOMP-ERROR-CLOSES", "STOMP-HEARTBEAT-NEGOTIATION",
    "STOMP-HEADER-ESCAPING", "AMQP-3.4.4-RELEASED-NO-COUNT", "AMQP-3.4.5-MODIFIED-FAILED-COUNTS",
    "AMQP-2.6.7-CREDIT-BOUND", "AMQP-4.4.1-POSTING-INVISIBLE", "AMQP-2.8.2-SND-SETTLE-MODES",
    "JMS-7.3.8-CALLBACK-ORDER", "AMQ-ACKTYPE-POISON", "ARTEMIS-BLOCK-ON-DURABLE-SEND", "SOLACE-WINDOW-BOUND",
])
def test_wire_mapping_requirements_exist(catalogue: Catalogue, rid: str) -> None:
    assert catalogue.get(rid).id == rid


def test_select_filters(catalogue: Catalogue) -> None:
    stomp = catalogue.select(protocol="stomp")
    assert stomp and all("stomp" in r.protocols or "any" in r.protocols for r in stomp)
    brokers = catalogue.select(role="broker", level="MUST")
    assert brokers and all(r.role == "broker" and r.level == Level.MUST for r in brokers)


def test_loading_is_cached(catalogue: Catalogue) -> None:
    assert load_catalogue() is catalogue
    assert load_catalogue(Path(CATALOGUE_DIR)) is catalogue
