"""Users file and authentication policy, shared by the STOMP and AMQP (SASL PLAIN) hosts.

Users file format: one ``login:passcode`` per line (the first colon separates them);
blank lines and lines starting with ``#`` are ignored.

The :class:`Authenticator` also carries what the hosts need to authorise (:mod:`.acl`: the ACL and the
owners of client ids) and the backoff after failed logins (:mod:`.throttle`).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ackspec.errors import AckspecError
from ackspec.reference.broker.acl import Acl, ClientIdOwners
from ackspec.reference.broker.throttle import LoginThrottle


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
    """``users``: known logins; ``allow_anonymous``: accept connections without a login; ``acl``: who may
    do what where (None: everyone everything); ``owners``: the logins client ids are tied to."""

    users: dict[str, str] = field(default_factory=dict)
    allow_anonymous: bool = True
    acl: Acl | None = None
    owners: ClientIdOwners = field(default_factory=ClientIdOwners)
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    clock: Callable[[], float] = time.monotonic

    def check(self, login: str | None, passcode: str | None) -> str | None:
        """``None`` when accepted, else the reason for refusing."""
        if login is None or login == "":
            return None if self.allow_anonymous else "authentication required (anonymous access is disabled)"
        expected = self.users.get(login)
        if expected is None and self.allow_anonymous and not self.users:
            return None  # no users configured: any login is accepted, as an anonymous one
        now = self.clock()
        wait = self.throttle.wait(login, now)
        if wait > 0:
            return f"authentication failed: too many failed attempts for this login, retry in {wait:.1f} s"
        if expected is None or not hmac.compare_digest(expected.encode(), (passcode or "").encode()):
            self.throttle.failed(login, now)
            return "authentication failed: unknown login or wrong passcode"
        self.throttle.succeeded(login)
        return None

    @property
    def logins_matter(self) -> bool:
        """Whether a login proves who is connecting (a users file is in use)."""
        return bool(self.users)

    def permits(self, login: str | None, permission: str, destination: str) -> bool:
        """May ``login`` ``permission`` (read, write, admin) ``destination``?"""
        return self.acl is None or self.acl.permits(login, permission, destination)

    def client_id_refusal(self, client_id: str | None, login: str | None) -> str | None:
        """Why ``login`` may not connect with ``client_id`` (None: it may)."""
        if client_id is None or not self.logins_matter:
            return None
        return self.owners.refusal(client_id, login)

    def durable_held(self, client_id: str, login: str | None) -> None:
        """``login`` holds a durable subscription under ``client_id``: tie the client id to it."""
        if self.logins_matter:
            self.owners.claim(client_id, login)
