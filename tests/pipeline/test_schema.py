"""The Parquet schema of histories: round trip without Spark, and refusal of unknown versions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ackspec.errors import AckspecError
from ackspec.history.record import Op, Record, RecordType
from ackspec.pipeline.schema import COLUMNS, check_parquet, records_to_arrow, row_to_record
from ackspec.results.layout import history_file_name


def sample() -> list[Record]:
    return [Record(run="r", index=0, time_ns=5, type=RecordType.OK, op=Op.RECEIVE, process="c1", target="t",
                   test="x::y", destination="/queue/q", producer="p", seq=3, redelivered=True, delivery_count=2,
                   limit=4, value={"dead_letter": True, "priority": 4})]


def test_arrow_columns_follow_the_record_and_round_trip() -> None:
    assert [name for name, _ in COLUMNS][:-1] == list(Record.__dataclass_fields__)
    table = records_to_arrow(sample())
    assert table.schema.names == [name for name, _ in COLUMNS]
    assert [row_to_record(row) for row in table.to_pylist()] == sample()


def write(tmp_path: Path, version: int) -> Path:
    folder = tmp_path / "histories.parquet" / "run=r" / "target=t"
    folder.mkdir(parents=True)
    table = records_to_arrow(sample()).drop(["run", "target"])
    table = table.set_column(table.schema.get_field_index("v"), "v", pa.array([version], pa.int32()))
    pq.write_table(table, folder / "part-0.parquet")
    return tmp_path / "histories.parquet"


def test_parquet_of_the_current_version_is_accepted(tmp_path: Path) -> None:
    check_parquet(write(tmp_path, 1))


def test_parquet_of_an_unknown_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(AckspecError, match=r"part-0\.parquet: history schema version 7 is not supported"):
        check_parquet(write(tmp_path, 7))


def test_history_file_names_are_safe_and_stable() -> None:
    assert history_file_name("tests/a.py::test_b[stomp-1]") == "tests_a.py__test_b_stomp-1.jsonl"
    long = "t::" + "x" * 400
    assert len(history_file_name(long)) < 200 and history_file_name(long) == history_file_name(long)
