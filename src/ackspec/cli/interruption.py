"""Ctrl-C during ``ackspec run``: remembered, so an interrupted run is never taken for a finished one.

pytest turns a ``KeyboardInterrupt`` into exit status 2, the same number as other
failures, and still writes the partial results; depending on where the signal lands it
may also surface as a usage error or a collection error. So the run command does not
guess from pytest's status: :class:`InterruptWatch` installs its own SIGINT handler for
the run, which records the interruption and raises ``KeyboardInterrupt`` as Python's
default handler would (so pytest stops and cleans up: fixtures, the embedded broker).

A second Ctrl-C while that clean-up runs quits at once (exit 130): never ignored, and the
terminal is left with its cursor showing. The live display's start and stop run with the
interrupt deferred (:func:`sigint_deferred`): rich cannot stop a display whose start a Ctrl-C
cut short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, NoReturn

INTERRUPTED_EXIT = 130
"""128 + SIGINT, what shells report for a command stopped by Ctrl-C."""


class InterruptWatch:
    """Context manager: SIGINT sets :attr:`interrupted` and raises ``KeyboardInterrupt`` once."""

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None
        self._installed = False
        self._terminal = (1, 2)  # stdout, stderr as they were when the watch began

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is threading.main_thread():
            self._terminal = (os.dup(1), os.dup(2))  # pytest's capture replaces fds 1 and 2 while it runs
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if isinstance(exc, KeyboardInterrupt):
            self.interrupted = True
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
            for fd in self._terminal:
                os.close(fd)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted:
            quit_now(*self._terminal)
        self.interrupted = True
        if _DEFERRAL.depth:
            _DEFERRAL.pending = True
            return
        raise KeyboardInterrupt


SHOW_CURSOR = b"\x1b[?25h"
"""The terminal control that shows the cursor (DECTCEM), what rich writes when a live display stops."""


def quit_now(out: int, err: int) -> NoReturn:
    """Exit 130 at once, from a signal handler: one line, and the cursor a live display hid shown again.

    Written with ``os.write`` to the descriptors of the user's terminal as they were before pytest's
    capture replaced 1 and 2, rather than through rich or ``sys.stderr``: a handler must not use a
    buffered stream the interrupted code may be inside (Python raises "reentrant call"), and while pytest
    runs, ``sys.stderr`` and fd 2 are its capture."""
    os.write(err, b"ackspec: interrupted again: quitting now\n")
    if os.isatty(out):
        os.write(out, SHOW_CURSOR)
    os._exit(INTERRUPTED_EXIT)


@dataclass
class _Deferral:
    depth: int = 0
    pending: bool = False


_DEFERRAL = _Deferral()


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """A Ctrl-C during the block raises its ``KeyboardInterrupt`` at the block's end, for steps it must not
    cut in half (rich's display, half started, cannot be stopped). A second Ctrl-C still quits at once.

    Deferred in Python, by the handler :class:`InterruptWatch` installs, not by masking the signal: a
    mask holds only for the thread that sets it, and the kernel hands SIGINT to any other (rich's refresh
    thread, the embedded broker's), whose C handler wakes the main thread's Python handler anyway."""
    _DEFERRAL.depth += 1
    try:
        yield
    finally:
        _DEFERRAL.depth -= 1
    if not _DEFERRAL.depth and _DEFERRAL.pending:
        _DEFERRAL.pending = False
        raise KeyboardInterrupt
