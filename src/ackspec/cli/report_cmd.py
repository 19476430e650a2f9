"""``ackspec report RUN...``: the requirement traceability report of one or many runs.

    ackspec report ackspec-out/20261122T103200-ab12cd
    ackspec report 'ackspec-out/*' --out report/ --master spark://host:7077

RUN is a run directory (docs/run-directory.md) or a glob of them. Writes
report.html (self-contained), report.json, report.csv and anomalies.json to
--out (default: RUN/report for one run, ackspec-out/report for several), and the
allure environment/categories files into each RUN/allure-results/.
Exit status: 0 when the report was written, 2 on bad input (one line naming the file).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ackspec.results.layout import REPORT_DIR, resolve_run_dirs


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("report", help="build the traceability report of run directories",
                              description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory or glob (repeatable)")
    p.add_argument("--out", metavar="DIR", help="output directory")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*]); implies the Spark engine")
    p.add_argument("--engine", choices=("auto", "spark", "python"), default="auto",
                   help="history checker: auto (Spark for large inputs or with --master), spark, python")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ackspec.pipeline.report import build_report  # noqa: PLC0415 - keep `ackspec --help` free of Spark

    dirs = resolve_run_dirs(args.runs)
    out = Path(args.out) if args.out else (dirs[0].root / REPORT_DIR if len(dirs) == 1
                                           else Path("ackspec-out") / REPORT_DIR)
    summary = build_report(dirs, out, master=args.master, engine="spark" if args.master else args.engine)
    for line in summary.lines():
        print(line)
    return 0
