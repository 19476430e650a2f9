"""One SparkSession for the whole test session: Spark starts slowly on 2 cores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ackspec.history.record import Op, Record, RecordType
from ackspec.pipeline.session import get_session

ARTIFACTS = Path(__file__).resolve().parents[2] / "ackspec-out" / "artifacts"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = get_session("local[2]", extra={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


class HistoryBuilder:
    """A hand-written history of one test (run ``r``, test ``t``): records appended in order, each at its
    index as its time, for the rule and checker tests to build their cases on."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, type: RecordType, op: Op, process: str = "c1", **fields: Any) -> int:
        index = len(self.records)
        self.records.append(Record(run="r", index=index, time_ns=index, type=type, op=op, process=process,
                                   test="t", **fields))
        return index
