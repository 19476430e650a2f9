"""The SparkSession of the pipeline: local and quiet by default, any cluster by URL.

``local[*]`` sized for a small machine (2 cores, 24 GiB): few shuffle partitions,
8 GiB of driver memory (in local mode the executors live in the driver JVM, so this is
the heap every check runs in; ``ACKSPEC_SPARK_DRIVER_MEMORY`` overrides it), no UI,
Spark's own logging at ERROR (the configuration in
``resources/log4j2.properties``) so the user sees ackspec's progress lines, not
the JVM's start-up chatter. ``--master spark://...`` (or ``yarn``, ``k8s://...``)
runs the same job on a cluster; under ``spark-submit`` the submitted master wins.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

JAVA17_OPTIONS = " ".join(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
                    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs",
                    "sun.security.action", "sun.util.calendar")
) + " -Djdk.reflect.useDirectMethodHandle=false -XX:+IgnoreUnrecognizedVMOptions"
"""Module openings Spark needs on Java 17 (Spark's launcher adds them too; harmless when repeated)."""

LOCAL_SETTINGS: dict[str, str] = {
    "spark.driver.memory": "8g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    # the checks partition everything by (run, test) once: let joins and windows on supersets of
    # those keys reuse that partitioning instead of shuffling again
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.requireAllClusterKeysForDistribution": "false",
    "spark.sql.autoBroadcastJoinThreshold": "64MB",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.parquet.compression.codec": "snappy",
}


LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC"
"""Extra JVM options of a local master (executors inside the driver JVM). The throughput
collector: with G1 a 10M-operation check took ~13% more CPU on 2 cores (driver, JVM and
workers: 94 -> 82 s, docs/pipeline-benchmark.md). Clusters keep their own collector."""


def log4j_config() -> str:
    return str(resources.files("ackspec.pipeline").joinpath("resources/log4j2.properties"))


def progress(message: str) -> None:
    """One line of our own progress on stderr (Spark's console progress bar is off)."""
    print(f"ackspec: {message}", file=sys.stderr, flush=True)


def get_session(master: str | None = None, *, app_name: str = "ackspec-pipeline",
                extra: dict[str, str] | None = None) -> Any:
    """A SparkSession for the pipeline; reuses the active one (tests share one per session)."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    config = log4j_config()
    java_options = f"{JAVA17_OPTIONS} -Dlog4j2.configurationFile=file:{config} -Dlog4j.configurationFile=file:{config}"
    builder = SparkSession.builder.appName(app_name)
    submitted = "spark.master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or os.environ.get("SPARK_ENV_LOADED")
    if master or not submitted:
        builder = builder.master(master or DEFAULT_MASTER)
    for key, value in LOCAL_SETTINGS.items():
        remote = master is not None and not master.startswith("local")
        if remote and key in ("spark.driver.host", "spark.driver.bindAddress"):
            continue  # a cluster must be able to reach the driver
        builder = builder.config(key, value)
    local = (master or ("" if submitted else DEFAULT_MASTER)).startswith("local")
    driver_options = f"{java_options} {LOCAL_JAVA_OPTIONS}" if local else java_options
    builder = builder.config("spark.driver.extraJavaOptions", driver_options)
    builder = builder.config("spark.executor.extraJavaOptions", java_options)
    if os.environ.get("ACKSPEC_SPARK_DRIVER_MEMORY"):  # e.g. 12g for tens of millions of operations locally
        builder = builder.config("spark.driver.memory", os.environ["ACKSPEC_SPARK_DRIVER_MEMORY"])
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not local:
        ship_package(spark)
    return spark


def ship_package(spark: Any) -> Path:
    """Send this ackspec package to the executors of a cluster (``addPyFile`` of a zip of it).

    The checks run ``ackspec.pipeline.checks_python.check_one`` in the executors' Python
    workers (:mod:`ackspec.pipeline.checks_spark`); a cluster's nodes then need only Python,
    pyarrow and pandas, not an ackspec installation of the same version as the driver's.
    """
    package = Path(__file__).resolve().parents[1]
    archive = Path(tempfile.mkdtemp(prefix="ackspec-pyfiles-")) / "ackspec.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, Path("ackspec") / file.relative_to(package))
    spark.sparkContext.addPyFile(str(archive))
    return archive
