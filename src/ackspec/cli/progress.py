"""Live progress of ``ackspec run`` while pytest runs the suite.

pytest's own output is captured (``ackspec run`` shows its own table at the end), so
without this plugin a run shows nothing until it ends, and a slow or silent broker looks
like a hang. Two forms, chosen by whether the output is a terminal:

* a terminal gets a rich live display, refreshed by rich's own thread so it moves even
  while a test waits out its timeout: the test running now and for how long, tests done
  of the total, verdict counts so far, elapsed time and an estimate of the time left;
* anything else (a pipe, a CI log) gets one plain, complete line per finished test:
  position, verdict, node id, duration, the requirement IDs in full, and the reason of
  every verdict that is not a pass. Nothing is cut to a terminal's width.

Verdicts are read from the suite's session plugin (``ackspec-suite``) after each test, so
the counts are the conformance verdicts, not pytest's pass/fail.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from ackspec.cli.interruption import sigint_deferred
from ackspec.results import Verdict, combine

SUITE_PLUGIN = "ackspec-suite"


def verdict_counts(counts: Counter[Verdict]) -> str:
    """``3 pass, 1 indeterminate``: the counts so far, worst verdicts last as they matter most."""
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: kv[0].value)) or "no verdict yet"


def plain_line(position: int, total: int, nodeid: str, verdicts: Sequence[Any], duration: float) -> str:
    """One finished test as a full line for logs: no truncation, reasons of every non-pass verdict."""
    worst = combine(v.verdict for v in verdicts) if verdicts else None
    width = len(str(total))
    head = f"[{position:>{width}}/{total}] {worst or 'not run':<14} {nodeid} ({duration:.2f} s)"
    parts = []
    for v in verdicts:
        if v.verdict is Verdict.PASS:
            parts.append(v.requirement)
        else:
            reason = " ".join((v.message or "").split())
            parts.append(f"{v.requirement}={v.verdict}" + (f" ({reason})" if reason else ""))
    return f"{head}  {'; '.join(parts)}" if parts else head


class LiveProgress:
    """pytest plugin: the live display (terminal) or plain lines (anything else) of one target's run."""

    def __init__(self, stream: TextIO, label: str, *, live: bool) -> None:
        self.stream = stream
        self.label = label
        self.live = live
        self.total = 0
        self.done = 0
        self.counts: Counter[Verdict] = Counter()
        self.collected: list[tuple[str, list[str]]] = []  # node id, cited requirements
        self._suite: Any = None
        self._started: dict[str, float] = {}
        self._progress: Any = None
        self._task: Any = None

    # -- pytest hooks ----------------------------------------------------------------------------

    def pytest_collection_finish(self, session: Any) -> None:
        from ackspec.conformance.session import requirements_of  # noqa: PLC0415

        self._suite = session.config.pluginmanager.get_plugin(SUITE_PLUGIN)
        self.collected = [(item.nodeid, requirements_of(item)) for item in session.items]
        self.total = len(session.items)
        if session.config.option.collectonly or not self.total:
            return
        if self.live:
            self._start_live()
        else:
            self._write(f"{self.label}: {self.total} tests")

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._started[nodeid] = time.monotonic()
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self.label}  {_short(nodeid)}")

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.done += 1
        verdicts = self._verdicts(nodeid)
        if verdicts:
            self.counts[combine(v.verdict for v in verdicts)] += 1
        duration = time.monotonic() - self._started.pop(nodeid, time.monotonic())
        if self._progress is not None:
            self._progress.update(self._task, advance=1, counts=verdict_counts(self.counts))
        else:
            self._write(plain_line(self.done, self.total, nodeid, verdicts, duration))

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        self.stop()

    # -- display ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """End the live display (idempotent; also called when the run is interrupted). Start and stop each
        run whole, with SIGINT deferred: a Ctrl-C inside rich's start left a display its stop could not
        undo (``IndexError`` in ``pop_render_hook``, a traceback and exit 1) and the cursor hidden."""
        progress, self._progress = self._progress, None
        if progress is not None:
            with sigint_deferred():
                progress.stop()

    def _start_live(self) -> None:
        """Start rich's live display, leaving ``sys.stdout``/``sys.stderr`` alone: by default rich swaps them
        for proxies and, when stopped, puts back what it found. It starts inside pytest's captured
        run, so a display stopped after a Ctrl-C escaped pytest put the capture's sink back in place
        of the terminal, and ``ackspec: interrupted ...`` went into the sink (exit 130, no line). pytest's
        output is captured anyway: nothing needs printing above the bar."""
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(file=self.stream)
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=console, transient=True, refresh_per_second=4, redirect_stdout=False, redirect_stderr=False)
        self._task = self._progress.add_task(self.label, total=self.total, counts=verdict_counts(self.counts))
        with sigint_deferred():
            self._progress.start()

    def _verdicts(self, nodeid: str) -> list[Any]:
        states = getattr(self._suite, "states", {})
        state = states.get(nodeid)
        return list(state.verdicts) if state is not None else []

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def _short(nodeid: str) -> str:
    """The test's file and name (the package path adds nothing on a terminal line)."""
    return nodeid.rsplit("/", 1)[-1]
