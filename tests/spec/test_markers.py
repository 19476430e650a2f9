"""The ``requirement`` marker: unknown IDs fail collection; citations become JUnit properties and allure labels.

Each case runs pytest in a subprocess on a small test file in a temporary directory, so the ackspec
plugin is loaded exactly as a user's run loads it (through the ``pytest11`` entry point).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ackspec.conformance.markers import cited_ids, requirement

TEST_FILE = """\
import pytest
from ackspec.conformance.markers import requirement

@requirement("STOMP-ERROR-CLOSES", "JMS-7.3.8-CALLBACK-ORDER")
def test_known():
    assert True

@pytest.mark.requirement("{second}")
def test_second():
    assert True
"""


def run_pytest(tmp_path: Path, second: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_cites.py").write_text(TEST_FILE.format(second=second), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_cites.py", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


def test_requirement_is_the_pytest_marker() -> None:
    assert requirement.name == "requirement"


def test_unknown_id_fails_collection_naming_test_and_id(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "STOMP-ERROR-CLOSE")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert ("test_cites.py::test_second: unknown requirement ID 'STOMP-ERROR-CLOSE' "
            "(not in the catalogue; did you mean STOMP-ERROR-CLOSES?)") in output
    assert "passed" not in output


def test_known_ids_run_and_become_junit_properties_and_allure_labels(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "AMQP-3.4.4-RELEASED-NO-COUNT", "--junitxml=junit.xml",
                        "--alluredir=allure", "-o", "junit_family=xunit1")
    assert result.returncode == 0, result.stdout + result.stderr
    cases = {case.get("name"): case for case in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    props = [(p.get("name"), p.get("value")) for p in cases["test_known"].iter("property")]
    assert ("requirement", "STOMP-ERROR-CLOSES") in props and ("requirement", "JMS-7.3.8-CALLBACK-ORDER") in props
    assert ("requirement.STOMP-ERROR-CLOSES.level", "MUST") in props
    results = [json.loads(p.read_text()) for p in (tmp_path / "allure").glob("*-result.json")]
    known = next(r for r in results if r["name"] == "test_known")
    labels = {(label["name"], label["value"]) for label in known["labels"]}
    assert {("story", "STOMP-ERROR-CLOSES"), ("story", "JMS-7.3.8-CALLBACK-ORDER"), ("feature", "stomp-frames"),
            ("feature", "jms-send-async"), ("epic", "STOMP 1.2"), ("epic", "Jakarta Messaging 3.1"),
            ("tag", "MUST")} <= labels
    assert any(link["url"].startswith("https://jakarta.ee/") for link in known["links"])


def test_cited_ids_accepts_lists_and_refuses_non_strings() -> None:
    class Item:
        nodeid = "t.py::x"

        def __init__(self, *args: object) -> None:
            self.marks = [pytest.mark.requirement(*args).mark]

        def iter_markers(self, name: str) -> list[pytest.Mark]:
            return self.marks

    assert cited_ids(Item("A-1", ["B-2", "A-1"])) == ["A-1", "B-2"]  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match=r"t\.py::x: requirement marker takes ID strings, got 7"):
        cited_ids(Item(7))  # type: ignore[arg-type]


def test_marker_module_is_loaded_by_the_plugin() -> None:
    plugin = Path(__file__).resolve().parents[2] / "src" / "ackspec" / "conformance" / "plugin.py"
    assert 'pytest_plugins = ["ackspec.conformance.markers"]' in plugin.read_text(encoding="utf-8")
