"""The Spark/Parquet schema of history records, and reading and converting histories.

One row per :class:`ackspec.history.record.Record`, one column per field, in the
order of the dataclass; ``value`` (free-form JSON) is stored as its JSON text, and
``v`` is the history schema version of the row. On disk the Parquet dataset is
partitioned by ``run`` and ``target`` (``histories.parquet/run=<id>/target=<t>/``),
so a report over many runs prunes whole directories. ``docs/history-format.md``
documents every column.

Readers take URIs (``file://``, ``hdfs://``, whatever Hadoop file systems the cluster
has) and never drop a record silently: a line that is not JSON, a record of an unknown
schema version or without type, op or index is kept with its :data:`PROBLEM` column set
and its :data:`SOURCE` file, so the check job counts such records per run instead of
failing (:class:`~ackspec.history.anomalies.Problem`). A corrupt Parquet file of a
local run is an :class:`~ackspec.errors.AckspecError` naming it (its footer is read
first). PySpark is imported only by the functions that use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ackspec.errors import AckspecError
from ackspec.history.record import SCHEMA_VERSION, Record
from ackspec.results.layout import HISTORIES_DIR, HISTORIES_PARQUET, HISTORY_SUFFIX, PARQUET_PARTITIONS, RunDir

COLUMNS: tuple[tuple[str, str], ...] = (
    ("run", "string"),
    ("index", "bigint"),
    ("time_ns", "bigint"),
    ("type", "string"),
    ("op", "string"),
    ("process", "string"),
    ("target", "string"),
    ("test", "string"),
    ("session", "string"),
    ("destination", "string"),
    ("subscription", "string"),
    ("producer", "string"),
    ("seq", "bigint"),
    ("message_id", "string"),
    ("ack_id", "string"),
    ("ack_mode", "string"),
    ("transaction", "string"),
    ("persistent", "boolean"),
    ("redelivered", "boolean"),
    ("delivery_count", "int"),
    ("outcome", "string"),
    ("limit", "int"),
    ("error", "string"),
    ("value", "string"),
    ("v", "int"),
)
"""Column name and Spark SQL type, in order. ``value`` holds JSON text; ``v`` the schema version."""

DDL = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)


PROBLEM = "_problem"
"""Column of a read history row: what is wrong with it (``None`` when nothing)."""
SOURCE = "_source"
"""Column of a read history row: its file, set on flagged rows only."""


def spark_schema() -> Any:
    """The pyspark StructType of a history row."""
    from pyspark.sql.types import StructType  # noqa: PLC0415

    return StructType.fromDDL(DDL)


def arrow_schema() -> Any:
    types = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "boolean": pa.bool_()}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def record_row(record: Record) -> tuple[Any, ...]:
    """A record as a row tuple in :data:`COLUMNS` order."""
    value = None if record.value is None else json.dumps(record.value, separators=(",", ":"), sort_keys=True)
    return (record.run, record.index, record.time_ns, str(record.type), str(record.op), record.process, record.target,
            record.test, record.session, record.destination, record.subscription, record.producer, record.seq,
            record.message_id, record.ack_id, record.ack_mode, record.transaction, record.persistent,
            record.redelivered, record.delivery_count, record.outcome, record.limit, record.error, value,
            SCHEMA_VERSION)


def records_to_arrow(records: Sequence[Record]) -> Any:
    """A pyarrow Table of records (used to write Parquet without Spark, e.g. by the benchmark)."""
    rows = [record_row(r) for r in records]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in COLUMNS]
    schema = arrow_schema()
    return pa.Table.from_arrays([pa.array(list(col), type=schema.field(i).type) for i, col in enumerate(columns)],
                                schema=schema)


def row_to_record(row: dict[str, Any]) -> Record:
    """A Spark/Arrow row (as a dict) back to a Record (``value`` decoded from JSON)."""
    data = {k: v for k, v in row.items() if v is not None}
    if "value" in data:
        data["value"] = json.loads(data["value"])
    return Record.from_mapping(data)


# --- reading run directories ---------------------------------------------------------------------


def check_parquet(path: Path) -> None:
    """Open the footer of every Parquet file under ``path``; a corrupt one is an AckspecError naming it."""
    files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
    if not files:
        raise AckspecError(f"{path}: no Parquet files in this histories dataset")
    expected = {name for name, _ in COLUMNS} - set(PARQUET_PARTITIONS)
    for file in files:
        try:
            metadata = pq.read_metadata(file)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise AckspecError(f"{file}: corrupt Parquet file ({type(exc).__name__}: {exc})") from exc
        names = set(metadata.schema.names)
        missing = expected - names
        if missing:
            raise AckspecError(f"{file}: not an ackspec history (missing columns: {', '.join(sorted(missing))})")
        if "v" in names:  # schema versions from the footer statistics: no scan of the data
            column = metadata.schema.names.index("v")
            for group in range(metadata.num_row_groups):
                stats = metadata.row_group(group).column(column).statistics
                if stats is not None and stats.has_min_max and (stats.min, stats.max) != (SCHEMA_VERSION,) * 2:
                    bad = stats.max if stats.max != SCHEMA_VERSION else stats.min
                    raise AckspecError(
                        f"{file}: history schema version {bad} is not supported (expected {SCHEMA_VERSION})")


def as_uri(location: str | Path) -> str:
    """A local path as a ``file://`` URI; a URI (``scheme://...``) as it is.

    Not percent-encoded: Hadoop's ``Path`` takes the characters as they are, and a glob
    (``histories/*.jsonl``) must stay a glob."""
    text = str(location)
    return text if "://" in text else f"file://{Path(text).resolve()}"


def _version_problem() -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.when(F.col("v").isNotNull() & (F.col("v") != SCHEMA_VERSION),
                  F.format_string(f"history schema version %d is not supported (expected {SCHEMA_VERSION})",
                                  F.col("v")))


def read_parquet(spark: Any, location: str | Path) -> Any:
    """The histories of a Parquet dataset (partition columns restored); a local one's footers checked first."""
    uri = as_uri(location)
    if uri.startswith("file:"):
        check_parquet(Path(uri.removeprefix("file://")))
    df = spark.read.option("basePath", uri).parquet(uri)
    return _conform(df, uri, _version_problem())


def read_jsonl(spark: Any, files: Sequence[str | Path]) -> Any:
    """The histories of JSON-lines files (URIs or paths); unusable lines flagged, not dropped."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.types import StringType, StructField  # noqa: PLC0415

    schema = spark_schema().add(StructField("_corrupt_record", StringType(), True))
    df = (spark.read.schema(schema).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", "_corrupt_record").json([as_uri(f) for f in files]))
    problem = (F.when(F.col("_corrupt_record").isNotNull(),
                      F.concat(F.lit("malformed history line: "), F.substring("_corrupt_record", 1, 80)))
               .when(F.col("v").isNotNull() & (F.col("v") != SCHEMA_VERSION),
                     F.format_string(f"history schema version %d is not supported (expected {SCHEMA_VERSION})",
                                     F.col("v")))
               .when(F.col("type").isNull() | F.col("op").isNull() | F.col("index").isNull(),
                     F.lit("history record without type, op or index")))
    df = df.withColumn(PROBLEM, problem).withColumn(SOURCE, F.when(F.col(PROBLEM).isNotNull(),
                                                                   F.col("_metadata.file_path")))
    return df.drop("_corrupt_record").withColumn("v", F.coalesce(F.col("v"), F.lit(SCHEMA_VERSION)))


def _conform(df: Any, name: str, problem: Any = None) -> Any:
    from pyspark.sql import functions as F  # noqa: PLC0415

    columns = set(df.columns)
    missing = [c for c, _ in COLUMNS if c not in columns and c != "v"]
    if missing:
        raise AckspecError(f"{name}: not an ackspec history dataset (missing columns: {', '.join(missing)})")
    if "v" not in columns:
        df = df.withColumn("v", F.lit(SCHEMA_VERSION))
    flagged = problem if problem is not None else F.lit(None).cast("string")
    df = df.withColumn(PROBLEM, flagged)
    df = df.withColumn(SOURCE, F.when(F.col(PROBLEM).isNotNull(), F.col("_metadata.file_path")))
    return df.select(*[F.col(f"`{c}`").cast(kind).alias(c) for c, kind in COLUMNS], PROBLEM, SOURCE)


def _exists(spark: Any, uri: str) -> bool:
    """Whether ``uri`` exists, asked of the Hadoop file system that serves it."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return bool(path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path))


def read_run(spark: Any, run_dir: RunDir | str) -> Any | None:
    """The histories of one run directory (a local :class:`RunDir` or a URI): Parquet if present,
    else the JSON lines; ``None`` when it has none."""
    if isinstance(run_dir, RunDir):
        if run_dir.has_parquet():
            return read_parquet(spark, run_dir.histories_parquet)
        # one glob, not a path per file: a single listing when the DataFrame is planned
        return read_jsonl(spark, [run_dir.histories / f"*{HISTORY_SUFFIX}"]) if run_dir.history_files() else None
    root = as_uri(run_dir).rstrip("/")
    if _exists(spark, f"{root}/{HISTORIES_PARQUET}"):
        return read_parquet(spark, f"{root}/{HISTORIES_PARQUET}")
    pattern = f"{root}/{HISTORIES_DIR}/*{HISTORY_SUFFIX}"
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(pattern)
    found = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).globStatus(path)
    return read_jsonl(spark, [pattern]) if found else None


def records_dataframe(spark: Any, records: Iterable[Record]) -> Any:
    """A DataFrame of in-memory records (tests, small histories)."""
    return spark.createDataFrame([record_row(r) for r in records], schema=spark_schema())


def convert_run(spark: Any, run_dir: RunDir) -> Path:
    """Write a run's JSON-lines histories as ``histories.parquet`` partitioned by run and target;
    refuses (naming the file) when some line cannot be used."""
    files = run_dir.history_files()
    if not files:
        raise AckspecError(f"{run_dir.histories}: no *.jsonl histories to convert")
    df = read_jsonl(spark, files)
    bad = df.where(df[PROBLEM].isNotNull()).select(PROBLEM, SOURCE).limit(1).collect()
    if bad:
        raise AckspecError(f"{bad[0][SOURCE].removeprefix('file://')}: {bad[0][PROBLEM]}")
    write_parquet(df.drop(PROBLEM, SOURCE), run_dir.histories_parquet)
    return run_dir.histories_parquet


def write_parquet(df: Any, location: str | Path, mode: str = "overwrite") -> None:
    df.write.mode(mode).partitionBy(*PARQUET_PARTITIONS).parquet(as_uri(location))
