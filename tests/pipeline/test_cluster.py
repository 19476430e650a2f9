"""The history checks on a real multi-process cluster, submitted with ``spark-submit``.

``local-cluster[2,1,1024]`` starts a master, two workers and their executors as separate
JVMs on this machine, each with its own Python workers: the groups are shipped, checked
and written the way a standalone or YARN cluster would. The anomalies and send counts
written by the ``spark-submit`` application (:mod:`ackspec.pipeline.submit`) must be those
of local mode and of the single-process checker, and exactly the injected ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest

from ackspec.history.anomalies import Anomaly, AnomalyKind, SendCounts
from ackspec.history.checks import check_histories
from ackspec.pipeline import submit
from ackspec.pipeline.checks_spark import PROBLEMS, SENDS, check_histories_spark
from ackspec.pipeline.schema import read_run, records_to_arrow
from ackspec.pipeline.synthetic import generate_suite
from ackspec.results.layout import RunDir

CLUSTER = "local-cluster[2,1,1024]"
SEED = 20261126


def _write_runs(root: Path) -> tuple[list[RunDir], list[Any]]:
    """Two run directories: one with JSON lines, one with Parquet (written without Spark)."""
    runs, records = [], []
    for name, parquet in (("run-json", False), ("run-parquet", True)):
        histories = list(generate_suite(24, seed=SEED, anomaly_rate=0.75, run=name, target="synthetic"))
        run = RunDir(root / name)
        run.histories.mkdir(parents=True)
        for h in histories:
            records.extend(h.records)
            if not parquet:
                run.history_path(h.records[0].test or "t").write_text(
                    "".join(r.to_json() + "\n" for r in h.records), encoding="utf-8")
        if parquet:
            folder = run.histories_parquet / f"run={name}" / "target=synthetic"
            folder.mkdir(parents=True)
            table = records_to_arrow([r for h in histories for r in h.records]).drop(["run", "target"])
            pq.write_table(table, folder / "part-0.parquet")
        runs.append(run)
    return runs, records


def _written(out: Path) -> tuple[list[Anomaly], SendCounts, int]:
    rows = pq.read_table(out).to_pylist()
    anomalies = sorted(Anomaly.make(AnomalyKind(r["kind"]), r["run"], r["test"], r["destination"], r["producer"],
                                    r["seq"], r["operations"], decisive=bool(r["decisive"]))
                       for r in rows if r["kind"] not in (SENDS, PROBLEMS))
    sends = SendCounts()
    for r in rows:
        if r["kind"] == SENDS:
            sends = sends + SendCounts(r["confirmed"], r["failed"], r["indeterminate"])
    return anomalies, sends, sum(1 for r in rows if r["kind"] == PROBLEMS)


@pytest.mark.timeout(900)  # three JVMs and their Python workers start on 2 cores: minutes on a loaded machine
def test_a_two_worker_cluster_finds_what_local_mode_and_one_process_find(tmp_path: Path, spark: Any) -> None:
    runs, records = _write_runs(tmp_path)
    out = tmp_path / "checks"
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [str(spark_submit), "--master", CLUSTER, "--conf", "spark.executor.memory=512m",
         "--conf", "spark.sql.shuffle.partitions=4", submit.__file__,
         *(run.root.as_uri() for run in runs), "--out", out.as_uri()],
        capture_output=True, text=True, timeout=780, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    totals = json.loads(done.stdout.strip().splitlines()[-1])
    assert totals["master"] == CLUSTER

    expected = sorted(a for a in check_histories(records).anomalies)
    python = check_histories(records)
    frames = [read_run(spark, run) for run in runs]
    local = check_histories_spark(frames[0].unionByName(frames[1]))
    on_cluster, sends, problems = _written(out)

    injected = sorted(a for run in ("run-json", "run-parquet")
                      for h in generate_suite(24, seed=SEED, anomaly_rate=0.75, run=run, target="synthetic")
                      for a in h.expected)
    assert {a.kind for a in injected} == set(AnomalyKind)
    assert on_cluster == list(local.anomalies) == list(python.anomalies) == expected == injected
    assert sends == local.sends == python.sends
    assert problems == 0 and local.problems == ()
    assert totals["anomalies"] == len(injected)
