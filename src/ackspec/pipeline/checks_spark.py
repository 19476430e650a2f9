"""The history checks as a Spark job: whole histories, the shared rules applied to each.

Histories are checked where they were read when that is right (:meth:`SparkCheck.rows`):
``mapInArrow`` streams each input partition through :func:`check_partition`, with no
shuffle, and a row per history proves that none was cut across partitions. Otherwise
``groupBy("run", "bucket").applyInArrow`` hands a bucket of histories (the tests of one
run whose name hashes to the same bucket, :data:`BUCKETS` per run) to a Python worker as
Arrow batches; :func:`check_bucket` sorts them by ``(test, index)`` in Arrow, cuts them
into histories and turns each into rows (:mod:`ackspec.pipeline.columnar`), then applies
:func:`ackspec.history.checks.check_one` to each: the facts of the history and
every rule of :data:`ackspec.history.rules.RULES`, the same code the single-process
checker runs. A bucket yields its anomalies, one row of send counts and, when the reader
flagged some of its records (:data:`ackspec.pipeline.schema.PROBLEM`), one row counting
them: bad records are reported per run instead of failing the job. A group per history
(``groupBy("run", "test")``) would state the same thing, but pays an Arrow stream and a
Python call per history: a third of the CPU at 10M operations (docs/pipeline-benchmark.md).

What reaches the driver is bounded by the findings, not by the operations: the send
counts and problems are summed per run by a DataFrame aggregate before anything is
collected (:meth:`SparkCheck.collect`), or the rows are written to a URI and only their
per-kind totals come back (:meth:`SparkCheck.write`). Records that cannot change a
verdict (:data:`ackspec.history.checks.RULE_RECORDS`) are dropped as they are read.

On a cluster the groups are spread over the executors; each executor's Python needs
pyarrow and pandas, and :func:`ackspec.pipeline.session.get_session` ships the ackspec
package to a non-local master.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackspec.history.anomalies import Anomaly, AnomalyKind, CheckResult, Problem, SendCounts
from ackspec.history.checks import RULE_RECORDS, check_one
from ackspec.history.record import Op, RecordType
from ackspec.pipeline import columnar
from ackspec.pipeline.schema import PROBLEM, SOURCE
from ackspec.pipeline.session import progress

BUCKET = "bucket"
"""The grouping column beside ``run``: a hash of ``test`` modulo :data:`BUCKETS`."""
BUCKETS = 64
"""Buckets per run. One Arrow stream and one Python call per history cost about 1 ms each (35,000
groups at 10M operations: a third of the job's CPU); a bucket of many histories pays it once. 64
per run keeps a bucket of a 1M-operation run near 10,000 rows and one of a 100M-operation run
within a few hundred MB of a Python worker."""
HISTORY = "history"
"""``kind`` of the partition-wise job's row naming a history it checked (never part of the result)."""
SENDS = "sends"
"""``kind`` of a group's send-count row."""
PROBLEMS = "problem"
"""``kind`` of a group's row counting the records the reader could not use."""

OUTPUT = pa.schema([
    ("kind", pa.string()), ("run", pa.string()), ("test", pa.string()), ("destination", pa.string()),
    ("producer", pa.string()), ("seq", pa.int64()), ("operations", pa.list_(pa.int64())), ("decisive", pa.bool_()),
    ("confirmed", pa.int64()), ("failed", pa.int64()), ("indeterminate", pa.int64()),
    ("problem", pa.string()), ("source", pa.string()),
])
"""A group's output rows: one per anomaly, one of send counts, one of problems (if any)."""

OUTPUT_DDL = ("kind string, run string, test string, destination string, producer string, seq bigint, "
              "operations array<bigint>, decisive boolean, confirmed bigint, failed bigint, indeterminate bigint, "
              "problem string, source string")

ANOMALY_COLUMNS = ("kind", "run", "test", "destination", "producer", "seq", "operations", "decisive")


def _sends_only(run: str, sends: SendCounts) -> pa.RecordBatch:
    """The output of a bucket without anomalies or problems: one row, built from cached null columns."""
    arrays = [_NULLS[name] for name in OUTPUT.names]
    arrays[0], arrays[1] = _SENDS_KIND, pa.array([run], pa.string())
    arrays[8:11] = [pa.array([n], pa.int64()) for n in (sends.confirmed, sends.failed, sends.indeterminate)]
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT)


_NULLS = {field.name: pa.nulls(1, field.type) for field in OUTPUT}
_SENDS_KIND = pa.array([SENDS], pa.string())


@dataclass(slots=True)
class _Found:
    """What a group or an input partition found for one run."""

    anomalies: list[Anomaly] = field(default_factory=list)
    sends: SendCounts = field(default_factory=SendCounts)
    problems: tuple[int, str, str] | None = None  # (count, first problem, its source) of flagged records
    tests: list[str] = field(default_factory=list)  # the histories checked, for the whole-history proof


def _output(found: dict[str, _Found], *, history_rows: bool) -> pa.RecordBatch:
    """The rows of a group or partition: per run its anomalies, one row of its send counts, one counting
    its flagged records, and (``history_rows``) one :data:`HISTORY` row per history checked."""
    if len(found) == 1 and not history_rows:
        run, only = next(iter(found.items()))
        if not only.anomalies and only.problems is None:
            return _sends_only(run, only.sends)
    columns: dict[str, list[Any]] = {name: [] for name in OUTPUT.names}

    def row(**values: Any) -> None:
        for name, column in columns.items():
            column.append(values.get(name))

    for run, f in found.items():
        for a in f.anomalies:
            row(kind=str(a.kind), run=run, test=a.test, destination=a.destination, producer=a.producer, seq=a.seq,
                operations=list(a.operations), decisive=a.decisive)
        row(kind=SENDS, run=run, confirmed=f.sends.confirmed, failed=f.sends.failed,
            indeterminate=f.sends.indeterminate)
        if f.problems is not None:
            row(kind=PROBLEMS, run=run, seq=f.problems[0], problem=f.problems[1], source=f.problems[2])
        if history_rows:
            columns["kind"].extend([HISTORY] * len(f.tests))
            columns["run"].extend([run] * len(f.tests))
            columns["test"].extend(f.tests)
            for name in OUTPUT.names[3:]:
                columns[name].extend([None] * len(f.tests))
    return pa.RecordBatch.from_pydict(columns, schema=OUTPUT)


def _set_aside_problems(table: pa.Table, found: dict[str, _Found]) -> pa.Table:
    """The records the reader could use; ``(count, first problem, its source)`` of the flagged ones of
    each run is added to ``found``."""
    flags = table.column(PROBLEM)
    if flags.null_count == table.num_rows:
        return table
    flagged = pc.is_valid(flags)
    bad = table.filter(flagged)
    for run in bad.column("run").unique().to_pylist():
        of_run = bad.filter(pc.equal(bad.column("run"), run))
        earlier = found.setdefault(run, _Found()).problems
        count, problem, source = of_run.num_rows, of_run.column(PROBLEM)[0].as_py(), of_run.column(SOURCE)[0].as_py()
        found[run].problems = (count, problem, source) if earlier is None else (earlier[0] + count, *earlier[1:])
    return table.filter(pc.invert(flagged))


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused while a bucket is checked.

    A bucket becomes tens of thousands of row tuples at once, and every 700 new objects the
    collector scans the young ones, then promotes and rescans them: 45% of the time spent
    turning columns into rows (measured: 2.9 s instead of 1.6 s of CPU per million). The rows
    and facts form no cycles, so reference counting frees them all when the bucket is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check_table(table: pa.Table, found: dict[str, _Found]) -> dict[str, _Found]:
    """Check every history of ``table`` (any order, any runs), adding what they show to ``found``."""
    table = _set_aside_problems(table, found)
    with _no_cycle_collection():
        for run, test, rows in columnar.table_histories(table) if table.num_rows else ():
            anomalies, counts = check_one(run, test, rows)
            f = found.setdefault(run, _Found())
            f.anomalies.extend(anomalies)
            f.sends = f.sends + counts
            f.tests.append(test)
    return found


def check_bucket(key: tuple[Any, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The worker side of the grouped job: one bucket ``(run, hash(test) mod n)`` of whole histories in;
    their anomalies, one row of their send counts and one of their flagged records out.

    Spark hands a group's rows over in no particular order: the bucket is sorted by
    ``(test, index)`` in Arrow and cut into histories (:func:`ackspec.pipeline.columnar.table_histories`),
    each checked by :func:`ackspec.history.checks.check_one`."""
    run = key[0].as_py()
    found = _check_table(pa.Table.from_batches(list(batches)), {run: _Found()})
    yield _output(found, history_rows=False)


def _usable(batches: Iterator[pa.RecordBatch], found: dict[str, _Found]) -> Iterator[pa.RecordBatch]:
    """The batches without their flagged records, which are counted per run in ``found`` instead."""
    for batch in batches:
        yield from _set_aside_problems(pa.Table.from_batches([batch]), found).to_batches()


def check_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The worker side of the partition-wise job: the records of one input partition (any runs) in,
    as they come; per run its anomalies, send counts and flagged records out, and a :data:`HISTORY`
    row per history checked, by which :meth:`SparkCheck.split_histories` proves that no history
    was cut.

    Files are written a history at a time, so each history usually arrives as one stretch of
    rows in index order, and is checked as soon as it ends: the worker holds one batch and one
    history, not the partition. A history that comes back after another one, or whose indexes go
    backwards, gets a second :data:`HISTORY` row instead, so the proof fails and the grouped plan
    (which sorts) checks the histories."""
    found: dict[str, _Found] = {}
    seen: set[tuple[str, str]] = set()
    with _no_cycle_collection():
        for run, test, rows in columnar.histories(_usable(batches, found)):
            f = found.setdefault(run, _Found())
            f.tests.append(test)
            indexes = [r.index for r in rows]
            if (run, test) in seen or indexes != sorted(indexes):
                f.tests.append(test)
                continue
            seen.add((run, test))
            anomalies, counts = check_one(run, test, rows)
            f.anomalies.extend(anomalies)
            f.sends = f.sends + counts
    if found:
        yield _output(found, history_rows=True)


def _rule_record() -> Column:
    """The Spark predicate of :func:`ackspec.history.checks.is_rule_record`; flagged records
    are kept too, so their group counts them."""
    any_type = [str(op) for op, types in RULE_RECORDS.items() if types is None]
    wanted = F.col(PROBLEM).isNotNull() | F.col("value").isNotNull() | F.col("op").isin(*any_type)
    for op, types in RULE_RECORDS.items():
        if types is not None:
            wanted = wanted | ((F.col("op") == str(op)) & F.col("type").isin(*sorted(str(t) for t in types)))
    return wanted


def _unknown_enum() -> Column:
    """A record whose operation or type this version does not know: flagged, never dropped silently."""
    ops, types = [str(op) for op in Op], [str(t) for t in RecordType]
    return (F.when(~F.col("op").isin(*ops), F.format_string("history record with unknown op '%s'", F.col("op")))
            .when(~F.col("type").isin(*types), F.format_string("history record with unknown type '%s'", F.col("type"))))


def prepare(histories: DataFrame) -> DataFrame:
    """The columns the rules read, the records that matter, and every flagged record."""
    casts = {"index": "long", "seq": "long", "delivery_count": "int", "limit": "int", "redelivered": "boolean"}
    columns = set(histories.columns)
    problem = F.col(PROBLEM) if PROBLEM in columns else F.lit(None).cast("string")
    source = F.col(SOURCE) if SOURCE in columns else F.lit(None).cast("string")
    df = histories.select(
        *[F.coalesce(F.col("test"), F.lit("")).alias("test") if name == "test"
          else F.coalesce(F.col("run"), source, F.lit("")).alias("run") if name == "run"
          else F.col(f"`{name}`").cast(casts[name]).alias(name) if name in casts
          else F.col(f"`{name}`") for name in columnar.COLUMNS],
        F.coalesce(problem, _unknown_enum()).alias(PROBLEM), source.alias(SOURCE))
    return df.where(_rule_record())


def _summed(rows: DataFrame) -> DataFrame:
    """Anomaly rows as they are, send counts and problems summed per run (a DataFrame aggregate)."""
    key = [F.when(F.col("kind").isin(SENDS, PROBLEMS), F.lit(None)).otherwise(F.col(c)).alias(c)
           if c not in ("kind", "run") else F.col(c) for c in ANOMALY_COLUMNS]
    return (rows.groupBy(*key).agg(
        F.sum("confirmed").alias("confirmed"), F.sum("failed").alias("failed"),
        F.sum("indeterminate").alias("indeterminate"),
        F.sum(F.when(F.col("kind") == PROBLEMS, F.col("seq"))).alias("records"),
        F.count(F.lit(1)).alias("n"), F.min("problem").alias("problem"), F.min("source").alias("source")))


@dataclass(frozen=True, slots=True)
class SparkCheck:
    """The check of prepared history rows (:func:`prepare`); nothing runs until :meth:`collect` or
    :meth:`write` is called.

    Two plans state the same check. :meth:`partition_wise` checks the histories of each input
    partition where it was read (``mapInArrow``): no shuffle and no sort in the JVM, which cost
    a fifth of the CPU at 10M operations (docs/pipeline-benchmark.md). It is right only when no
    history is cut across input partitions, which a run's files usually guarantee (one test's
    records are written by one task) but nothing enforces; so its output carries a
    :data:`HISTORY` row per history checked, and :meth:`rows` counts the histories seen in more
    than one partition (a small aggregate over those rows) before using it. When some are, the
    :meth:`grouped` plan (``groupBy(run, bucket).applyInArrow``: every history whole in one
    group) is run instead."""

    prepared: DataFrame
    buckets: int = BUCKETS

    def partition_wise(self) -> DataFrame:
        """Output rows (:data:`OUTPUT`) of each input partition's histories, :data:`HISTORY` rows included."""
        return self.prepared.mapInArrow(check_partition, OUTPUT_DDL)

    def grouped(self) -> DataFrame:
        """Output rows of histories grouped by run and a hash bucket of their tests (a shuffle)."""
        bucketed = self.prepared.withColumn(BUCKET, F.pmod(F.xxhash64("test"), F.lit(self.buckets)))
        return bucketed.groupBy("run", BUCKET).applyInArrow(check_bucket, OUTPUT_DDL)

    @staticmethod
    def split_histories(partition_rows: DataFrame) -> int:
        """How many histories :meth:`partition_wise` saw in more than one input partition."""
        histories = partition_rows.where(F.col("kind") == HISTORY).groupBy("run", "test").count()
        return int(histories.where(F.col("count") > 1).count())

    @contextmanager
    def rows(self) -> Iterator[DataFrame]:
        """The output rows, from the partition-wise plan when it checked every history whole.

        That plan's rows are kept (``persist``: they are few, a row per anomaly and per
        history) while the proof runs, and dropped on exit."""
        fast = self.partition_wise().persist(StorageLevel.MEMORY_AND_DISK)
        try:
            split = self.split_histories(fast)
            if split:
                progress(f"{split} histories span input partitions: checking them grouped by test instead")
            yield self.grouped() if split else fast.where(F.col("kind") != HISTORY)
        finally:
            fast.unpersist()

    def collect(self) -> CheckResult:
        """Run the job; bring back the anomalies and the per-run sums (not a row per history)."""
        with self.rows() as rows:
            return result_of(_summed(rows).collect())

    def write(self, uri: str) -> dict[str, Any]:
        """Write every output row to ``uri`` (Parquet, any Hadoop file system); return the totals."""
        with self.rows() as rows:
            rows.write.mode("overwrite").parquet(uri)
            spark = rows.sparkSession
        written = spark.read.parquet(uri)
        totals = written.groupBy("kind").agg(F.count(F.lit(1)).alias("n"), F.sum("confirmed").alias("confirmed"),
                                             F.sum("failed").alias("failed"),
                                             F.sum("indeterminate").alias("indeterminate"),
                                             F.sum("seq").alias("seq")).collect()
        by_kind = {r["kind"]: r["n"] for r in totals if r["kind"] not in (SENDS, PROBLEMS)}
        sends = next((r for r in totals if r["kind"] == SENDS), None)
        problem = next((r for r in totals if r["kind"] == PROBLEMS), None)
        return {"anomalies": sum(by_kind.values()), "by_kind": by_kind,
                "sends": {k: int(sends[k] or 0) if sends else 0 for k in ("confirmed", "failed", "indeterminate")},
                "problem_records": int(problem["seq"]) if problem else 0}


def result_of(rows: list[Any]) -> CheckResult:
    """A :class:`CheckResult` of collected :meth:`SparkCheck.summed` rows."""
    found: list[Anomaly] = []
    sends = SendCounts()
    problems: list[Problem] = []
    for r in rows:
        if r["kind"] == SENDS:
            sends = sends + SendCounts(r["confirmed"] or 0, r["failed"] or 0, r["indeterminate"] or 0)
        elif r["kind"] == PROBLEMS:
            problems.append(Problem(r["run"], r["source"] or r["run"], int(r["records"]), r["problem"]))
        else:
            anomaly = Anomaly.make(AnomalyKind(r["kind"]), r["run"], r["test"], r["destination"], r["producer"],
                                   r["seq"], list(r["operations"]), decisive=bool(r["decisive"]))
            found.extend([anomaly] * int(r["n"]))
    return CheckResult(tuple(sorted(found)), sends, problems=tuple(sorted(problems)))


def check_dataframe(histories: DataFrame, buckets: int = BUCKETS) -> SparkCheck:
    """The check of a DataFrame of history rows (schema of :mod:`ackspec.pipeline.schema`)."""
    return SparkCheck(prepare(histories), buckets)


def check_histories_spark(histories: DataFrame) -> CheckResult:
    """Run the checks and collect anomalies, send counts and problems to the driver."""
    return check_dataframe(histories).collect()
