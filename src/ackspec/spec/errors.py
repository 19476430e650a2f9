"""Errors of the requirement catalogue and target profiles: one readable line each.

Every message names the file and the field (``jms-ack.yaml:41: requirements[3].level: ...``) so
that a user can fix the data without reading a traceback. Both are
:class:`ackspec.errors.AckspecError`, so the CLI prints them as ``ackspec: <message>`` with exit 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ackspec.errors import AckspecError


class SpecError(AckspecError):
    """The catalogue or a profile is malformed, inconsistent, or asked for something it lacks."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class UnknownRequirement(SpecError, KeyError):
    """A requirement ID that is not in the catalogue (a typo in a citation, a profile or the CLI)."""

    def __init__(self, requirement_id: str, known: Iterable[str] = (), *, where: str = "") -> None:
        self.requirement_id = requirement_id
        close = difflib.get_close_matches(requirement_id, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}unknown requirement ID {requirement_id!r} (not in the catalogue{hint})")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnknownFamily(SpecError):
    """A family id that no catalogue file declares."""

    def __init__(self, family: str, known: Iterable[str]) -> None:
        self.family = family
        super().__init__(f"unknown family {family!r} (known: {', '.join(sorted(known))})")
