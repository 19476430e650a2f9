"""One SparkSession for the whole test session: Spark starts slowly on 2 cores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
