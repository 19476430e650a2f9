"""``ackspec run`` at a real terminal (a pseudo-terminal): the live display, and Ctrl-C.

Issue 16: nothing showed until the run ended, and Ctrl-C could end in exit 0 with a
report that did not say the run was cut short. Here the run is watched while it runs
and interrupted as a user would (^C on the terminal) at each phase: before any test
finished (start-up and collection), mid-target, at a target's end (its results written,
its display still up: where a Ctrl-C once ended in exit 130 with no line at all, the
line gone into the captured output), while the next target starts, and while the run is
judged. Each moment is recognised on the screen or in the run directory, with a deadline.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .ptyrun import PtyRun

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
DONE_OF_TOTAL = re.compile(r"\b([1-9][0-9]*)/([0-9]+)\b")
COUNTS = re.compile(r"\b[1-9][0-9]* (pass|fail|deviation|stale|not-applicable|indeterminate|error)\b")
START_UP = 90.0  # seconds to the first test on a loaded 2-core machine (imports, the embedded broker)


def screen(run: PtyRun) -> str:
    return ANSI.sub("", run.text)


def finished_count(text: str) -> int:
    found = DONE_OF_TOTAL.findall(text)
    return int(found[-1][0]) if found else 0


def interrupted_line(run: PtyRun) -> str:
    """After a ^C: exit 130 soon (nothing, a broker thread or a proxy, kept the process alive) and
    exactly one ``ackspec: interrupted ...`` line on the terminal, never a traceback."""
    pressed = time.monotonic()
    assert run.wait(60) == 130, screen(run)[-2000:]
    assert time.monotonic() - pressed < 60
    text = screen(run)
    after = text[text.rindex("^C"):] if "^C" in text else text
    # the terminal echoes ^C, on the same line as our message or not: either is one line
    lines = [ln.strip().removeprefix("^C") for ln in after.replace("\r", "\n").splitlines()
             if ln.strip().removeprefix("^C").startswith("ackspec:")]
    assert len(lines) == 1 and lines[0].startswith("ackspec: interrupted") and "Traceback" not in text, after
    assert cursor_shown(run.text)
    return lines[0]


def cursor_shown(raw: str) -> bool:
    """Whether the terminal is left with its cursor showing: the live display hides it (DECTCEM off), so the
    last such sequence must show it again."""
    toggles = re.findall(r"\x1b\[\?25([hl])", raw)
    return not toggles or toggles[-1] == "h"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[list[PtyRun]]:
    runs: list[PtyRun] = []
    yield runs
    for run in runs:
        run.kill()


def test_the_live_display_shows_progress_while_the_tests_run(terminal: list[PtyRun], tmp_path: Path) -> None:
    run = PtyRun.start("run", "--target", "reference://embedded", "--only", "test_ack.py::*", "--out",
                       str(tmp_path / "run"), cwd=str(tmp_path))
    terminal.append(run)
    assert run.read_until(lambda t: finished_count(ANSI.sub("", t)) >= 1, START_UP), screen(run)[-2000:]
    live = screen(run)
    assert "requirements:" not in live, "the display came only with the final table"
    assert "reference (STOMP)" in live and "ETA" in live  # the target, an estimate of the time left
    assert COUNTS.search(live), live[-2000:]  # verdict counts so far
    assert run.wait(300) == 0, screen(run)[-2000:]
    assert "requirements:" in screen(run)


def test_ctrl_c_mid_run_exits_130_in_one_line_and_marks_the_run_interrupted(terminal: list[PtyRun],
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = PtyRun.start("run", "--out", str(out), cwd=str(tmp_path))
    terminal.append(run)
    assert run.read_until(lambda t: finished_count(ANSI.sub("", t)) >= 3, START_UP), screen(run)[-2000:]
    assert "reference (AMQP 1.0)" not in screen(run)  # the ^C comes during the first target
    run.interrupt()
    interrupted_line(run)
    results = json.loads((out / "reference-stomp" / "results.json").read_text(encoding="utf-8"))
    assert results["interrupted"] is True
    assert not (out / "reference-amqp").exists()  # the run stopped: the next target never started
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    assert [r["interrupted"] for r in report["runs"]] == [True]
    assert "Interrupted: partial results" in (out / "report" / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("gap", [0.0, 0.5, 2.0])
def test_a_second_ctrl_c_quits_and_gives_the_cursor_back(terminal: list[PtyRun], tmp_path: Path, gap: float) -> None:
    """A user pressing ^C twice, ``gap`` seconds apart, while the live display is up: whenever the second
    press lands (with the first, in the clean-up, or after it), exit 130, no traceback, and the cursor the
    display hid is shown again. The second quits without clean-up, so not even rich's stop runs then."""
    run = PtyRun.start("run", "--out", str(tmp_path / "run"), cwd=str(tmp_path))
    terminal.append(run)
    display_up = lambda t: finished_count(ANSI.sub("", t)) >= 1 and not cursor_shown(t)  # noqa: E731
    assert run.read_until(display_up, START_UP), screen(run)[-2000:]  # up, and it has hidden the cursor
    run.interrupt()
    run.read_until(lambda _: False, gap)  # the user's pause between the two presses, the terminal read meanwhile
    run.interrupt()
    assert run.wait(60) == 130, screen(run)[-2000:]
    text = screen(run)
    assert "Traceback" not in text and "ackspec: interrupted" in text, text[-2000:]
    assert cursor_shown(run.text), repr(run.text[-300:])


@pytest.mark.parametrize("delay", [1.0, 4.0])
def test_ctrl_c_before_any_verdict_exits_130_and_leaves_nothing(terminal: list[PtyRun], tmp_path: Path,
                                                               delay: float) -> None:
    """Start-up and collection: never a traceback, a usage error or exit 0, and no run directory."""
    out = tmp_path / "run"
    run = PtyRun.start("run", "--out", str(out), cwd=str(tmp_path))
    terminal.append(run)
    run.read_until(lambda t: finished_count(ANSI.sub("", t)) >= 1, delay)
    if finished_count(screen(run)) >= 1:
        pytest.skip("the machine was fast enough to finish a test before the interrupt")
    run.interrupt()
    assert run.wait(60) == 130, screen(run)[-2000:]
    text = screen(run)
    assert "Traceback" not in text and "could not run" not in text, text[-2000:]
    assert [ln for ln in text.replace("\r", "\n").splitlines() if "ackspec: interrupted" in ln]
    results = out / "reference-stomp" / "results.json"
    if results.exists():  # a test finished between the last screen refresh and the interrupt
        assert json.loads(results.read_text(encoding="utf-8"))["interrupted"] is True
    else:
        assert not out.exists()  # nothing ran: no run directory at all


SMALL = ("--only", "test_ack.py::*")  # a few tests on each target: the phases come within seconds


def stomp_results_written(out: Path) -> Callable[[str], bool]:
    """The first target's end: the suite writes its results at pytest's session finish, while the live
    display still shows and before the next target starts."""
    return lambda _: (out / "reference-stomp" / "results.json").exists()


def amqp_display_up(out: Path) -> Callable[[str], bool]:
    """The second target's start: its live display is up (collection done), its first test under way."""
    return lambda text: "reference (AMQP 1.0)" in ANSI.sub("", text)


def amqp_display_starting(out: Path) -> Callable[[str], bool]:
    """The second target's display starting: rich has hidden the cursor again, before its first frame."""
    return lambda text: text.count("\x1b[?25l") >= 2


@pytest.mark.parametrize("moment", [stomp_results_written, amqp_display_starting, amqp_display_up])
def test_ctrl_c_between_two_targets_marks_the_last_results_and_leaves_no_empty_folder(
        terminal: list[PtyRun], tmp_path: Path, moment: Callable[[Path], Callable[[str], bool]]) -> None:
    out = tmp_path / "run"
    run = PtyRun.start("run", *SMALL, "--out", str(out), cwd=str(tmp_path))
    terminal.append(run)
    assert run.read_until(moment(out), START_UP), screen(run)[-2000:]
    run.interrupt()
    line = interrupted_line(run)
    assert "partial results, marked interrupted" in line, line
    folders = sorted(p for p in out.iterdir() if p.name != "report")
    assert all((p / "results.json").exists() for p in folders), folders  # no folder of a target that never ran
    marks = [json.loads((p / "results.json").read_text(encoding="utf-8"))["interrupted"] for p in folders]
    order = ["reference-stomp", "reference-amqp", "client-reference"]
    last = max(folders, key=lambda p: order.index(p.name))
    assert marks[folders.index(last)] is True, (folders, marks)  # the report will say partial
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    assert any(r["interrupted"] for r in report["runs"]), report["runs"]


def test_ctrl_c_while_the_run_is_judged_removes_the_half_built_report(terminal: list[PtyRun],
                                                                      tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = PtyRun.start("run", *SMALL, "--out", str(out), cwd=str(tmp_path))
    terminal.append(run)
    assert run.read_until(lambda t: "building the report" in t, 3 * START_UP), screen(run)[-2000:]
    run.interrupt()
    if run.wait(60) == 0:
        pytest.skip("the report was built before the interrupt arrived")
    line = interrupted_line(run)
    assert "report not built" in line, line
    assert not (out / "report").exists()
    folders = [p for p in out.iterdir()]
    assert folders and all((p / "results.json").exists() for p in folders), folders
    # every test ran: the verdicts are complete, so they are not marked partial
    assert not any(json.loads((p / "results.json").read_text(encoding="utf-8"))["interrupted"] for p in folders)
