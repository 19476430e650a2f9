"""`ackspec run` is only clean when its report is: a loss the history check decides fails the run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ackspec.cli.run_cmd import _report
from ackspec.results import Verdict

from .test_intent import declared_left_not_flagged, undeclared_lost_is_decisive, write_run


def test_report_counts_a_cell_the_history_check_fails(tmp_path: Path) -> None:
    history, _ = undeclared_lost_is_decisive()
    run = write_run(tmp_path / "run", [(history, Verdict.PASS)])
    assert _report(Console(quiet=True), run.root) == 1


def test_report_counts_nothing_when_the_histories_are_clean(tmp_path: Path) -> None:
    history, _ = declared_left_not_flagged()
    run = write_run(tmp_path / "run", [(history, Verdict.PASS)])
    assert _report(Console(quiet=True), run.root) == 0
