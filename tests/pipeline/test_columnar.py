"""Arrow batches become whole histories of rows, however the batches cut them, without Spark."""

from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.history.checks import check_histories, check_one
from ackspec.history.record import Record
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
