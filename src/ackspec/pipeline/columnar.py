"""History rows straight from Arrow columns, cut into whole histories: what the checks read at scale.

Building a :class:`ackspec.history.record.Record` per row (a frozen dataclass of 24
fields, its JSON ``value`` decoded) costs several times more than checking it. The
rules (:func:`ackspec.history.checks.check_one`) read 15 fields, so a row
here is a named tuple of those, made from whole Arrow columns at once, ``type`` and
``op`` mapped to their enums by table lookup and ``value`` left as its JSON text
(the rules decode the few that matter). The Spark job's Python workers and the
benchmark's single-process checker both use it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ackspec.history.record import Op, RecordType


class Row(NamedTuple):
    """The fields of a history record the rules read (satisfies ``ackspec.history.facts.HistoryRecord``)."""

    index: int  # type: ignore[assignment]  # the record's index; shadows tuple.index on purpose
    type: RecordType
    op: Op
    process: str
    destination: str | None
    subscription: str | None
    producer: str | None
    seq: int | None
    ack_mode: str | None
    transaction: str | None
    redelivered: bool | None
    delivery_count: int | None
    outcome: str | None
    limit: int | None
    value: Any


KEY_FIELDS = ("run", "test")
"""The history key: ``test`` is ``""`` when absent (as in ``check_histories``)."""

COLUMNS: tuple[str, ...] = (*KEY_FIELDS, *Row._fields)
"""The columns :func:`histories` reads, in this order."""

_new_row = functools.partial(tuple.__new__, Row)  # Row._make without its Python frame per row
_TYPES = {str(t): t for t in RecordType}
_OPS = {str(o): o for o in Op}


def _values(column: Any, members: dict[str, Any] | None = None, what: str = "") -> list[Any]:
    """The Python values of a column; a string column's through its dictionary.

    A history repeats a few processes, destinations, modes and operations over thousands of
    rows: each distinct string becomes one Python object (mapped to its enum member when
    ``members`` is given), and the rows share it (a NumPy take of object pointers), instead of
    a new ``str`` per row: fewer allocations, and a third less CPU on the history columns."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return list(column.to_pylist())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    distinct = encoded.dictionary.to_pylist()
    if members is not None:
        if column.null_count:
            raise ValueError(f"history record with unknown {what} None")
        unknown = next((v for v in distinct if v not in members), None)
        if unknown is not None:
            raise ValueError(f"history record with unknown {what} {unknown!r}")
        distinct = [members[v] for v in distinct]
    lookup = np.empty(len(distinct) + 1, dtype=object)
    lookup[:-1] = distinct
    return list(lookup[encoded.indices.fill_null(len(distinct)).to_numpy()].tolist())


def rows(batch: Any) -> list[Row]:
    """The rows of an Arrow RecordBatch or Table holding the :data:`COLUMNS` (more columns are ignored)."""
    columns: list[list[Any]] = []
    for name in Row._fields:
        column = batch.column(name)
        if name == "type":
            columns.append(_values(column, _TYPES, "type"))
        elif name == "op":
            columns.append(_values(column, _OPS, "op"))
        else:
            columns.append(_values(column))
    return list(map(_new_row, zip(*columns, strict=True)))


def histories(batches: Iterable[Any]) -> Iterator[tuple[str, str, list[Row]]]:
    """``(run, test, rows)`` per history of Arrow batches sorted by ``(run, test, index)``.

    A history may span batches (Spark cuts its Arrow stream every N rows, wherever that
    falls): it is yielded once, whole, when the next history starts or the input ends.
    Only the current batch and the current history are held in memory.
    """
    key: tuple[str, str] | None = None
    current: list[Row] = []
    for batch in batches:
        size = batch.num_rows
        if size == 0:
            continue
        runs = batch.column("run")
        tests = pc.fill_null(batch.column("test"), "")
        if size > 1:
            change = pc.or_(pc.not_equal(runs.slice(1), runs.slice(0, size - 1)),
                            pc.not_equal(tests.slice(1), tests.slice(0, size - 1)))
            starts = [0, *(np.flatnonzero(change.to_numpy(zero_copy_only=False)) + 1).tolist()]
        else:
            starts = [0]
        batch_rows = rows(batch)
        for start, end in zip(starts, [*starts[1:], size], strict=True):
            here = (runs[start].as_py(), tests[start].as_py())
            if here == key:
                current.extend(batch_rows[start:end])
                continue
            if key is not None:
                yield key[0], key[1], current
            key, current = here, batch_rows[start:end]
    if key is not None:
        yield key[0], key[1], current


def in_history_order(table: pa.Table) -> bool:
    """Whether each ``(run, test)`` of ``table`` is one contiguous stretch of rows in index order.

    Files are written a history at a time, so a partition read from them usually is: checked
    with a few vectorised comparisons, it then needs no sort (sorting a partition of millions of
    rows by three keys cost about a tenth of the workers' CPU)."""
    size = table.num_rows
    if size < 2:
        return True
    runs, tests, index = table.column("run"), table.column("test"), table.column("index")
    change = pc.or_(pc.not_equal(runs.slice(1), runs.slice(0, size - 1)),
                    pc.not_equal(tests.slice(1), tests.slice(0, size - 1)))
    backwards = pc.and_(pc.less(index.slice(1), index.slice(0, size - 1)), pc.invert(change))
    if pc.any(backwards).as_py():
        return False
    stretches = pc.sum(change).as_py() + 1
    return bool(stretches == table.group_by(["run", "test"]).aggregate([]).num_rows)


def table_histories(table: pa.Table) -> Iterator[tuple[str, str, list[Row]]]:
    """The histories of an Arrow table in any order (sorted here by ``(run, test, index)`` unless each
    history already lies in one stretch in index order: :func:`in_history_order`)."""
    table = table.set_column(table.schema.get_field_index("test"), "test", pc.fill_null(table.column("test"), ""))
    if not in_history_order(table):
        table = table.sort_by([("run", "ascending"), ("test", "ascending"), ("index", "ascending")])
    return histories(table.to_batches(max_chunksize=65_536))
