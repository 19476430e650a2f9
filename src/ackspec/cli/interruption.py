"""Ctrl-C during ``ackspec run``: remembered, so an interrupted run is never taken for a finished one.

pytest turns a ``KeyboardInterrupt`` into exit status 2, the same number as other
failures, and still writes the partial results; depending on where the signal lands it
may also surface as a usage error or a collection error. So the run command does not
guess from pytest's status: :class:`InterruptWatch` installs its own SIGINT handler for
the run, which records the interruption and raises ``KeyboardInterrupt`` as Python's
default handler would (so pytest stops and cleans up: fixtures, the embedded broker).

A second Ctrl-C while that clean-up runs quits at once (exit 130): never ignored.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

INTERRUPTED_EXIT = 130
"""128 + SIGINT, what shells report for a command stopped by Ctrl-C."""


class InterruptWatch:
    """Context manager: SIGINT sets :attr:`interrupted` and raises ``KeyboardInterrupt`` once."""

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is threading.main_thread():
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

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted:
            sys.stderr.write("ackspec: interrupted again: quitting now\n")
            sys.stderr.flush()
            os._exit(INTERRUPTED_EXIT)
        self.interrupted = True
        raise KeyboardInterrupt
