"""Errors that reach the user as one readable line and an exit code, never a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class AckspecError(Exception):
    """A problem the user can fix: bad argument, bad file, nothing listening. Exit code 2."""

    exit_code = 2


class ConformanceFailure(AckspecError):
    """The target is not conformant. Exit code 1."""

    exit_code = 1


@contextlib.contextmanager
def one_line(*kinds: type[Exception], prefix: str = "", suffix: str = "") -> Iterator[None]:
    """Turn the listed exceptions into :class:`AckspecError`: the one line (and exit code 2) the user gets
    when a check before a run fails (a bad profile, a client that cannot be built, nothing listening)."""
    try:
        yield
    except kinds as exc:
        raise AckspecError(f"{prefix}{exc}{suffix}") from exc
