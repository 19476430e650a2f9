"""Arrow batches become whole histories of rows, however the batches cut them, without Spark."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.history.checks import check_histories, check_one
from ackspec.history.record import Op, Record, RecordType
from ackspec.pipeline import columnar
from ackspec.pipeline.schema import records_to_arrow
from ackspec.pipeline.synthetic import generate_suite


def _table(seed: int) -> tuple[pa.Table, list[Record]]:
    histories = list(generate_suite(6, seed=seed, anomaly_rate=0.8))
    records = [r for h in histories for r in h.records]
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)  # table_histories sorts by (run, test, index) itself
    return records_to_arrow(shuffled), records


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), chunk=st.integers(1, 400))
def test_histories_are_whole_and_in_order_whatever_the_batch_size(seed: int, chunk: int) -> None:
    table, records = _table(seed)
    groups: dict[tuple[str, str], list[int]] = {}
    for r in records:
        groups.setdefault((r.run, r.test or ""), []).append(r.index)
    expected = {key: sorted(indexes) for key, indexes in groups.items()}
    sorted_table = table.sort_by([("run", "ascending"), ("test", "ascending"), ("index", "ascending")])
    got = {(run, test): [row.index for row in rows]
           for run, test, rows in columnar.histories(sorted_table.to_batches(max_chunksize=chunk))}
    assert got == expected


def test_rows_check_like_records() -> None:
    table, records = _table(3)
    anomalies = []
    for run, test, rows in columnar.table_histories(table):
        anomalies.extend(check_one(run, test, rows)[0])
    assert tuple(sorted(anomalies)) == check_histories(records).anomalies


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_rows_hold_the_values_of_every_column_as_records_do(seed: int) -> None:
    """Strings go through their dictionary (one object per distinct value): the values, nulls and
    enum members must be those of the records, in a table of several chunks too."""
    table, _ = _table(seed)
    chunked = pa.concat_tables([table.slice(0, 7), table.slice(7)])
    for source in (table.to_batches()[0], chunked):
        got = columnar.rows(source)
        expected = [tuple(row[name] for name in columnar.Row._fields) for row in source.to_pylist()]
        assert [tuple(str(v) if i in (1, 2) else v for i, v in enumerate(row)) for row in got] == expected
        assert all(isinstance(row.type, RecordType) and isinstance(row.op, Op) for row in got)


def test_an_unknown_or_missing_operation_or_type_is_one_clear_error() -> None:
    table, _ = _table(1)
    ops = table.column("op").to_pylist()
    bad = table.set_column(table.schema.get_field_index("op"), "op", pa.array(["teleport", *ops[1:]]))
    with pytest.raises(ValueError, match="unknown op 'teleport'"):
        columnar.rows(bad)
    types = table.column("type").to_pylist()
    missing = table.set_column(table.schema.get_field_index("type"), "type", pa.array([None, *types[1:]], pa.string()))
    with pytest.raises(ValueError, match="unknown type None"):
        columnar.rows(missing)


def test_a_table_written_history_by_history_is_not_sorted_again_and_any_other_is() -> None:
    histories = list(generate_suite(4, seed=9, anomaly_rate=0.8))
    records = [r for h in histories for r in h.records]
    in_order = records_to_arrow(records)  # as files are written: one history after another, in index order
    first, second = histories[0].records, histories[1].records
    cut = records_to_arrow([*first[:5], *second, *first[5:]])  # the first history in two stretches
    backwards = records_to_arrow([*first[1:2], *first[:1], *first[2:]])  # two records swapped
    assert columnar.in_history_order(in_order)
    assert not columnar.in_history_order(cut)
    assert not columnar.in_history_order(backwards)
    for table, source in ((in_order, records), (cut, [*first, *second]), (backwards, first)):
        got = {(run, test): [row.index for row in rows] for run, test, rows in columnar.table_histories(table)}
        assert got == {(h[0].run, h[0].test or ""): [r.index for r in h]
                       for h in ([r for r in source if r.test == t] for t in dict.fromkeys(r.test for r in source))}
