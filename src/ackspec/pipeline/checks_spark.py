"""The history checks as one Spark job: one shuffle by history, every rule in one pass per history.

The rows are repartitioned by the history key ``(run, test)`` and sorted by
``(run, test, index)`` within each partition, so every history lies whole and in
order in one partition. ``mapInArrow`` hands each partition's Arrow batches to a
Python worker, which cuts them into histories (:func:`ackspec.pipeline.columnar.histories`,
one batch and one history in memory at a time) and applies the rules of
:func:`ackspec.pipeline.checks_python.check_one` to each. Every partition yields its
anomalies and one row of send counts; one ``collect`` brings them to the driver.

Why this shape (measured, docs/pipeline-benchmark.md): the rules need several
orderings of one history (per process for resets, per consumer for cumulative acks
and the in-flight count, per message for duplicates and counts, per producer stream
for order). As window functions and joins that was ~10 sorts in 18 Spark jobs, most
of the time planning, generating code and sorting; here it is one scan, one shuffle,
one sort and one job, and the rules are stated once. On a cluster (``--master``) the
partitions, and so the histories, are spread over the executors; each executor needs
ackspec, pyarrow and pandas importable (:func:`ackspec.pipeline.session.get_session`
ships the ackspec package to a remote cluster). ``tests/pipeline`` checks that this
job finds exactly the injected anomalies and agrees with
:func:`ackspec.pipeline.checks_python.check_histories`, also with histories cut
across Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackspec.history.record import Op, RecordType
from ackspec.pipeline import columnar
from ackspec.pipeline.anomalies import Anomaly, AnomalyKind, CheckResult, SendCounts
from ackspec.pipeline.checks_python import RULE_RECORDS, check_one

H = ["run", "test"]

OUTPUT = pa.schema([
    ("kind", pa.string()), ("run", pa.string()), ("test", pa.string()), ("destination", pa.string()),
    ("producer", pa.string()), ("seq", pa.int64()), ("operations", pa.list_(pa.int64())), ("decisive", pa.bool_()),
    ("confirmed", pa.int64()), ("failed", pa.int64()), ("indeterminate", pa.int64()),
])
"""A worker's output rows: one per anomaly (``kind`` set), then one of send counts (``kind`` null)."""

OUTPUT_DDL = ("kind string, run string, test string, destination string, producer string, seq bigint, "
              "operations array<bigint>, decisive boolean, confirmed bigint, failed bigint, indeterminate bigint")

FLUSH_ANOMALIES = 4096
"""A worker yields its anomalies in batches of at most this many (they are few: ~1 per 1,000 operations)."""


@dataclass(frozen=True, slots=True)
class SparkCheck:
    """The check as one lazy DataFrame of anomaly and send-count rows; :meth:`collect` runs it (one job)."""

    rows: DataFrame

    def collect(self) -> CheckResult:
        found: list[Anomaly] = []
        sends = SendCounts()
        for r in self.rows.collect():
            if r["kind"] is None:
                sends = sends + SendCounts(r["confirmed"], r["failed"], r["indeterminate"])
            else:
                found.append(Anomaly.make(AnomalyKind(r["kind"]), r["run"], r["test"], r["destination"],
                                          r["producer"], r["seq"], list(r["operations"]),
                                          decisive=bool(r["decisive"])))
        return CheckResult(tuple(sorted(found)), sends)


def _output(anomalies: list[Anomaly], sends: SendCounts | None = None) -> pa.RecordBatch:
    columns: dict[str, list[Any]] = {
        "kind": [str(a.kind) for a in anomalies], "run": [a.run for a in anomalies],
        "test": [a.test for a in anomalies], "destination": [a.destination for a in anomalies],
        "producer": [a.producer for a in anomalies], "seq": [a.seq for a in anomalies],
        "operations": [list(a.operations) for a in anomalies], "decisive": [a.decisive for a in anomalies],
        "confirmed": [None] * len(anomalies), "failed": [None] * len(anomalies),
        "indeterminate": [None] * len(anomalies),
    }
    if sends is not None:
        for name in ("kind", "run", "test", "destination", "producer", "seq", "operations", "decisive"):
            columns[name].append(None)
        columns["confirmed"].append(sends.confirmed)
        columns["failed"].append(sends.failed)
        columns["indeterminate"].append(sends.indeterminate)
    return pa.RecordBatch.from_pydict(columns, schema=OUTPUT)


def check_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The worker side: the anomalies of every history in a partition sorted by ``(run, test, index)``,
    then the partition's send counts (runs in the Python worker of each Spark task)."""
    found: list[Anomaly] = []
    sends = SendCounts()
    for run, test, history in columnar.histories(batches):
        anomalies, counts = check_one(run, test, history)
        found.extend(anomalies)
        sends = sends + counts
        if len(found) >= FLUSH_ANOMALIES:
            yield _output(found)
            found = []
    yield _output(found, sends)


def _rule_record() -> Column:
    """The Spark predicate of :func:`ackspec.pipeline.checks_python.is_rule_record`, keeping also the
    records of an unknown (or missing) operation or type, so the workers name them in a clear error
    instead of dropping them silently."""
    any_type = [str(op) for op, types in RULE_RECORDS.items() if types is None]
    unknown = (F.col("op").isNull() | F.col("type").isNull() | ~F.col("op").isin(*[str(op) for op in Op])
               | ~F.col("type").isin(*[str(t) for t in RecordType]))
    wanted = unknown | F.col("value").isNotNull() | F.col("op").isin(*any_type)
    for op, types in RULE_RECORDS.items():
        if types is not None:
            wanted = wanted | ((F.col("op") == str(op)) & F.col("type").isin(*sorted(str(t) for t in types)))
    return wanted


def check_dataframe(histories: DataFrame, *, repartition: bool = True) -> SparkCheck:
    """Build the check job over a DataFrame of history rows (schema of :mod:`ackspec.pipeline.schema`).

    ``repartition=False`` only when every history already lies whole in one partition.
    """
    casts = {"index": "long", "seq": "long", "delivery_count": "int", "limit": "int", "redelivered": "boolean"}
    df = histories.select(*[
        F.coalesce(F.col("test"), F.lit("")).alias("test") if name == "test"
        else F.col(f"`{name}`").cast(casts[name]).alias(name) if name in casts
        else F.col(f"`{name}`")
        for name in columnar.COLUMNS
    ]).where(_rule_record())  # a third of the records cannot change a verdict: not shuffled
    if repartition:
        df = df.repartition(*H)
    df = df.sortWithinPartitions(*H, "index")
    return SparkCheck(df.mapInArrow(check_partition, OUTPUT_DDL))


def check_histories_spark(histories: DataFrame) -> CheckResult:
    """Run the checks and collect anomalies and send counts to the driver."""
    return check_dataframe(histories).collect()
