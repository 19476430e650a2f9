"""The generated Markdown catalogue: deterministic, complete, and the committed copy is current."""

from __future__ import annotations

from pathlib import Path

from ackspec.spec import clear_cache, load_catalogue
from ackspec.spec.citations import citations_in_source
from ackspec.spec.markdown import render

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "catalogue.md"


def test_render_is_deterministic() -> None:
    first = render(load_catalogue())
    clear_cache()
    assert render(load_catalogue()) == first


def test_render_has_every_family_and_requirement() -> None:
    catalogue = load_catalogue()
    text = render(catalogue)
    for family in catalogue.families.values():
        assert f"## {family.title}\n" in text
    for req in catalogue:
        assert f"### {req.id}\n" in text
    assert "| `batch_factor` | number | 0.65 |" in text


def test_committed_docs_are_current() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render(load_catalogue()), (
        "docs/catalogue.md is stale: run 'ackspec spec docs'")


def test_citation_scan_forms() -> None:
    source = (
        "import pytest\n"
        "from ackspec.conformance import markers\n"
        "@pytest.mark.requirement('A-1', 'B-2')\n"
        "@markers.requirement(*['C-3'])\n"
        "def test_x(): ...\n"
        "pytestmark = [pytest.mark.requirement(('D-4',))]\n"
        "requirement(ID)  # not a literal: not seen\n"
        "other('E-5')\n"
    )
    found = citations_in_source(source, Path("t.py"))
    assert [(c.requirement, c.line) for c in found] == [("A-1", 3), ("B-2", 3), ("C-3", 4), ("D-4", 6)]
    assert citations_in_source("def broken(:\n", Path("bad.py")) == []


def test_citation_scan_follows_module_constants() -> None:
    source = (
        "import pytest\n"
        "ONE = 'A-1'\n"
        "MANY = (ONE, 'B-2')\n"
        "TWICE = 'C-3'\n"
        "TWICE = 'D-4'  # bound twice: not followed\n"
        "@pytest.mark.requirement(*MANY, TWICE, 'E-5')\n"
        "def test_x(): ...\n"
    )
    assert [c.requirement for c in citations_in_source(source, Path("t.py"))] == ["A-1", "B-2", "E-5"]


def test_citation_scan_tells_hypothesis_tests() -> None:
    """A cited function that calls given() or runs a state machine, or a state machine class, is a
    hypothesis test; an example test and a module's pytestmark are not."""
    source = (
        "import pytest\n"
        "from hypothesis import given\n"
        "from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test\n"
        "pytestmark = pytest.mark.requirement('M-0')\n"
        "@pytest.mark.requirement('A-1')\n"
        "def test_example(): ...\n"
        "@pytest.mark.requirement('B-2')\n"
        "def test_property(harness):\n"
        "    @given(x=st.integers())\n"
        "    def inner(x): ...\n"
        "@pytest.mark.requirement('C-3')\n"
        "def test_machine(harness):\n"
        "    run_state_machine_as_test(Machine)\n"
        "@pytest.mark.requirement('D-4')\n"
        "class TestMachine(RuleBasedStateMachine): ...\n"
    )
    found = {c.requirement: c.hypothesis for c in citations_in_source(source, Path("t.py"))}
    assert found == {"M-0": False, "A-1": False, "B-2": True, "C-3": True, "D-4": True}
