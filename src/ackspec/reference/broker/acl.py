"""Authorisation: who may do what to which destination, and who owns a client id (sans-IO).

ACL file (``ackspec broker --acl FILE``), one rule a line, ``#`` comments and blank lines ignored::

    # destination pattern   permissions        logins
    /queue/orders.*         read,write         alice,bob
    /queue/DLQ              read               ops
    /topic/prices           read,admin         alice
    /queue/public.*         read,write         *

Patterns are shell-style (``fnmatch``, case-sensitive); ``*`` in the logins column is every login,
anonymous included. Once an ACL is given, whatever no rule allows is refused. Permissions:

* ``read``: subscribe to (STOMP SUBSCRIBE, AMQP attach of a link the broker sends on) the destination,
  the dead-letter queue included;
* ``write``: send to it (STOMP SEND, AMQP transfer, also through the anonymous relay);
* ``admin``: create a durable subscription on it (storage the broker keeps for an absent consumer, as
  ActiveMQ asks of durable subscribers).

Client ids: a durable subscription belongs to a client id, so a client id is tied to the login that first
held a durable subscription under it (:class:`ClientIdOwners`, kept in ``client-ids.json`` in the data
directory): another login may not connect with it, so it can neither read the subscription nor lock its
owner out. This applies only when logins mean something (a users file is given).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ackspec.errors import AckspecError

PERMISSIONS = ("read", "write", "admin")
ANYONE = "*"


@dataclass(frozen=True)
class Rule:
    pattern: str
    permissions: frozenset[str]
    logins: frozenset[str]

    def allows(self, login: str, permission: str, destination: str) -> bool:
        return (permission in self.permissions and (ANYONE in self.logins or login in self.logins)
                and fnmatchcase(destination, self.pattern))


@dataclass
class Acl:
    """Rules from an ACL file; :meth:`permits` answers (cached: destinations repeat)."""

    rules: list[Rule] = field(default_factory=list)
    _cache: dict[tuple[str, str, str], bool] = field(default_factory=dict, repr=False)

    def permits(self, login: str | None, permission: str, destination: str) -> bool:
        key = (login or "", permission, destination)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed = any(r.allows(key[0], permission, destination) for r in self.rules)
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[key] = allowed
        return allowed


def load_acl(path: str | Path) -> Acl:
    """Read an ACL file; a malformed line raises :class:`AckspecError` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise AckspecError(f"cannot read ACL file {path}: {exc.strerror}") from None
    return Acl(parse_acl(text, str(path)))


def parse_acl(text: str, origin: str = "ACL") -> list[Rule]:
    rules = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 3:
            raise AckspecError(f"{origin}:{n}: expected 'PATTERN PERMISSIONS LOGINS', got {line!r}")
        pattern, perms, logins = fields
        permissions = frozenset(p for p in perms.split(",") if p)
        unknown = permissions - set(PERMISSIONS)
        if unknown or not permissions:
            raise AckspecError(f"{origin}:{n}: unknown permission(s) {sorted(unknown) or perms!r} "
                               f"(read, write, admin)")
        rules.append(Rule(pattern, permissions, frozenset(x for x in logins.split(",") if x)))
    return rules


class ClientIdOwners:
    """Which login owns which client id (see the module docstring); persisted when given a file."""

    def __init__(self) -> None:
        self.owners: dict[str, str] = {}
        self.path: Path | None = None

    def load(self, path: Path) -> None:
        """Use ``path`` (read it if it exists) to keep ownership across restarts."""
        self.path = path
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AckspecError(f"cannot read client id owners {path}: {exc}") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise AckspecError(f"{path}: expected a JSON object of client id -> login")
        self.owners = dict(data)

    def refusal(self, client_id: str, login: str | None) -> str | None:
        """Why ``login`` may not use ``client_id`` (None: it may)."""
        owner = self.owners.get(client_id)
        if owner is None or owner == (login or ""):
            return None
        return f"client id {client_id!r} belongs to another login"

    def claim(self, client_id: str, login: str | None) -> None:
        """``login`` holds a durable subscription under ``client_id``: it owns it from now on."""
        if not login or self.owners.get(client_id) == login:
            return
        self.owners[client_id] = login
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.owners, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
