"""Bad catalogue input gives one clear line naming the file, the line and the field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ackspec.errors import AckspecError
from ackspec.spec import SpecError, UnknownFamily, UnknownRequirement, load_catalogue, load_profile

from .specfiles import family_yaml

MakeCatalogue = Callable[..., Path]


def error_of(root: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_catalogue(root)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, AckspecError) and info.value.exit_code == 2
    return message


def test_minimal_catalogue_loads(make_catalogue: MakeCatalogue) -> None:
    catalogue = load_catalogue(make_catalogue())
    assert catalogue.ids == ("STOMP-TEST-ONE",)
    assert catalogue.get("STOMP-TEST-ONE").family == "stomp-test"


def test_bad_yaml_names_file_and_line(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE") + "  - id: [unclosed\n"
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    line = text.count("\n") + 1
    assert "stomp-test.yaml:" in message and "bad YAML" in message
    assert f":{line}:" in message or f":{line - 1}:" in message


def test_schema_violation_names_json_path_id_and_line(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE", "STOMP-TEST-TWO").replace("level: MUST", "level: OFTEN", 2)
    text = text.replace("level: OFTEN", "level: MUST", 1)
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    line = text.splitlines().index("    level: OFTEN") + 1
    assert message.startswith(f"{Path('stomp-test.yaml').name}") or "stomp-test.yaml" in message
    assert f"stomp-test.yaml:{line}:" in message
    assert "requirements[1] (STOMP-TEST-TWO).level" in message and "'OFTEN'" in message


def test_missing_field_is_named(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE").replace("    technique: example\n", "")
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    assert "requirements[0] (STOMP-TEST-ONE)" in message and "'technique' is a required property" in message


def test_untestable_without_reason_is_refused(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE").replace("testable: true", "testable: false")
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    assert "untestable_reason" in message


def test_duplicate_id_across_files_names_both(make_catalogue: MakeCatalogue) -> None:
    root = make_catalogue({
        "stomp-a.yaml": family_yaml("stomp-a", "STOMP-SAME"),
        "stomp-b.yaml": family_yaml("stomp-b", "STOMP-OTHER", "STOMP-SAME"),
    })
    message = error_of(root)
    assert "duplicate requirement ID STOMP-SAME" in message
    assert "stomp-b.yaml:" in message and "stomp-a.yaml:" in message
    assert "requirements[1]" in message


def test_family_id_must_match_file_name(make_catalogue: MakeCatalogue) -> None:
    message = error_of(make_catalogue({"stomp-test.yaml": family_yaml("stomp-other", "STOMP-TEST-ONE")}))
    assert "family.id" in message and "unknown family 'stomp-other'" in message and "stomp-test" in message


def test_id_prefix_must_belong_to_family(make_catalogue: MakeCatalogue) -> None:
    message = error_of(make_catalogue({"stomp-test.yaml": family_yaml("stomp-test", "AMQP-1.2-X")}))
    assert "requirements[0] (AMQP-1.2-X).id" in message and "prefix" in message


def test_id_convention_is_enforced(make_catalogue: MakeCatalogue) -> None:
    message = error_of(make_catalogue({"stomp-test.yaml": family_yaml("stomp-test", "stomp-lowercase")}))
    assert "requirements[0] (stomp-lowercase).id" in message and "does not match" in message


def test_unknown_capability_is_named(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE").replace("capabilities: []", "capabilities: [telepathy]")
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    assert "capabilities: unknown capability 'telepathy'" in message


def test_parameter_default_must_fit_its_type(make_catalogue: MakeCatalogue) -> None:
    text = family_yaml("stomp-test", "STOMP-TEST-ONE").replace(
        "    testable: true\n",
        "    parameters:\n      prefetch: {type: integer, default: lots, description: A bound.}\n    testable: true\n")
    message = error_of(make_catalogue({"stomp-test.yaml": text}))
    assert "parameters.prefetch.default: 'lots' is not of type integer" in message


def test_empty_or_missing_directory(tmp_path: Path) -> None:
    assert "catalogue directory not found" in error_of(tmp_path / "nowhere")
    assert "no *.yaml requirement files" in error_of(tmp_path)


def test_unknown_id_is_one_line_with_a_hint() -> None:
    catalogue = load_catalogue()
    with pytest.raises(UnknownRequirement) as info:
        catalogue.get("JMS-7.3.8-CALLBACK-ORDR")
    assert str(info.value) == ("unknown requirement ID 'JMS-7.3.8-CALLBACK-ORDR' "
                               "(not in the catalogue; did you mean JMS-7.3.8-CALLBACK-ORDER?)")
    with pytest.raises(UnknownFamily, match="unknown family 'jms-nothing'"):
        catalogue.select(family="jms-nothing")


def test_cache_notices_edits(make_catalogue: MakeCatalogue) -> None:
    root = make_catalogue()
    first = load_catalogue(root)
    assert load_catalogue(root) is first
    (root / "stomp-test.yaml").write_text(family_yaml("stomp-test", "STOMP-TEST-ONE", "STOMP-TEST-TWO"),
                                          encoding="utf-8")
    assert load_catalogue(root).ids == ("STOMP-TEST-ONE", "STOMP-TEST-TWO")


PROFILE = """\
name: {name}
title: A test target
description: A profile written by the loader tests.
protocols:
  stomp: {{url: "stomp://127.0.0.1:61613"}}
features: [queues]
deviations:
  - requirement: {rid}
    reason: It does not.
    observed: Nothing happened.
    test: "*test_x*"
"""


def test_profile_with_unknown_requirement(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(PROFILE.format(name="broken", rid="STOMP-ERROR-CLOSE"), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_profile(path)
    message = str(info.value)
    assert "broken.yaml:8: deviations[0].requirement: unknown requirement ID 'STOMP-ERROR-CLOSE'" in message
    assert "did you mean STOMP-ERROR-CLOSES?" in message


def test_profile_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE.format(name="other", rid="STOMP-ERROR-CLOSES"), encoding="utf-8")
    with pytest.raises(SpecError, match=r"p\.yaml:1: name: 'other' does not match the file name"):
        load_profile(path)
    path.write_text(PROFILE.format(name="p", rid="STOMP-ERROR-CLOSES").replace("[queues]", "[queues, warp]"),
                    encoding="utf-8")
    with pytest.raises(SpecError, match=r"features\[1\]: unknown capability 'warp'"):
        load_profile(path)
    path.write_text(PROFILE.format(name="p", rid="STOMP-ERROR-CLOSES").replace("    observed: Nothing happened.\n", ""),
                    encoding="utf-8")
    with pytest.raises(SpecError, match=r"deviations\[0\] \(STOMP-ERROR-CLOSES\): 'observed' is a required property"):
        load_profile(path)
    with pytest.raises(SpecError, match=r"unknown profile 'nope' \(known: .*reference"):
        load_profile("nope")


def test_a_deviation_must_be_scoped_to_a_test(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE.format(name="p", rid="STOMP-ERROR-CLOSES").replace('    test: "*test_x*"\n', ""),
                    encoding="utf-8")
    with pytest.raises(SpecError, match=r"deviations\[0\] \(STOMP-ERROR-CLOSES\): 'test' is a required property"):
        load_profile(path)


def test_a_requirement_may_deviate_in_several_scoped_ways_but_not_twice_the_same(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    entry = PROFILE.format(name="p", rid="STOMP-ERROR-CLOSES")
    second = entry[entry.index("  - requirement"):]
    path.write_text(entry + second.replace("*test_x*", "*test_y*") + second.replace(
        '"*test_x*"', '"*test_x*"\n    check: "*still open*"'), encoding="utf-8")
    found = load_profile(path).deviation("STOMP-ERROR-CLOSES")
    assert [(d.test, d.check) for d in found] == [("*test_x*", None), ("*test_y*", None), ("*test_x*", "*still open*")]
    path.write_text(entry + second, encoding="utf-8")
    with pytest.raises(SpecError, match=r"listed twice with the same scope"):
        load_profile(path)
