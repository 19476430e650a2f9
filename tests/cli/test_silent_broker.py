"""A broker that accepts the connection and then never answers: the run still ends, in bounded time.

Issue 16: against a broker that withholds frames the suite sat for minutes (every wait, and
every hypothesis shrink step, waited again). Every wait is bounded by ``--timeout``, so a run
against a silent broker must end with verdicts and a report in about (tests x timeout) at
worst, none of them a pass, every indeterminate one saying what it waited for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .silent_broker import silent_broker

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: ``tests.quality.mutants`` is importable from there."""

TIMEOUT = 0.5
SLACK = 2.0  # a test may wait a few times (connect, then a receipt), and the machine is shared
START_UP = 60.0  # interpreter, imports, the report


@pytest.mark.parametrize("scheme", ["stomp", "amqp"])
def test_a_silent_broker_gets_verdicts_and_a_report_in_bounded_time(tmp_path: Path, scheme: str) -> None:
    out = tmp_path / "run"
    with silent_broker() as broker:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "ackspec", "run", "--target", f"{scheme}://127.0.0.1:{broker.port}",
                               "--timeout", str(TIMEOUT), "--out", str(out)],
                              capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path)
        took = time.monotonic() - started
        assert broker.accepted > 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    tests = {t["test"] for t in results["tests"]}
    bound = len(tests) * TIMEOUT * SLACK + START_UP
    assert took < bound, f"{took:.0f} s for {len(tests)} tests at --timeout {TIMEOUT} (bound {bound:.0f} s)"
    assert done.returncode in (0, 1), done.stderr[-2000:]
    verdicts = {t["verdict"] for t in results["tests"]}
    assert "pass" not in verdicts and "indeterminate" in verdicts, verdicts
    for t in results["tests"]:
        if t["verdict"] == "indeterminate":
            assert t["message"], f"{t['requirement']} in {t['test']}: indeterminate without a reason"
    # a test whose very first connection times out has learnt nothing: never a fail (it was, for client ids)
    client_id = [t["verdict"] for t in results["tests"] if t["requirement"] == "JMS-6.1.2-CLIENT-ID-IN-USE"]
    assert client_id and set(client_id) <= {"indeterminate", "not-applicable"}, client_id
    assert (out / "report" / "report.json").is_file()
    # piped output: one full line per test while it runs, reasons on the indeterminate ones, no cut IDs
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == len(tests), done.stdout[-2000:]
    assert any("=indeterminate (" in ln for ln in lines)
    assert "…" not in done.stdout


def test_a_broker_that_never_sends_a_receipt_is_judged_without_shrinking_for_minutes(tmp_path: Path) -> None:
    """The reference broker built as the quality checks' no-receipt mutant: every receipt wait times out, a
    property test's failing example is reported as first found (with the seed), and the run stays within its bound."""
    out = tmp_path / "run"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ackspec", "run", "--target", "reference://embedded",
                           "--broker-parts", "tests.quality.mutants:no-receipt", "--timeout", str(TIMEOUT),
                           "--out", str(out), "--no-report"],
                          capture_output=True, text=True, timeout=900, check=False, cwd=ROOT)
    took = time.monotonic() - started
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    tests = {t["test"] for t in results["tests"]}
    bound = len(tests) * TIMEOUT * SLACK * 2 + START_UP  # a test may wait for several receipts
    assert took < bound, f"{took:.0f} s for {len(tests)} tests at --timeout {TIMEOUT} (bound {bound:.0f} s)"
    assert done.returncode == 1, done.stderr[-2000:]  # not conformant: receipts are a MUST
    assert results["extra"]["shrink"] is False
    receipts = [t for t in results["tests"] if t["verdict"] in ("fail", "indeterminate")]
    assert receipts and all(t["message"] for t in receipts)
    assert any("RECEIPT" in t["message"] for t in receipts)
