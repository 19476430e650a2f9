"""Errors that reach the user as one readable line and an exit code, never a traceback."""

from __future__ import annotations


class AckspecError(Exception):
    """A problem the user can fix: bad argument, bad file, nothing listening. Exit code 2."""

    exit_code = 2


class ConformanceFailure(AckspecError):
    """The target is not conformant. Exit code 1."""

    exit_code = 1
