"""Write the class-data sharing archive of small Spark sessions now: ``python -m ackspec.pipeline.warmup``.

The first ``ackspec report --engine spark`` of a machine would otherwise start its JVM without
the archive (:mod:`ackspec.pipeline.class_cache`). The install script runs this once; a small
session that finds no archive starts it in the background when its process ends.

It runs, in a child process, what a report over one suite run runs on Spark (a small local
session reading JSON-lines histories, the checks, the per-run totals back on the driver), over
a few synthetic histories, with the child's JVM writing the archive as it exits. The child's
output pipes close only when that JVM has exited, so when :func:`write_archive` returns, the
archive is complete and is adopted under its final name.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ackspec.pipeline import class_cache

TIMEOUT_SECONDS = 900.0
"""Bound on the child (a JVM start and one small job; minutes on a saturated 2-core machine)."""

HISTORIES = 40
"""Synthetic tests in the warm-up run: enough for every rule and record shape, small enough to take seconds."""


def write_archive(timeout: float = TIMEOUT_SECONDS) -> tuple[Path | None, str]:
    """Write the archive if it is missing; returns its path (``None``: none could be written) and what happened."""
    os.environ.setdefault(class_cache.MODE_VARIABLE, "1")
    if os.environ[class_cache.MODE_VARIABLE] == "0":
        return None, f"off ({class_cache.MODE_VARIABLE}=0)"
    directory = class_cache.cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return None, f"no writable cache directory {directory}: {exc.strerror}"
    final = class_cache.archive_path(directory)
    if final is None:
        return None, "no Java found (JAVA_HOME or java on PATH)"
    class_cache.adopt_finished(final)
    if final.is_file():
        return final, f"present: {final}"
    env = {**os.environ, class_cache.MODE_VARIABLE: "write"}
    child = subprocess.Popen([sys.executable, "-m", "ackspec.pipeline.warmup", "--job"], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = child.communicate(timeout=timeout)  # returns once the JVM, which holds the pipes, has exited
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return None, f"the warm-up job did not finish within {timeout:.0f} s"
    written = class_cache.writing_path(final, child.pid)
    if child.returncode != 0 or not written.is_file() or written.stat().st_size == 0:
        written.unlink(missing_ok=True)
        last = err.strip().splitlines()[-1:] or [f"exit {child.returncode}"]
        return None, f"the warm-up job wrote no archive: {last[0][:300]}"
    if final.exists():  # another writer finished first: theirs is as good
        written.unlink()
    else:
        os.replace(written, final)
    return final, f"written: {final} ({final.stat().st_size // 2**20} MiB)"


def run_job() -> None:
    """What a report runs on Spark over one small run, in this process's small local session."""
    from ackspec.pipeline.checks_spark import check_dataframe  # noqa: PLC0415 - PySpark only in the child
    from ackspec.pipeline.schema import read_run  # noqa: PLC0415
    from ackspec.pipeline.session import get_session  # noqa: PLC0415
    from ackspec.pipeline.synthetic import generate_suite  # noqa: PLC0415
    from ackspec.results.layout import RunDir  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="ackspec-warmup-") as tmp:
        run = RunDir(Path(tmp) / "run")
        run.histories.mkdir(parents=True)
        for history in generate_suite(HISTORIES, seed=1, anomaly_rate=0.5, run="warmup", target="warmup"):
            run.history_path(history.records[0].test or "t").write_text(
                "".join(r.to_json() + "\n" for r in history.records), encoding="utf-8")
        spark = get_session("local[*]", app_name="ackspec-warmup", small=True)
        frame = read_run(spark, run)
        if frame is None:  # pragma: no cover - the histories were just written
            raise RuntimeError(f"{run.histories}: no histories read")
        check_dataframe(frame).collect()
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ackspec.pipeline.warmup", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print nothing (the background writer)")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        run_job()
        return 0
    final, what = write_archive()
    if not args.quiet:
        print(f"ackspec: Spark class archive: {what}", file=sys.stderr)
    return 0 if final is not None or os.environ.get(class_cache.MODE_VARIABLE) == "0" else 1


if __name__ == "__main__":
    sys.exit(main())
