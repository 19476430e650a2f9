"""The soak benchmark's crash part in CI's slow set (issue 20): 50 SIGKILL cycles of a standalone broker
under receipted persistent sends, then one more start: no receipted message lost, nothing never sent.
About a minute and a half here; the seed is printed by the benchmark and kept in the failure message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"


@pytest.mark.slow
def test_no_receipted_message_is_lost_over_50_sigkill_cycles() -> None:
    proc = subprocess.run([sys.executable, str(SOAK), "kill", "--cycles", "50"], check=False,
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["lost"] == 0 and result["never_sent"] == 0 and result["cycles"] == 50
    assert result["receipted"] > 1000, result  # the cycles did send: a kill was never before the first receipt


@pytest.mark.slow
def test_every_intact_record_after_journal_damage_is_kept_or_refused() -> None:
    proc = subprocess.run([sys.executable, str(SOAK), "damage", "--cases", "200"], check=False,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["silently_dropped"] == 0
