"""The bundled target profiles validate, and their deviations name real requirements."""

from __future__ import annotations

import pytest

from ackspec.adapters.base import Capability
from ackspec.adapters.settings import TargetSettings
from ackspec.spec import available_profiles, load_catalogue, load_profile

EXPECTED = {"reference", "rabbitmq-3.10", "activemq-5.17", "artemis-2", "activemq-6"}


def test_expected_profiles_exist() -> None:
    assert set(available_profiles()) >= EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_profile_validates(name: str) -> None:
    profile = load_profile(name)
    catalogue = load_catalogue()
    assert profile.name == name and profile.urls
    assert profile.features <= {c.value for c in Capability}
    for rid, found in profile.deviations.items():
        for deviation in found:
            assert rid in catalogue and deviation.requirement == rid
            assert deviation.reason and deviation.observed and deviation.test
            assert deviation.status in ("seeded", "verified")


def test_reference_has_no_deviations_and_every_feature() -> None:
    profile = load_profile("reference")
    assert dict(profile.deviations) == {}
    assert profile.features == {c.value for c in Capability}


def test_every_deviation_says_where_it_comes_from() -> None:
    """A deviation is either seeded from observation notes or verified by a suite run, and has a reason."""
    rabbit = load_profile("rabbitmq-3.10")
    assert "STOMP-ERROR-CLOSES" in rabbit.deviations
    for name in ("rabbitmq-3.10", "activemq-5.17", "artemis-2", "activemq-6"):
        for requirement, found in load_profile(name).deviations.items():
            for deviation in found:
                assert deviation.status in {"seeded", "verified"}, (name, requirement)
                assert deviation.reason.strip(), (name, requirement)


def test_profiles_feed_the_driver_settings() -> None:
    rabbit = load_profile("rabbitmq-3.10")
    settings = TargetSettings.from_profile(dict(rabbit.raw))
    assert (settings.login, settings.vhost, settings.prefetch_headers) == ("guest", "/", ("prefetch-count",))
    assert Capability.DELIVERY_COUNT not in settings.capabilities


def test_artemis_knobs_record_the_seed_defaults() -> None:
    knobs = load_profile("artemis-2").knobs
    assert knobs["blockOnDurableSend"] is True and knobs["blockOnNonDurableSend"] is False
    assert knobs["blockOnAcknowledge"] is False
    assert knobs["journal-sync-transactional"] is True and knobs["journal-sync-non-transactional"] is True
