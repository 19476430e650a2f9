"""Fault injection for the reference broker: legal-but-hostile behaviour, for testing client libraries.

A :class:`FaultRule` is switched on per destination (``fnmatch`` pattern) and/or per connection
(connection id or login). It makes client-side rules observable: delayed or withheld receipts, a
SEND rejected with ERROR, the connection dropped after N frames, delayed or duplicated
(``redelivered:true``) deliveries, a failed commit, and *confirmation policies* for publish windows
(see :class:`ConfirmPolicy`). The broker stays correct: every fault is something a conformant broker
may do. (A broker that is *wrong* on purpose, to prove the suite catches a bug, is not built here but
from outside, in the suite's quality checks: see :mod:`ackspec.reference.parts`.)

Confirmation policies and their STOMP mapping (receipts on SEND):

* ``immediate`` (default): a RECEIPT as soon as the SEND is processed (durable if asked).
* ``delay``: every RECEIPT is held ``delay`` seconds.
* ``batch``: RECEIPTs for SENDs are withheld until ``ceil(window/3)`` of them are pending
  or ``timeout`` seconds passed since the oldest; then only the RECEIPT of the *latest*
  SEND is sent: a STOMP receipt acknowledges every earlier frame cumulatively (Solace
  publish-window acknowledgement).
* ``nack``: chosen SENDs (every ``nack_every``-th matching SEND, or any SEND carrying the
  header ``ackspec-nack:true``) are negatively acknowledged *without* closing the
  connection: the message is discarded and its receipt is a ``RECEIPT`` with headers
  ``ackspec-nack:true`` and ``message:<reason>``. (``reject_send`` instead answers with a
  fatal ERROR, as STOMP 1.2 requires for a SEND the server cannot process.)

The interface, in process: ``rule_id = broker.faults.add(FaultRule(...))``,
``broker.faults.remove(rule_id)``, ``broker.faults.clear()``, ``broker.faults.snapshot()``. The same as
JSON over the control API (``BrokerServer.control_request`` in :mod:`ackspec.reference.server`; off
unless ``--control`` is given): ``FaultRule`` fields by name. The broker asks
:meth:`FaultInjector.rules_for` and :meth:`FaultInjector.confirm_policy`. docs/fault-injection.md
describes each fault and which client-side rules it makes observable.
"""

from __future__ import annotations

import fnmatch
import itertools
import threading
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

CONFIRM_POLICIES: Final = frozenset({"immediate", "delay", "batch", "nack"})


@dataclass(frozen=True)
class ConfirmPolicy:
    """How SEND receipts are returned (see the module docstring)."""

    mode: str = "immediate"
    delay: float = 0.0
    window: int = 3
    timeout: float = 1.0
    nack_every: int = 0

    def __post_init__(self) -> None:
        if self.mode not in CONFIRM_POLICIES:
            raise ValueError(f"unknown confirm policy {self.mode!r}; one of {sorted(CONFIRM_POLICIES)}")

    @property
    def batch_size(self) -> int:
        return max(1, -(-self.window // 3))


@dataclass(frozen=True)
class FaultRule:
    """One fault, applied to frames whose destination and connection match.

    ``destination`` / ``connection``: ``fnmatch`` patterns (``None`` = any). ``connection``
    matches the connection id or the login. ``times``: apply at most this many times.
    """

    destination: str | None = None
    connection: str | None = None
    receipt_delay: float = 0.0
    withhold_receipts: bool = False
    reject_send: str | None = None
    drop_after_frames: int | None = None
    """Close the connection abruptly once it sent this many frames (CONNECT included)."""
    delivery_delay: float = 0.0
    duplicate_delivery: bool = False
    confirm: ConfirmPolicy | None = None
    times: int | None = None
    fail_commit: str | None = None
    """Fail matching commits with this reason; the connection stays open. Over STOMP the broker aborts
    the transaction instead of a COMMIT and answers with a negative RECEIPT (``ackspec-nack:true``,
    ``message``); over AMQP a discharge that would commit rolls back and is rejected with
    ``amqp:transaction:rollback``."""

    @staticmethod
    def from_json(data: dict[str, Any]) -> FaultRule:
        known = {f.name for f in fields(FaultRule)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault rule field(s): {', '.join(sorted(unknown))}")
        kwargs = dict(data)
        if isinstance(kwargs.get("confirm"), dict):
            kwargs["confirm"] = ConfirmPolicy(**kwargs["confirm"])
        return FaultRule(**kwargs)

    def matches(self, destination: str | None, conn: str | None, login: str | None = None) -> bool:
        if self.destination is not None and (destination is None or not fnmatch.fnmatchcase(destination,
                                                                                              self.destination)):
            return False
        return self.connection is None or (
            (conn is not None and fnmatch.fnmatchcase(conn, self.connection))
            or (login is not None and fnmatch.fnmatchcase(login, self.connection))
        )


class FaultInjector:
    """The live fault configuration of one broker. Thread-safe to change from tests.

    Readers (the broker's event loop) see immutable snapshots that are swapped atomically.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._rules: tuple[tuple[int, FaultRule], ...] = ()
        self._uses: dict[int, int] = {}
        self.version = 0
        """Incremented on every change (hosts may cache per version)."""
        self.active = False
        """Any rule installed (a plain attribute: checked on the hot path)."""

    # ------------------------------------------------------------ configuration
    def add(self, rule: FaultRule) -> int:
        """Install ``rule``; returns its id (for :meth:`remove`)."""
        with self._lock:
            rid = next(self._ids)
            self._rules = (*self._rules, (rid, rule))
            self._changed()
            return rid

    def remove(self, rule_id: int) -> None:
        with self._lock:
            self._rules = tuple(r for r in self._rules if r[0] != rule_id)
            self._changed()

    def clear(self) -> None:
        """Remove every rule."""
        with self._lock:
            self._rules = ()
            self._uses = {}
            self._changed()

    def snapshot(self) -> dict[str, Any]:
        """The configuration as JSON-able data (control API ``GET /faults``)."""
        return {
            "rules": [{"id": rid, **asdict(rule)} for rid, rule in self._rules],
        }

    def _changed(self) -> None:
        self.version += 1
        self.active = bool(self._rules)

    # ------------------------------------------------------------ queries (broker side)
    def rules_for(self, destination: str | None, conn: str | None, login: str | None = None) -> list[FaultRule]:
        """Matching rules, counting one use each (rules with ``times`` expire)."""
        rules = self._rules
        if not rules:
            return []
        out: list[FaultRule] = []
        for rid, rule in rules:
            if not rule.matches(destination, conn, login):
                continue
            if rule.times is not None:
                with self._lock:
                    used = self._uses.get(rid, 0)
                    if used >= rule.times:
                        continue
                    self._uses[rid] = used + 1
            out.append(rule)
        return out

    def confirm_policy(
        self, destination: str | None, conn: str | None, login: str | None = None
    ) -> ConfirmPolicy | None:
        for _rid, rule in self._rules:
            if rule.confirm is not None and rule.matches(destination, conn, login):
                return rule.confirm
        return None
