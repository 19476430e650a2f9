"""Users file and authentication policy, shared by the STOMP and AMQP (SASL PLAIN) hosts.

Users file format: one ``login:passcode`` per line (the first colon separates them);
blank lines and lines starting with ``#`` are ignored.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from pathlib import Path

from ackspec.errors import AckspecError


def load_users(path: str | Path) -> dict[str, str]:
    """Read a users file; a malformed file raises :class:`AckspecError` naming the line."""
    users: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise AckspecError(f"cannot read users file {path}: {exc.strerror}") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        login, sep, passcode = line.partition(":")
        if not sep or not login:
            raise AckspecError(f"{path}:{n}: expected 'login:passcode'")
        users[login] = passcode
    return users


@dataclass(frozen=True)
class Authenticator:
    """``users``: known logins; ``allow_anonymous``: accept connections without a login."""

    users: dict[str, str] = field(default_factory=dict)
    allow_anonymous: bool = True

    def check(self, login: str | None, passcode: str | None) -> str | None:
        """``None`` when accepted, else the reason for refusing."""
        if login is None or login == "":
            return None if self.allow_anonymous else "authentication required (anonymous access is disabled)"
        expected = self.users.get(login)
        if expected is None:
            if self.allow_anonymous and not self.users:
                return None  # no users configured: any login is accepted, as an anonymous one
            return "authentication failed: unknown login or wrong passcode"
        if not hmac.compare_digest(expected.encode(), (passcode or "").encode()):
            return "authentication failed: unknown login or wrong passcode"
        return None
