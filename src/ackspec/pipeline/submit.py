"""The history checks as a ``spark-submit`` application: run directories in, anomaly rows out, by URI.

    spark-submit --master spark://host:7077 "$(python -c 'import ackspec.pipeline.submit as m; print(m.__file__)')" \\
        hdfs:///ackspec/runs/20261122T103200-ab12cd file:///data/runs/other-run --out hdfs:///ackspec/checks/nightly

Also ``python -m ackspec.pipeline.submit [--master URL] RUN_URI... --out URI`` without
``spark-submit``. Each RUN_URI is a run directory (docs/run-directory.md) on any Hadoop
file system the cluster has, or a local path or glob of them (resolved as ``ackspec
report`` resolves them); its ``histories.parquet`` is read if present, else its
``histories/*.jsonl``. Every output row of the check job (:data:`ackspec.pipeline.checks_spark.OUTPUT`:
anomalies, per-history send counts, per-run counts of unusable records) is written as
Parquet to ``--out``; one JSON line of totals goes to stdout. Nothing that grows with the
number of operations is collected on the driver. Exit status: 0 when the histories were
checked, 2 when some records could not be used (they are counted per run in the output
and on stderr) or the input is bad (one line).
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # run as a script: our sibling modules (schema, session ...) must not shadow top-level ones

import argparse
import json
import time
from typing import Any

from ackspec.errors import AckspecError
from ackspec.pipeline.schema import as_uri, read_run
from ackspec.pipeline.session import get_session, progress
from ackspec.results.layout import resolve_run_dirs


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ackspec-spark-check",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("runs", nargs="+", metavar="RUN_URI", help="run directory (URI or local path)")
    parser.add_argument("--out", required=True, metavar="URI", help="where the output rows are written (Parquet)")
    parser.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    return parser.parse_args(argv)


def run_uris(names: list[str]) -> list[tuple[str, bool]]:
    """``(uri, named)`` per run: URIs as they are (named: they must hold histories); local paths and
    globs resolved like ``ackspec report`` does (a glob skips folders without ``results.json`` and
    takes the sub-runs of a plain run's folder; a run without histories, such as a client run, is
    skipped as the report skips it)."""
    uris: list[tuple[str, bool]] = []
    for name in names:
        if "://" in name:
            uris.append((name, True))
        else:
            uris.extend((as_uri(run.root), False) for run in resolve_run_dirs([name]))
    return uris


def check(spark: Any, runs: list[str], out: str) -> dict[str, Any]:
    """Check the runs' histories with one job; write the rows to ``out``; return the totals."""
    from ackspec.pipeline.checks_spark import check_dataframe  # noqa: PLC0415

    frames = []
    for run, named in run_uris(runs):
        frame = read_run(spark, run)
        if frame is None and named:
            raise AckspecError(f"{run}: no histories (neither histories.parquet nor histories/*.jsonl)")
        if frame is not None:
            frames.append(frame)
    if not frames:
        raise AckspecError(f"no histories in any of: {' '.join(runs)}")
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return check_dataframe(union).write(as_uri(out))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    started = time.monotonic()
    spark = get_session(args.master, app_name="ackspec-history-check")
    try:
        totals = check(spark, args.runs, args.out)
        totals["master"] = spark.sparkContext.master
    except AckspecError as exc:
        print(f"ackspec: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()  # a cluster's workers would otherwise relaunch executors while the driver exits
    totals["seconds"] = round(time.monotonic() - started, 1)
    totals["out"] = as_uri(args.out)
    print(json.dumps(totals, sort_keys=True))
    if totals["problem_records"]:
        progress(f"{totals['problem_records']} history record(s) could not be used: rows of kind 'problem' "
                 f"in {totals['out']} name them per run")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
