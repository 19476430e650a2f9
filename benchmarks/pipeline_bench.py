"""Benchmark of the history checks: Spark local mode and a two-worker cluster vs the single-process checker.

    python benchmarks/pipeline_bench.py                                   # 1, 10, 30, 100 million operations
    python benchmarks/pipeline_bench.py --sizes 1 --masters 'local[*]' --python-max 1 --out ackspec-out/bench-pipeline
    python benchmarks/pipeline_bench.py --sizes 1 --report-run ackspec-out/RUN  # also time `ackspec report`

Data: synthetic histories (ackspec.pipeline.synthetic, about 30% of tests with one
injected anomaly) written once as a Parquet block of ``--block`` million operations
(partitioned run=/target= like a run directory's histories.parquet). Larger sizes
are made of copies of the block under different ``run=`` partitions (hard links):
every copy is a separate set of histories for the checks, so the work is the same as
for fresh data, but the generator does not have to run for minutes.

Each measurement runs in a fresh child process; the parent polls the resident memory
and CPU time (/proc: user + system, with what they reaped) of the child and all its
descendants, split into the driver (the
Python driver, its JVM and, in local mode, the Python workers) and each executor of a
cluster (a ``CoarseGrainedExecutorBackend`` JVM and its Python workers). The Spark
check is read + the check job + writing its rows (Parquet) to a directory; only
per-kind totals come back to the driver. It excludes the session start-up (listed
apart); "check CPU" is the CPU of the whole process tree (driver, JVMs, Python
workers) during the check, which the load of a shared machine does not inflate the
way it does the wall clock. After the timing, the written anomalies are compared in Spark with the
injected ones (``exceptAll`` both ways): ``missing`` and ``extra`` must be 0. The
Python time includes reading the Parquet into records. Results go to
``--out``/bench.json (ackspec.bench/1, so ``ackspec report`` plots them) and a
Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ackspec.history.checks import check_histories
from ackspec.pipeline.schema import COLUMNS, arrow_schema, records_to_arrow, row_to_record
from ackspec.pipeline.synthetic import generate_suite
from ackspec.results.layout import BENCH_SCHEMA

MILLION = 1_000_000
CLUSTER = "local-cluster[2,1,3072]"
"""Two workers of one core and 3 GiB each: separate executor JVMs, as on a real cluster."""
CLUSTER_SETTINGS = {"spark.executor.memory": "2200m", "spark.driver.memory": "1g",
                    "spark.sql.shuffle.partitions": "8"}
"""The cluster's driver gets 1 GiB of heap: it plans, schedules and receives per-kind totals only."""
EXPECTED_COLUMNS = ("kind", "run", "test", "destination", "producer", "seq", "operations", "decisive")
TICK = os.sysconf("SC_CLK_TCK")


def make_block(path: Path, operations: int, seed: int) -> dict[str, int]:
    """Write one block of synthetic histories and its injected anomalies; returns counts."""
    folder = path / "run=bench-000" / "target=synthetic"
    folder.mkdir(parents=True, exist_ok=True)
    keep = [name for name, _ in COLUMNS if name not in ("run", "target")]
    schema = pa.schema([arrow_schema().field(name) for name in keep])
    written = tests = 0
    batch: list[Any] = []
    expected: list[dict[str, Any]] = []
    part = 0
    for history in generate_suite(10**9, seed, anomaly_rate=0.3, run="bench-000", target="synthetic"):
        batch.extend(history.records)
        tests += 1
        expected.extend({**{k: v for k, v in a.to_dict().items() if k in EXPECTED_COLUMNS}, "kind": str(a.kind)}
                        for a in history.expected)
        written += len(history.records)
        if len(batch) >= 500_000 or written >= operations:
            table = records_to_arrow(batch).select(keep).cast(schema)
            pq.write_table(table, folder / f"part-{part:04d}.parquet")
            part += 1
            batch = []
            print(f"  generated {written:,} operations", file=sys.stderr, flush=True)
        if written >= operations:
            break
    pq.write_table(pa.Table.from_pylist(expected), path.parent / "block-expected.parquet")
    return {"operations": written, "tests": tests, "expected": len(expected)}


def make_dataset(block: Path, out: Path, copies: int) -> None:
    if out.exists():
        shutil.rmtree(out)
    for copy in range(copies):
        target = out / f"run=bench-{copy:03d}" / "target=synthetic"
        target.mkdir(parents=True)
        for file in (block / "run=bench-000" / "target=synthetic").glob("*.parquet"):
            os.link(file, target / file.name)


# --- measuring a process tree ----------------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, int, float, str]]:
    """pid -> (parent, resident bytes, CPU seconds incl. reaped children, command line) of every process."""
    found: dict[int, tuple[int, int, float, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            cpu = sum(int(x) for x in fields[11:15]) / TICK
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry.name)] = (int(fields[1]), rss, cpu, command)
    return found


def tree_usage(pid: int) -> tuple[int, dict[int, int], float]:
    """Resident bytes of the driver side of ``pid``'s tree, of each executor's subtree, and the tree's CPU."""
    processes = _processes()
    children: dict[int, list[int]] = {}
    for child, (parent, *_rest) in processes.items():
        children.setdefault(parent, []).append(child)
    driver, executors, cpu = 0, {}, 0.0
    stack = [(pid, None)]
    while stack:
        current, executor = stack.pop()
        if current not in processes:
            continue
        _, rss, used, command = processes[current]
        if executor is None and "CoarseGrainedExecutorBackend" in command:
            executor = current
        if executor is None:
            driver += rss
        else:
            executors[executor] = executors.get(executor, 0) + rss
        cpu += used
        stack.extend((child, executor) for child in children.get(current, []))
    return driver, executors, cpu


def measure(args: list[str], timeout: float) -> dict[str, Any]:
    """Run this script as a child in ``--child`` mode; poll its memory and CPU; return its JSON result."""
    load_before = os.getloadavg()
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peaks = {"driver": 0, "executor": 0, "executors": 0, "cpu": 0.0}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            driver, executors, cpu = tree_usage(process.pid)
            peaks["driver"] = max(peaks["driver"], driver)
            peaks["executor"] = max(peaks["executor"], max(executors.values(), default=0))
            peaks["executors"] = max(peaks["executors"], sum(executors.values()))
            peaks["cpu"] = max(peaks["cpu"], cpu)
            time.sleep(0.5)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        done.set()
        return {"error": f"timed out after {timeout:.0f} s", **peaks}
    done.set()
    thread.join()
    if process.returncode != 0:
        return {"error": f"exit {process.returncode}", **peaks}
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(peaks)
    # the machine is shared: the 1/5/15-minute load averages before and after, to report with the figure
    result["load"] = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
    return result


# --- the children ----------------------------------------------------------------------------------------


def child_spark(dataset: str, master: str, expected: str, out: str) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: PLC0415

    from ackspec.pipeline.checks_spark import PROBLEMS, SENDS, check_dataframe  # noqa: PLC0415
    from ackspec.pipeline.schema import as_uri, read_parquet  # noqa: PLC0415
    from ackspec.pipeline.session import get_session, is_local  # noqa: PLC0415

    t0 = time.perf_counter()
    spark = get_session(master, extra=None if is_local(master) else CLUSTER_SETTINGS)
    spark.range(1).count()
    startup = time.perf_counter() - t0
    t1, cpu1 = time.perf_counter(), tree_usage(os.getpid())[2]
    totals = check_dataframe(read_parquet(spark, dataset)).write(as_uri(out))
    seconds, check_cpu = time.perf_counter() - t1, tree_usage(os.getpid())[2] - cpu1
    # not timed: every injected anomaly found, and nothing else (compared in Spark, not on the driver)
    found = (spark.read.parquet(as_uri(out)).where(~F.col("kind").isin(SENDS, PROBLEMS))
             .select(*EXPECTED_COLUMNS))
    block = spark.read.parquet(as_uri(expected)).select(*EXPECTED_COLUMNS).drop("run")
    runs = spark.read.parquet(as_uri(dataset)).select("run").distinct()
    wanted = block.crossJoin(runs).select(*EXPECTED_COLUMNS)
    missing, extra = wanted.exceptAll(found).count(), found.exceptAll(wanted).count()
    spark.stop()
    return {"engine": "spark", "master": master, "seconds": seconds, "startup": startup, "check_cpu": check_cpu,
            **totals,
            "missing": missing, "extra": extra}


def child_python(dataset: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    records = []
    for file in sorted(Path(dataset).rglob("*.parquet")):
        run = file.parent.parent.name.split("=", 1)[1]
        for row in pq.read_table(file).to_pylist():
            row["run"] = run
            row["target"] = "synthetic"
            records.append(row_to_record(row))
    read = time.perf_counter() - t0
    result = check_histories(records)
    seconds = time.perf_counter() - t0
    by_kind = {str(k): v for k, v in result.by_kind().items() if v}
    return {"engine": "python", "seconds": seconds, "read": read, "anomalies": len(result.anomalies),
            "by_kind": by_kind, "sends": {"indeterminate": result.sends.indeterminate}}


def child_report(run_dir: str, engine: str, out: str) -> dict[str, Any]:
    """``ackspec report RUN --engine ENGINE`` as a user runs it: start-up included."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ackspec", "report", run_dir, "--engine", engine, "--out", out],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"ackspec report failed: {done.stderr.strip().splitlines()[-1:]}")
    return {"engine": engine, "seconds": seconds, "summary": done.stdout.strip().splitlines()[0]}


# --- the parent --------------------------------------------------------------------------------------------


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1,10,30,100", help="millions of operations (comma separated)")
    parser.add_argument("--masters", default=f"local[*];{CLUSTER}", help="Spark masters (semicolon separated)")
    parser.add_argument("--block", type=float, default=1.0, help="millions of operations per generated block")
    parser.add_argument("--python-max", type=float, default=1.0,
                        help="largest size (millions) the single-process checker is run on")
    parser.add_argument("--report-run", metavar="RUN_DIR",
                        help="also time `ackspec report` over this run directory (a copy), Spark and Python")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--out", default="ackspec-out/bench-pipeline")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--child", choices=("spark", "python", "report"), help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--expected", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    return parser.parse_args()


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    if args.child == "spark":
        return child_spark(args.dataset, args.master, args.expected, args.rows)
    if args.child == "python":
        return child_python(args.dataset)
    return child_report(args.dataset, args.engine, args.rows)


def block_meta(out: Path, block_ops: int, seed: int) -> dict[str, Any]:
    """The generated block (made once per seed and size, then reused)."""
    meta_file = out / "block.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    if meta.get("operations", 0) < block_ops or meta.get("seed") != seed \
            or not (out / "block-expected.parquet").is_file():
        shutil.rmtree(out / "block", ignore_errors=True)
        print(f"generating a block of {block_ops:,} synthetic operations ...", file=sys.stderr)
        t = time.perf_counter()
        meta = {**make_block(out / "block", block_ops, seed), "seed": seed}
        meta["generate_seconds"] = time.perf_counter() - t
        meta_file.write_text(json.dumps(meta))
    return meta


def cores(master: str) -> int:
    """Cores the job may use: local[*] all of the machine's, the cluster its two one-core workers."""
    return 2 if master.startswith("local-cluster") else (os.cpu_count() or 1)


def run_size(out: Path, meta: dict[str, Any], size: float, masters: list[str], args: argparse.Namespace) -> list[Any]:
    copies = max(1, round(size * MILLION / meta["operations"]))
    dataset, rows_dir = out / "dataset", out / "rows"
    make_dataset(out / "block", dataset, copies)
    operations = copies * meta["operations"]
    rows = []
    for master in masters:
        print(f"{operations:,} operations ({copies} block(s)): Spark {master} ...", file=sys.stderr, flush=True)
        result = measure(["--child", "spark", "--dataset", str(dataset), "--master", master, "--expected",
                          str(out / "block-expected.parquet"), "--rows", str(rows_dir)], args.timeout)
        if "seconds" in result:
            result["ops_per_core_second"] = round(operations / result["seconds"] / cores(master))
        print(f"  {json.dumps(result)}", file=sys.stderr, flush=True)
        rows.append({"millions": size, "operations": operations, "expected": copies * meta["expected"], **result})
        shutil.rmtree(rows_dir, ignore_errors=True)
    if size <= args.python_max:
        print("  single-process Python ...", file=sys.stderr, flush=True)
        result = measure(["--child", "python", "--dataset", str(dataset)], args.timeout)
        if "seconds" in result:
            result["ops_per_core_second"] = round(operations / result["seconds"])
        print(f"  {json.dumps(result)}", file=sys.stderr, flush=True)
        rows.append({"millions": size, "operations": operations, "expected": copies * meta["expected"],
                     "master": "single process", **result})
    shutil.rmtree(dataset)
    return rows


def time_reports(out: Path, run_dir: str, timeout: float) -> list[Any]:
    copy = out / "report-run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("report"))
    rows = []
    for engine in ("spark", "python"):
        print(f"ackspec report --engine {engine} over {run_dir} ...", file=sys.stderr, flush=True)
        result = measure(["--child", "report", "--dataset", str(copy), "--engine", engine,
                          "--rows", str(out / f"report-{engine}")], timeout)
        print(f"  {json.dumps(result)}", file=sys.stderr, flush=True)
        rows.append({"report": run_dir, **result})
    return rows


def figures(rows: list[Any]) -> list[dict[str, Any]]:
    series: dict[str, list[Any]] = {}
    for r in rows:
        if "seconds" in r and "millions" in r:
            series.setdefault(r.get("master") or r["engine"], []).append(r)
    found = []
    for name, points in series.items():
        found.append({"name": "history check time", "unit": "s", "x_label": "million operations",
                      "x": [p["millions"] for p in points], "y": [round(p["seconds"], 1) for p in points],
                      "series": name})
        found.append({"name": "history check driver peak RSS", "unit": "MiB", "x_label": "million operations",
                      "x": [p["millions"] for p in points], "y": [round(p["driver"] / 2**20) for p in points],
                      "series": name})
    return found


def table(rows: list[Any]) -> None:
    print("| operations | engine | check (s) | start-up (s) | check CPU (s) | all CPU (s) | ops/s per core "
          "| driver peak (MiB) "
          "| executor peak (MiB) | anomalies (injected) | missing / extra | load before -> after |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|:--:|:--:|")
    for r in rows:
        if "millions" not in r:
            continue
        mib = f"{r['executor'] / 2**20:.0f}" if r.get("executor") else "-"
        check = f"{r['seconds']:.1f}" if "seconds" in r else r.get("error", "?")
        startup = f"{r['startup']:.1f}" if "startup" in r else "-"
        verdict = f"{r.get('missing', '-')} / {r.get('extra', '-')}"
        load = r.get("load", {})
        check_cpu = f"{r['check_cpu']:.0f}" if "check_cpu" in r else "-"
        print(f"| {r['operations']:,} | {r.get('master', '')} | {check} | {startup} | {check_cpu} | {r['cpu']:.0f} "
              f"| {r.get('ops_per_core_second', 0):,} | {r['driver'] / 2**20:.0f} | {mib} "
              f"| {r.get('anomalies', '-')} ({r['expected']}) | {verdict} "
              f"| {load.get('before', ['?'])[0]} -> {load.get('after', ['?'])[0]} |")
    for r in rows:
        if "report" in r:
            print(f"\n`ackspec report --engine {r.get('engine', '?')}` over {r['report']}: "
                  f"{r.get('seconds', float('nan')):.1f} s wall, {r['cpu']:.0f} s CPU, load {r.get('load')}")


def main() -> int:
    args = parse()
    if args.child:
        print(json.dumps(run_child(args)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = block_meta(out, int(args.block * MILLION), args.seed)
    masters = [m for m in args.masters.split(";") if m]
    rows: list[Any] = []
    for size in [float(s) for s in args.sizes.split(",") if s]:
        rows.extend(run_size(out, meta, size, masters, args))
    if args.report_run:
        rows.extend(time_reports(out, args.report_run, args.timeout))
    (out / "bench.json").write_text(json.dumps({"schema": BENCH_SCHEMA, "figures": figures(rows), "rows": rows,
                                                "block": meta, "cpus": os.cpu_count()}, indent=1))
    table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
