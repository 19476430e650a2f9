"""Client profiles (spec/clients/): schema-validated data, one per library and version, like broker profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackspec.adapters.clients import BUILTIN
from ackspec.spec import SpecError, load_catalogue
from ackspec.spec.client_profiles import (
    available_client_profiles,
    load_client_profile,
    profile_for_client,
)

JAVA_PROFILES = {"artemis-jms-2.40": "core", "activemq-jms-6.1": "openwire", "qpid-jms-2.10": "amqp"}


@pytest.mark.parametrize("name", available_client_profiles())
def test_bundled_client_profile_validates(name: str) -> None:
    profile = load_client_profile(name)
    catalogue = load_catalogue()
    assert profile.name == name and profile.brokers and profile.library and profile.version
    for deviation in profile.deviations:
        assert deviation.requirement in catalogue
        assert deviation.reason and deviation.observed and deviation.status in ("seeded", "verified")
        assert set(deviation.brokers) <= set(profile.brokers)


def test_python_clients_and_java_clients_have_profiles() -> None:
    names = set(available_client_profiles())
    assert {"stomp.py-9.0", "proton-0.40"} <= names
    for name, protocol in JAVA_PROFILES.items():
        assert name in names and load_client_profile(name).protocol == protocol


def test_a_registered_client_finds_its_profile() -> None:
    assert profile_for_client("stomp.py") == "stomp.py-9.0"
    assert profile_for_client("proton") == "proton-0.40"
    assert profile_for_client("reference") is None  # no known deviation: no profile needed
    for client in ("stomp.py", "proton"):
        assert client in BUILTIN


def test_stomp_py_deviations_are_scoped_to_their_tests() -> None:
    profile = load_client_profile("stomp.py-9.0")
    assert {d.requirement for d in profile.deviations} == {
        "ARTEMIS-COMMIT-BLOCKS", "ARTEMIS-ROLLBACK-BLOCKS", "AMQ-TX-FAILED-COMMIT-ROLLS-BACK"}
    assert all(d.test and d.status == "verified" for d in profile.deviations)


PROFILE = """\
name: {name}
title: a client
description: a client library for tests
client: reference
library: example
version: 1.2.3
protocol: stomp
brokers: [reference]
deviations:
{deviations}
"""


def _write(tmp_path: Path, deviations: str, name: str = "example-1.2") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(PROFILE.format(name=name, deviations=deviations), encoding="utf-8")
    return path


@pytest.mark.parametrize(("deviations", "message"), [
    ("  - {requirement: NOPE-1, reason: because, observed: seen it, test: '*t'}", "NOPE-1"),
    ("  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, test: '*t'}", "'observed' is a required property"),
    ("  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, observed: seen it}", "'test' is a required property"),
    ("  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, observed: seen it, test: '*t', brokers: [artemis-2]}",
     "artemis-2 not among the profile's brokers"),
    ("  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, observed: seen it, test: '*t'}\n"
     "  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: again, observed: seen it, test: '*t'}", "listed twice"),
    ("  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, observed: seen it, test: '*t', colour: red}",
     "Additional properties"),
])
def test_a_bad_client_profile_is_one_line_naming_the_problem(tmp_path: Path, deviations: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        load_client_profile(_write(tmp_path, deviations))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "example-1.2.yaml" in str(info.value)


def test_the_same_requirement_may_deviate_per_test(tmp_path: Path) -> None:
    profile = load_client_profile(_write(tmp_path, (
        "  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: because, observed: seen it, test: '*a'}\n"
        "  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: again, observed: seen it, test: '*b'}")))
    assert [d.test for d in profile.deviations] == ["*a", "*b"]


def test_name_must_match_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "  []", name="example-1.2")
    path.rename(tmp_path / "other-1.0.yaml")
    with pytest.raises(SpecError, match="does not match the file name"):
        load_client_profile(tmp_path / "other-1.0.yaml")


def test_unknown_client_profile_names_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"unknown client profile 'nope' \(known: .*stomp.py-9.0"):
        load_client_profile("nope")


def test_a_deviation_with_a_check_excuses_only_the_failure_it_documents(tmp_path: Path) -> None:
    from ackspec.conformance.client_target import ClientTarget  # noqa: PLC0415

    profile = load_client_profile(_write(tmp_path, (
        "  - {requirement: ARTEMIS-COMMIT-BLOCKS, reason: commit does not wait, observed: seen it, "
        "test: '*test_commit', check: 'commit() returned before*answer'}")))
    excuse = ClientTarget("reference", profile).excuse_for("t.py::test_commit")
    assert excuse("ARTEMIS-COMMIT-BLOCKS", "...but commit() returned before the broker's answer") == \
        "commit does not wait"
    assert excuse("ARTEMIS-COMMIT-BLOCKS", "commit() raised JMSError") is None  # another failure: not excused
    assert excuse("ARTEMIS-ROLLBACK-BLOCKS", "rollback() returned before the broker's answer") is None
    assert ClientTarget("reference", profile).excuse_for("t.py::test_other")(
        "ARTEMIS-COMMIT-BLOCKS", "commit() returned before the broker's answer") is None
