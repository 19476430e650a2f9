"""Fault injection for the reference broker: faults for testing clients, and mutants.

Two kinds of misbehaviour, both switched on per destination (``fnmatch`` pattern) and/or
per connection (connection id or login):

* **Faults** (:class:`FaultRule`) are legal-but-hostile broker behaviour that makes
  client-side rules observable: delayed or withheld receipts, a SEND rejected with ERROR,
  the connection dropped after N frames, delayed or duplicated (``redelivered:true``)
  deliveries, and *confirmation policies* for publish windows (see :class:`ConfirmPolicy`).
* **Mutants** (:data:`MUTANTS`) make the broker *wrong* on purpose, so the conformance
  suite can prove it catches each bug: ``lose-message``, ``duplicate-no-flag``,
  ``reorder``, ``ignore-ack``, ``client-as-individual``, ``leak-tx-sends``,
  ``early-receipt``, ``no-receipt``, ``mangle-header``, ``mangle-body``,
  ``error-no-close``, ``ignore-prefetch``.

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

In-process API: ``broker.faults.add(FaultRule(...))`` returns a rule id;
``broker.faults.remove(id)``, ``broker.faults.clear()``,
``broker.faults.enable_mutant("reorder", destination="/queue/x*")``. The same as JSON over
the control API (``BrokerServer.control_request`` in :mod:`ackspec.reference.server`; off unless
``--control`` is given): ``FaultRule`` fields by name.
"""

from __future__ import annotations

import fnmatch
import itertools
import threading
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

MUTANTS: Final = frozenset(
    {
        "lose-message",  # every Nth SEND per destination is confirmed and then dropped
        "duplicate-no-flag",  # each delivery is sent twice, the copy without redelivered
        "reorder",  # the head message is delivered after the next one
        "ignore-ack",  # an ACKed message is put back and redelivered
        "client-as-individual",  # ack:client acknowledgements are not cumulative
        "leak-tx-sends",  # transactional SENDs are visible before COMMIT (and survive ABORT)
        "early-receipt",  # RECEIPT before the journal fsync
        "no-receipt",  # RECEIPTs are never sent
        "mangle-header",  # one byte of a user header value of each MESSAGE is changed
        "mangle-body",  # one byte of each MESSAGE body is changed
        "error-no-close",  # ERROR frames leave the connection open
        "ignore-prefetch",  # deliveries beyond the prefetch bound
        # the wider net of the suite's quality checks (tests/quality):
        "nack-ignored",  # NACK is confirmed but does nothing (the message stays with the consumer)
        "nack-acks",  # NACK consumes the message like an ACK
        "abort-keeps-acks",  # ABORT applies the transaction's ACKs
        "abort-keeps-sends",  # ABORT delivers the transaction's SENDs
        "commit-drops-one",  # COMMIT loses the last SEND of a transaction of several
        "no-redelivered-flag",  # redeliveries carry redelivered:false
        "stuck-delivery-count",  # the delivery count never grows
        "no-dead-letter",  # the redelivery limit is never enforced
        "early-dead-letter",  # dead-lettered one redelivery too early
        "prefetch-off-by-one",  # one delivery more than the prefetch allows
        "topic-one-subscriber",  # a topic message reaches only its first subscriber
        "durable-forgets",  # a durable subscription is deleted when its consumer goes (as a nondurable one)
        "selector-ignored",  # consumers get the messages their selector does not match too
        "no-local-ignored",  # a noLocal subscription gets its own connection's messages too
        "client-id-shared",  # a second connection may take a client id an open connection holds
        "queue-to-two",  # a queue message also reaches a second consumer
        "reorder-receipts",  # a receipt is overtaken by the next one
        "wrong-receipt-id",  # RECEIPT carries a receipt-id that was never asked for
        "error-no-message",  # ERROR frames lack the message header
        "error-no-receipt-id",  # ERROR frames lack the receipt-id of the frame that caused them
        "message-no-subscription",  # MESSAGE frames lack the subscription header
        "message-no-destination",  # MESSAGE frames lack the destination header
        "truncate-body-at-nul",  # MESSAGE bodies end at their first NUL byte
        "double-escape-headers",  # user header values are escaped twice on MESSAGE frames
    }
)

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


@dataclass(frozen=True)
class _Mutant:
    name: str
    destination: str | None
    every: int


class FaultInjector:
    """The live fault configuration of one broker. Thread-safe to change from tests.

    Readers (the broker's event loop) see immutable snapshots that are swapped atomically.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._rules: tuple[tuple[int, FaultRule], ...] = ()
        self._mutants: dict[str, _Mutant] = {}
        self._uses: dict[int, int] = {}
        self.version = 0
        """Incremented on every change (hosts may cache per version)."""
        self.active = False
        """Any rule or mutant installed (a plain attribute: checked on the hot path)."""
        self.any_mutant = False
        """Any mutant enabled."""

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

    def enable_mutant(self, name: str, destination: str | None = None, every: int = 2) -> None:
        """Make the broker wrong on purpose (``name`` in :data:`MUTANTS`)."""
        if name not in MUTANTS:
            raise ValueError(f"unknown mutant {name!r}; one of {sorted(MUTANTS)}")
        with self._lock:
            self._mutants = {**self._mutants, name: _Mutant(name, destination, max(1, every))}
            self._changed()

    def disable_mutant(self, name: str) -> None:
        with self._lock:
            self._mutants = {k: v for k, v in self._mutants.items() if k != name}
            self._changed()

    def clear(self) -> None:
        """Remove every rule and mutant."""
        with self._lock:
            self._rules = ()
            self._mutants = {}
            self._uses = {}
            self._changed()

    def snapshot(self) -> dict[str, Any]:
        """The configuration as JSON-able data (control API ``GET /faults``)."""
        return {
            "rules": [{"id": rid, **asdict(rule)} for rid, rule in self._rules],
            "mutants": [asdict(m) for m in self._mutants.values()],
        }

    def _changed(self) -> None:
        self.version += 1
        self.active = bool(self._rules or self._mutants)
        self.any_mutant = bool(self._mutants)

    # ------------------------------------------------------------ queries (broker side)
    def mutant_active(self, name: str, destination: str | None = None) -> bool:
        if not self.any_mutant:
            return False
        m = self._mutants.get(name)
        if m is None:
            return False
        if m.destination is None or destination is None:
            return True
        return fnmatch.fnmatchcase(destination, m.destination)

    def mutant_every(self, name: str) -> int:
        m = self._mutants.get(name)
        return m.every if m is not None else 1

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
