"""Every failing test's report names the requirements it cites, once (the plugin's makereport hookwrapper).

Each case runs a tiny test file through pytester with the ackspec plugin loaded from its entry
point, as a user's run loads it, and reads the terminal report, JUnit XML and allure results.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ackspec.conformance.plugin import name_requirements
from ackspec.conformance.verdicts import RequirementViolation

pytest_plugins = ["pytester"]

ONE = "JMS-3.4.7-REDELIVERED-SET"
TWO = "STOMP-ACK-AUTO"

TESTS = f'''
import pytest
from ackspec.conformance.markers import requirement
from ackspec.conformance.verdicts import RequirementViolation

@requirement("{ONE}")
def test_assert_fails():
    assert 1 + 1 == 3

@requirement("{ONE}", "{TWO}")
def test_fail_call():
    pytest.fail("broker kept the message")

@requirement("{ONE}")
def test_already_named():
    raise RequirementViolation("{ONE}", "redelivered header missing")

@requirement("{TWO}")
def test_custom_str():
    {{}}["missing-key"]

@requirement("{ONE}")
def test_skipped():
    pytest.skip("not for this target")

def test_uncited():
    assert False, "no requirement here"
'''


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_cites=TESTS)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--junitxml=junit.xml", *args)


def junit_messages(pytester: pytest.Pytester) -> dict[str, str]:
    root = ET.parse(Path(pytester.path) / "junit.xml").getroot()
    out = {}
    for case in root.iter("testcase"):
        for failure in [*case.iter("failure"), *case.iter("error"), *case.iter("skipped")]:
            out[case.get("name", "")] = failure.get("message", "")
    return out


def test_failures_name_their_requirements_once(pytester: pytest.Pytester) -> None:
    result = run(pytester)
    result.assert_outcomes(failed=5, skipped=1)
    reports = {r.nodeid.split("::")[-1]: r for r in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
               if r.when == "call"}
    text = {name: str(r.longrepr) for name, r in reports.items()}
    assert f"[{ONE}] assert (1 + 1) == 3" in text["test_assert_fails"]
    assert f"[{ONE}, {TWO}] broker kept the message" in text["test_fail_call"]
    assert text["test_already_named"].count(ONE) >= 1 and f"[{ONE}]" not in text["test_already_named"]
    assert f"[{TWO}]" in text["test_custom_str"] and "missing-key" in text["test_custom_str"]  # added as a note
    assert "[" not in text["test_uncited"].splitlines()[-1]
    messages = junit_messages(pytester)
    assert messages["test_assert_fails"] == f"AssertionError: [{ONE}] assert (1 + 1) == 3"
    assert messages["test_fail_call"] == f"Failed: [{ONE}, {TWO}] broker kept the message"
    assert messages["test_already_named"].count(ONE) == 1
    assert TWO in messages["test_custom_str"]
    assert ONE not in messages["test_skipped"] and TWO not in messages["test_skipped"]


def test_allure_results_carry_the_ids_in_their_status_message(pytester: pytest.Pytester) -> None:
    run(pytester, "--alluredir=allure")
    results = {r["name"]: r for r in (json.loads(p.read_text()) for p in (Path(pytester.path) / "allure")
                                      .glob("*-result.json"))}
    assert results["test_assert_fails"]["status"] == "failed"
    assert f"[{ONE}]" in results["test_assert_fails"]["statusDetails"]["message"]
    assert f"[{ONE}, {TWO}]" in results["test_fail_call"]["statusDetails"]["message"]
    assert results["test_already_named"]["statusDetails"]["message"].count(ONE) == 1
    assert f"[{TWO}]" in results["test_custom_str"]["statusDetails"]["message"]  # broken, still named


def test_name_requirements_is_idempotent() -> None:
    exc = AssertionError("counts differ")
    assert name_requirements(exc, [ONE]) and str(exc) == f"[{ONE}] counts differ"
    assert not name_requirements(exc, [ONE]) and str(exc) == f"[{ONE}] counts differ"
    violation = RequirementViolation(TWO, "an oracle's finding")  # names its own requirement: left alone
    assert not name_requirements(violation, [ONE])
    assert not name_requirements(AssertionError("x"), [])
