"""The SparkSession of the pipeline: one per process, tuned for a small machine only when local.

Any Spark master URL works (``local[*]``, ``local-cluster[2,1,1024]``, ``spark://host:7077``,
``yarn``, ``k8s://...``); under ``spark-submit`` the submitted master and settings win.
Only a ``local[...]`` master gets the local tuning (:data:`LOCAL_SETTINGS`): a few shuffle
partitions, driver memory sized for executors living in the driver JVM, the driver bound
to loopback, the throughput collector. A cluster keeps its own sizing: forcing four
shuffle partitions or a loopback driver address there would cap or break the job.

Every master gets :data:`COMMON_SETTINGS` (no UI, UTC, Arrow) and Spark's own logging at
ERROR (``resources/log4j2.properties``), so the user sees ackspec's progress lines, not
the JVM's start-up chatter. One session per process: :func:`get_session` returns the
active one when the caller does not ask for another master.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

from ackspec.pipeline import class_cache

DEFAULT_MASTER = "local[*]"

JAVA17_OPTIONS = " ".join(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
                    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs",
                    "sun.security.action", "sun.util.calendar")
) + " -Djdk.reflect.useDirectMethodHandle=false -XX:+IgnoreUnrecognizedVMOptions"
"""Module openings Spark needs on Java 17 (Spark's launcher adds them too; harmless when repeated)."""

COMMON_SETTINGS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
}
"""Settings of every master: they change what the job prints and writes, and what it costs, not how
big it may grow. ``maxBytesPerBatch`` at its largest turns off Spark's byte bound on the Arrow
batches sent to Python, which measures the whole batch after every row: 30% of the JVM's samples
of the 10M check (docs/pipeline-benchmark.md). A batch stays bounded by ``maxRecordsPerBatch``
(10,000 history rows of a few hundred bytes)."""

LOCAL_SETTINGS: dict[str, str] = {
    "spark.driver.memory": "8g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.files.minPartitionNum": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
"""A local master on a small machine (2 cores): the executors live in the driver JVM, so the
driver's heap is the checks' heap (``ACKSPEC_SPARK_DRIVER_MEMORY`` overrides it); few shuffle
partitions, so a report over one run is a handful of tasks, not 200."""

SMALL_SETTINGS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.sql.files.minPartitionNum": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.memory": "1g",
}
"""A local master for a small input (one suite run: a few MB of histories). One task per stage
(one Python worker to start, not two), no whole-stage code generation (compiling Java for a
few thousand rows costs more than interpreting them). Measured on one suite run (88
histories, 1.1 MB) at load 8-9: 17 s of CPU from start-up to anomalies instead of 27 s."""

SMALL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options of a small local session: the client compiler only and the serial collector,
which start faster; a long job would want C2 and the throughput collector instead."""

LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC"
"""Extra JVM options of a local master (executors inside the driver JVM). The throughput
collector spends less CPU than G1 on this short-lived, allocation-heavy job (measured in
docs/pipeline-benchmark.md). Clusters keep their own collector."""

_LOCAL = re.compile(r"local(\[[^\]]*\])?$")


def is_local(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver JVM (``local``, ``local[N]``, ``local[*]``).

    ``local-cluster[...]`` is not: it starts worker and executor processes like a real cluster."""
    return bool(_LOCAL.match(master))


def log4j_config() -> str:
    return str(resources.files("ackspec.pipeline").joinpath("resources/log4j2.properties"))


def progress(message: str) -> None:
    """One line of our own progress on stderr (Spark's console progress bar is off)."""
    print(f"ackspec: {message}", file=sys.stderr, flush=True)


def submitted_master() -> str | None:
    """The master ``spark-submit`` chose for this process, if it launched it."""
    if not os.environ.get("SPARK_ENV_LOADED") and "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return None
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 - Spark is imported only where it is used

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose properties hold the master
    return str(SparkConf().get("spark.master", DEFAULT_MASTER))


def session_settings(master: str, *, small: bool = False) -> dict[str, str]:
    """The configuration :func:`get_session` applies for ``master`` (before the caller's ``extra``);
    ``small``: tuned for start-up on a small input (local masters only)."""
    config = log4j_config()
    java = f"{JAVA17_OPTIONS} -Dlog4j2.configurationFile=file:{config} -Dlog4j.configurationFile=file:{config}"
    settings = dict(COMMON_SETTINGS)
    if is_local(master):
        settings.update(LOCAL_SETTINGS)
        if small:
            settings.update(SMALL_SETTINGS)
        settings["spark.driver.extraJavaOptions"] = f"{java} {SMALL_JAVA_OPTIONS if small else LOCAL_JAVA_OPTIONS}"
        if os.environ.get("ACKSPEC_SPARK_DRIVER_MEMORY"):  # e.g. 12g for tens of millions of operations
            settings["spark.driver.memory"] = os.environ["ACKSPEC_SPARK_DRIVER_MEMORY"]
    else:
        settings["spark.driver.extraJavaOptions"] = java
    settings["spark.executor.extraJavaOptions"] = java
    return settings


def get_session(master: str | None = None, *, app_name: str = "ackspec-pipeline", small: bool = False,
                extra: dict[str, str] | None = None) -> Any:
    """The process's SparkSession; reuses the active one unless another ``master`` is asked for.

    ``small``: the caller knows its input is small (one suite run); a local master then starts
    and runs with :data:`SMALL_SETTINGS`, its JVM mapping the classes of an earlier one
    (:mod:`ackspec.pipeline.class_cache`; when there is no archive yet, one is written in the
    background once this process ends). Ignored when a session is already running."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - Spark is imported only where it is used

    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = submitted_master()
    chosen = master or submitted or DEFAULT_MASTER
    if is_local(chosen) or chosen.startswith("local-cluster"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master or not submitted:
        builder = builder.master(chosen)
    settings = session_settings(chosen, small=small)
    if small and is_local(chosen) and not submitted:  # spark-submit has started its JVM already
        settings["spark.driver.extraJavaOptions"] += f" {class_cache.java_options()}"
        if class_cache.missing():
            class_cache.write_in_background()
    for key, value in {**settings, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(chosen):
        ship_package(spark)
    return spark


def ship_package(spark: Any) -> Path:
    """Send this ackspec package to the executors of a cluster (``addPyFile`` of a zip of it).

    The rules run in the executors' Python workers (:mod:`ackspec.pipeline.checks_spark`); a
    cluster's nodes then need only Python, pyarrow and pandas, not an ackspec installation of
    the same version as the driver's.
    """
    package = Path(__file__).resolve().parents[1]
    archive = Path(tempfile.mkdtemp(prefix="ackspec-pyfiles-")) / "ackspec.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, Path("ackspec") / file.relative_to(package))
    spark.sparkContext.addPyFile(str(archive))
    return archive
