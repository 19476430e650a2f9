"""Mutants built from outside the reference broker: subclasses of its core, never branches inside it.

Each is a :class:`~ackspec.reference.broker.core.BrokerCore` subclass with one deliberate bug that
only the suite's property-based tests can find, because it needs a drawn value or an interleaving
the example tests never produce:

* ``tx-loss-after-rollback``: once a transaction holding acknowledgements was rolled back, the next
  commit that both acknowledges and sends drops its first send, though the commit is confirmed. It
  takes at least four steps (acknowledge in a transaction, roll back, acknowledge and send in another,
  commit); only the transaction state machine interleaves them.
* ``prefetch-above-7``: a prefetch above 7 lets one more unacknowledged delivery through; the
  prefetch property draws its bound from the catalogue's domain (``1..``), the example test used 3.

Run the suite against one: ``python -m tests.quality.outside_mutants NAME [ackspec run options]``
(from the repository root), which is ``ackspec run --broker-parts tests.quality.outside_mutants:NAME``.
"""

from __future__ import annotations

import sys
from typing import Any

from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.parts import BrokerParts


class TxLossAfterRollback(BrokerCore):
    """Loses the first send of a commit that acknowledges and sends, after a rollback that undid acks."""

    _tainted = False

    def abort(self, conn: Any, tx: str, **options: Any) -> Any:
        open_tx = self._conn(conn).txs.get(tx)
        if open_tx is not None and open_tx.settles:
            self._tainted = True
        return super().abort(conn, tx, **options)

    def commit(self, conn: Any, tx: str, **options: Any) -> Any:
        open_tx = self._conn(conn).txs.get(tx)
        if self._tainted and open_tx is not None and open_tx.settles and open_tx.sends:
            open_tx.sends.pop(0)
            self._tainted = False
        return super().commit(conn, tx, **options)


class PrefetchAbove7(BrokerCore):
    """One unacknowledged delivery more than a prefetch above 7 allows."""

    def subscribe(self, conn: Any, sub: str, destination: str, **options: Any) -> Any:
        prefetch = options.get("prefetch")
        if prefetch is not None and prefetch > 7:
            options["prefetch"] = prefetch + 1
        return super().subscribe(conn, sub, destination, **options)


OUTSIDE_MUTANTS: dict[str, type[BrokerCore]] = {
    "tx-loss-after-rollback": TxLossAfterRollback,
    "prefetch-above-7": PrefetchAbove7,
}


def __getattr__(name: str) -> BrokerParts:
    """``tests.quality.outside_mutants:NAME`` (what ``--broker-parts`` takes): the broker of mutant ``NAME``."""
    if name not in OUTSIDE_MUTANTS:
        raise AttributeError(name)
    return BrokerParts(core=OUTSIDE_MUTANTS[name])


def run(mutant: str, argv: list[str]) -> int:
    """``ackspec run ARGV`` with the embedded broker built on the mutant core."""
    from ackspec.cli import main  # noqa: PLC0415

    return main(["run", "--broker-parts", f"tests.quality.outside_mutants:{mutant}", *argv])


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in OUTSIDE_MUTANTS:
        print(f"usage: python -m tests.quality.outside_mutants {{{','.join(OUTSIDE_MUTANTS)}}} [run options]",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1], sys.argv[2:]))
