"""The transaction coordinator of one AMQP connection (AMQP 1.0 4.4): declare and discharge.

Why a part of its own: a connection's transactions (their names, the dispositions made in them, a
pre-settled transfer of one that failed) are state only the coordinator link's messages and the
transactional transfers and dispositions touch; the connection hands it the coordinator's messages and
asks it which transaction a transfer or disposition names.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from proton import Condition, Described, Message

from ackspec.reference.amqp.conditions import ERR_DECODE, ERR_RESOURCE_LIMIT, ERR_TXN_ROLLBACK, ERR_UNKNOWN_TXN
from ackspec.reference.amqp.dispositions import DECLARED, REJECTED, Ptr, transaction_id
from ackspec.reference.amqp.links import OutLink, Token
from ackspec.reference.broker import Effect
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.limits import AmqpLimits


@dataclass(eq=False)
class Txn:
    """One declared transaction of the connection."""


    name: str
    # transactional dispositions: (delivery, settled by the client, its link, core delivery id)
    deliveries: list[tuple[Ptr, bool, OutLink, int]] = field(default_factory=list)
    failed: str | None = None  # a pre-settled transfer of the transaction could not be processed (4.4.4)




class Answer(Protocol):
    """The connection's outcome for a transfer (here: a coordinator message), settled."""

    def __call__(self, dlv: Ptr, state: int, *, condition: Condition | None = None,
                 data: list[Any] | None = None) -> None: ...


class Coordinator:
    """Declares and discharges the transactions of one connection on the core."""

    def __init__(self, conn_id: str, core: BrokerCore, limits: AmqpLimits, *, answer: Answer,
                 run: Callable[[list[Effect]], None], end: Callable[[Txn, bool], None],
                 user: Callable[[], str | None]) -> None:
        """``answer``: settle a coordinator message with an outcome; ``run``: apply core effects; ``end``:
        a transaction is over (rolled back or not), its dispositions are settled; ``user``: the login."""
        self.conn_id = conn_id
        self.core = core
        self.limits = limits
        self._answer = answer
        self._run = run
        self._end = end
        self._user = user
        self.txns: dict[str, Txn] = {}
        self._ids = itertools.count(1)

    def named(self, dlv: Ptr) -> tuple[str, Condition | None]:
        """The transaction a transactional transfer or disposition names, and the error to refuse it with
        if it is not one this connection declared (None when it is)."""
        txn_id = transaction_id(dlv).decode("utf-8", "replace")
        if txn_id in self.txns:
            return txn_id, None
        return txn_id, Condition(ERR_UNKNOWN_TXN, f"unknown transaction {txn_id!r}")

    def control(self, dlv: Ptr, payload: bytes) -> None:
        """A message on the coordinator link: ``declare`` or ``discharge``."""
        try:
            msg = Message()
            msg.decode(payload)
        except Exception as exc:
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, f"undecodable message: {exc}"))
            return
        body = msg.body
        if not isinstance(body, Described):
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, "coordinator expects declare or discharge"))
            return
        raw: Any = body.descriptor
        descriptor = str(raw) if isinstance(raw, str) else int(raw)
        fields = list(cast(Any, body.value) or [])
        if descriptor in ("amqp:declare:list", 0x31):
            self._declare(dlv)
        elif descriptor in ("amqp:discharge:list", 0x32):
            txn_id = bytes(fields[0]).decode("utf-8", "replace") if fields and fields[0] is not None else ""
            self._discharge(dlv, txn_id, bool(fields[1]) if len(fields) > 1 else False)
        else:
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, f"unknown coordinator message {descriptor}"))

    def _declare(self, dlv: Ptr) -> None:
        if len(self.txns) >= self.limits.max_transactions:
            self._answer(dlv, REJECTED, condition=Condition(
                ERR_RESOURCE_LIMIT, f"too many open transactions (limit {self.limits.max_transactions})"))
            return
        name = f"txn-{self.conn_id}-{next(self._ids)}"
        self._run(self.core.begin(self.conn_id, name))
        self.txns[name] = Txn(name)
        self._answer(dlv, DECLARED, data=[name.encode()])

    def _discharge(self, dlv: Ptr, txn_id: str, fail: bool) -> None:
        txn = self.txns.pop(txn_id, None)
        if txn is None:
            self._answer(dlv, REJECTED, condition=Condition(ERR_UNKNOWN_TXN, f"unknown transaction {txn_id!r}"))
            return
        if not fail and txn.failed is None:
            txn.failed = self._commit_fault()
        # settled transactional dispositions cannot be re-settled: give those back (STOMP ABORT
        # semantics); unsettled ones stay acquired by the link (AMQP 4.4.2)
        any_settled = any(entry[1] for entry in txn.deliveries)
        if not fail and txn.failed is not None:
            # a pre-settled transfer of it failed (4.4.4), or fault rule fail_commit: roll back instead
            self._run(self.core.abort(self.conn_id, txn_id, redeliver_settled=any_settled))
            self._end(txn, True)
            self._answer(dlv, REJECTED, condition=Condition(ERR_TXN_ROLLBACK, f"transaction rolled back: {txn.failed}"))
            return
        token = Token("discharge", dlv, (txn, fail))
        if fail:
            effects = self.core.abort(self.conn_id, txn_id, redeliver_settled=any_settled, confirm=token)
        else:
            effects = self.core.commit(self.conn_id, txn_id, confirm=token)
        self._run(effects)

    def _commit_fault(self) -> str | None:
        """Fault rule ``fail_commit``: this discharge fails like the STOMP COMMIT does (rolled back instead)."""
        faults = self.core.faults
        if faults is None or not faults.active:
            return None
        return next((r.fail_commit for r in faults.rules_for(None, self.conn_id, self._user())
                     if r.fail_commit is not None), None)
