"""Benchmark of the history checks: Spark (local) vs the single-process Python checker.

    python benchmarks/pipeline_bench.py                      # 1, 10, 30 million operations
    python benchmarks/pipeline_bench.py --sizes 1 --python-max 1 --out ackspec-out/bench-pipeline

Data: synthetic histories (ackspec.pipeline.synthetic, about 30% of tests with one
injected anomaly) written once as a Parquet block of ``--block`` million operations
(partitioned run=/target= like a run directory's histories.parquet). Larger sizes
are made of copies of the block under different ``run=`` partitions (hard links):
every copy is a separate set of histories for the checks, so the work is the same as
for fresh data, but the generator does not have to run for minutes.

Each measurement runs in a fresh child process; the parent polls the resident memory
(/proc) of the child and all its descendants (the Spark JVM) and reports the peak.
Spark time excludes the JVM start-up (reported separately); Python time includes
reading the Parquet into records. Results go to ``--out``/bench.json (ackspec.bench/1,
so ``ackspec report`` plots them) and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
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

from ackspec.pipeline.checks_python import check_histories
from ackspec.pipeline.checks_spark import check_dataframe
from ackspec.pipeline.layout import BENCH_SCHEMA
from ackspec.pipeline.schema import COLUMNS, arrow_schema, read_parquet, records_to_arrow, row_to_record
from ackspec.pipeline.session import get_session
from ackspec.pipeline.synthetic import generate_suite

MILLION = 1_000_000


def make_block(path: Path, operations: int, seed: int) -> dict[str, int]:
    """Write one block of synthetic histories; returns counts (operations, tests, expected anomalies)."""
    folder = path / "run=bench-000" / "target=synthetic"
    folder.mkdir(parents=True, exist_ok=True)
    keep = [name for name, _ in COLUMNS if name not in ("run", "target")]
    schema = pa.schema([arrow_schema().field(name) for name in keep])
    written = tests = expected = 0
    batch: list[Any] = []
    part = 0
    for history in generate_suite(10**9, seed, anomaly_rate=0.3, run="bench-000", target="synthetic"):
        batch.extend(history.records)
        tests += 1
        expected += len(history.expected)
        written += len(history.records)
        if len(batch) >= 500_000 or written >= operations:
            table = records_to_arrow(batch).select(keep).cast(schema)
            pq.write_table(table, folder / f"part-{part:04d}.parquet")
            part += 1
            batch = []
            print(f"  generated {written:,} operations", file=sys.stderr, flush=True)
        if written >= operations:
            break
    return {"operations": written, "tests": tests, "expected": expected}


def make_dataset(block: Path, out: Path, copies: int) -> None:
    if out.exists():
        shutil.rmtree(out)
    for copy in range(copies):
        target = out / f"run=bench-{copy:03d}" / "target=synthetic"
        target.mkdir(parents=True)
        for file in (block / "run=bench-000" / "target=synthetic").glob("*.parquet"):
            os.link(file, target / file.name)


def rss_tree(pid: int) -> int:
    """Resident bytes of a process and its descendants (Linux /proc)."""
    total = 0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
        stack.extend(children.get(current, []))
    return total


def measure(args: list[str], timeout: float) -> dict[str, Any]:
    """Run this script as a child in ``--child`` mode; poll its memory; return its JSON result."""
    load_before = os.getloadavg()
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_tree(process.pid))
            time.sleep(0.2)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        done.set()
        return {"error": f"timed out after {timeout:.0f} s", "peak_rss": peak}
    done.set()
    thread.join()
    if process.returncode != 0:
        return {"error": f"exit {process.returncode}", "peak_rss": peak}
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["peak_rss"] = peak
    # the machine is shared: the 1/5/15-minute load averages before and after, to report with the figure
    result["load"] = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]}
    return result


def digest(anomalies: Any) -> str:
    """A stable fingerprint of a list of anomalies (Python's hash() is salted per process)."""
    text = json.dumps([a.to_dict() for a in sorted(anomalies)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def child_spark(dataset: str, master: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    spark = get_session(master)
    spark.range(1).count()
    startup = time.perf_counter() - t0
    t1 = time.perf_counter()
    df = read_parquet(spark, Path(dataset))
    result = check_dataframe(df).collect()
    seconds = time.perf_counter() - t1
    by_kind = {str(k): v for k, v in result.by_kind().items()}
    return {"engine": "spark", "seconds": seconds, "startup": startup, "anomalies": len(result.anomalies),
            "by_kind": by_kind, "indeterminate": result.sends.indeterminate,
            "digest": digest(result.anomalies)}


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
    by_kind = {str(k): v for k, v in result.by_kind().items()}
    return {"engine": "python", "seconds": seconds, "read": read, "anomalies": len(result.anomalies),
            "by_kind": by_kind, "indeterminate": result.sends.indeterminate,
            "digest": digest(result.anomalies)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1,10,30", help="millions of operations (comma separated)")
    parser.add_argument("--block", type=float, default=1.0, help="millions of operations per generated block")
    parser.add_argument("--python-max", type=float, default=1.0,
                        help="largest size (millions) the single-process checker is run on")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--out", default="ackspec-out/bench-pipeline")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", choices=("spark", "python"), help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child_spark(args.dataset, args.master) if args.child == "spark" else child_python(args.dataset)
        print(json.dumps(result))
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    block = out / "block"
    meta_file = out / "block.json"
    block_ops = int(args.block * MILLION)
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    if meta.get("operations", 0) < block_ops or meta.get("seed") != args.seed:
        shutil.rmtree(block, ignore_errors=True)
        print(f"generating a block of {block_ops:,} synthetic operations ...", file=sys.stderr)
        t = time.perf_counter()
        meta = {**make_block(block, block_ops, args.seed), "seed": args.seed}
        meta["generate_seconds"] = time.perf_counter() - t
        meta_file.write_text(json.dumps(meta))
    rows = []
    for size in [float(s) for s in args.sizes.split(",")]:
        copies = max(1, round(size * MILLION / meta["operations"]))
        dataset = out / "dataset"
        make_dataset(block, dataset, copies)
        operations = copies * meta["operations"]
        print(f"{operations:,} operations ({copies} block(s)): Spark {args.master} ...", file=sys.stderr, flush=True)
        spark = measure(["--child", "spark", "--dataset", str(dataset), "--master", args.master], args.timeout)
        row: dict[str, Any] = {"millions": size, "operations": operations, "spark": spark,
                               "expected_anomalies": copies * meta["expected"]}
        print(f"  spark: {json.dumps(spark)}", file=sys.stderr, flush=True)
        if size <= args.python_max:
            print("  single-process Python ...", file=sys.stderr, flush=True)
            row["python"] = measure(["--child", "python", "--dataset", str(dataset)], args.timeout)
            print(f"  python: {json.dumps(row['python'])}", file=sys.stderr, flush=True)
        rows.append(row)
        shutil.rmtree(dataset)
    figures = [
        {"name": "history check time", "unit": "s", "x_label": "million operations",
         "x": [r["millions"] for r in rows if "seconds" in r["spark"]],
         "y": [round(r["spark"]["seconds"], 1) for r in rows if "seconds" in r["spark"]], "series": "spark local"},
        {"name": "history check peak RSS", "unit": "MiB", "x_label": "million operations",
         "x": [r["millions"] for r in rows], "y": [round(r["spark"]["peak_rss"] / 2**20) for r in rows],
         "series": "spark local (driver + JVM)"},
    ]
    python_rows = [r for r in rows if "python" in r and "seconds" in r["python"]]
    if python_rows:
        figures.append({"name": "history check time", "unit": "s", "x_label": "million operations",
                        "x": [r["millions"] for r in python_rows],
                        "y": [round(r["python"]["seconds"], 1) for r in python_rows], "series": "python"})
        figures.append({"name": "history check peak RSS", "unit": "MiB", "x_label": "million operations",
                        "x": [r["millions"] for r in python_rows],
                        "y": [round(r["python"]["peak_rss"] / 2**20) for r in python_rows], "series": "python"})
    (out / "bench.json").write_text(json.dumps({"schema": BENCH_SCHEMA, "figures": figures, "rows": rows,
                                                "block": meta, "master": args.master}, indent=1))
    print("| operations | Spark check (s) | Spark start-up (s) | Spark peak RSS (MiB) | Python (s) "
          "| Python peak RSS (MiB) | anomalies (expected) | agree |")
    print("|---:|---:|---:|---:|---:|---:|---:|:--:|")
    for r in rows:
        s, p = r["spark"], r.get("python", {})
        agree = "" if "digest" not in p or "digest" not in s else ("yes" if p["digest"] == s["digest"] else "NO")
        print(f"| {r['operations']:,} | {s.get('seconds', float('nan')):.1f} | {s.get('startup', float('nan')):.1f} "
              f"| {s['peak_rss'] / 2**20:.0f} | {p.get('seconds', float('nan')):.1f} "
              f"| {p.get('peak_rss', 0) / 2**20:.0f} | {s.get('anomalies', s.get('error'))} "
              f"({r['expected_anomalies']}) | {agree} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
