"""The client-test table of docs/client-conformance.md is generated and current (it was hand-kept once and
went stale: old test ids, no JMSContext cases)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ackspec.cli.client_tests_doc import BEGIN, END, group, render, replace_section
from ackspec.errors import AckspecError

DOC = Path(__file__).resolve().parents[2] / "docs" / "client-conformance.md"


def _check(doc: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ackspec", "spec", "client-tests", "--check", "--out", str(doc)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_committed_table_matches_the_collected_client_suite() -> None:
    done = _check(DOC)
    assert done.returncode == 0, done.stderr


def test_a_stale_table_fails_the_check(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    stale = tmp_path / "doc.md"
    stale.write_text(text.replace("| jms_send: sync_send_returns_only_after_confirmation |",
                                  "| jms_send: an_old_test_id |", 1), encoding="utf-8")
    assert stale.read_text(encoding="utf-8") != text
    done = _check(stale)
    assert done.returncode == 1 and "out of date" in done.stderr


def test_cases_are_grouped_under_their_test_and_citations_merged() -> None:
    items = [("src/ackspec/conformance/client/test_jms_send.py::test_close[producer]", ["A-1"]),
             ("src/ackspec/conformance/client/test_jms_send.py::test_close[context]", ["A-1", "B-2"]),
             ("src/ackspec/conformance/client/test_close_rules.py::test_other", ["C-3"])]
    rows = group(items)
    assert [(r.module, r.name, r.cases, r.requirements) for r in rows] == [
        ("jms_send", "close", ["producer", "context"], ["A-1", "B-2"]), ("close_rules", "other", [], ["C-3"])]
    assert "| jms_send: close | `producer`, `context` | A-1, B-2 |" in render(rows)


def test_only_the_marked_section_is_replaced() -> None:
    document = f"before\n{BEGIN}\nold\n{END}\nafter\n"
    assert replace_section(document, f"{BEGIN}\nnew\n{END}") == f"before\n{BEGIN}\nnew\n{END}\nafter\n"
    with pytest.raises(AckspecError, match="no section"):
        replace_section("no markers\n", "x")
