"""The command line's errors are one line (issue 16, point 8), and its help is plain text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ackspec.cli import build_parser


def ackspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ackspec", *args], capture_output=True, text=True, timeout=300,
                          check=False, cwd=cwd)


@pytest.mark.parametrize(("args", "expected"), [
    (("run", "--out", "/proc/forbidden/run"), "cannot write the run directory /proc/forbidden/run"),
    (("run", "--only", "NOSUCH-*"), "no test or requirement matches --only 'NOSUCH-*'"),
    (("run", "--target", "stomp://nosuch.invalid:61613"), "cannot resolve host 'nosuch.invalid'"),
])
def test_a_run_that_cannot_happen_says_why_in_one_line_and_leaves_nothing(tmp_path: Path, args: tuple[str, ...],
                                                                         expected: str) -> None:
    done = ackspec(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()] and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "ackspec-out").exists()  # no run directory of a run that never ran


def test_a_dry_run_writes_no_run_directory(tmp_path: Path) -> None:
    done = ackspec("run", "--dry-run", "--only", "STOMP-ACK-AUTO", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "reference (STOMP): " in done.stdout and "reference (AMQP 1.0): " in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_help_is_plain_text_and_the_broker_names_both_protocols() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "broker" in a.choices)
    for name, sub in subparsers.choices.items():
        assert "``" not in sub.format_help() and ":mod:" not in sub.format_help(), name
    broker = subparsers.choices["broker"].format_help()
    assert "STOMP" in broker and "AMQP 1.0" in broker
    assert "61613" not in broker.split("--stomp HOST:PORT", 2)[-1].split("--amqp")[0]  # not a real broker's port
