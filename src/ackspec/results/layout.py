"""The run directory: where ``ackspec run`` writes and where ``ackspec report`` reads.

One run writes one directory (``--out``). This module is the executable definition of
its layout (documented in ``docs/run-directory.md``), so writer and reader cannot
disagree about a file name::

    RUN_DIR/
      results.json            ackspec.results/1 (ackspec.results.RunResults)
      histories/<test>.jsonl  one file per test, JSON lines of ackspec.history.Record
      histories.parquet/      optional: the same records as Parquet,
                              partitioned run=<run id>/target=<target>/
      client-logs/<test>.jsonl  a client-side run's evidence per test (client events, wire frames)
      junit.xml               JUnit XML of the pytest run
      allure-results/         allure-pytest output (+ environment.properties, categories.json
                              written by ``ackspec report``)
      bench.json              optional benchmark figures (see BENCH_SCHEMA)
      report/                 default output directory of ``ackspec report RUN_DIR``
"""

from __future__ import annotations

import glob
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ackspec.errors import AckspecError

RESULTS_FILE = "results.json"
HISTORIES_DIR = "histories"
HISTORY_SUFFIX = ".jsonl"
HISTORIES_PARQUET = "histories.parquet"
CLIENT_LOGS_DIR = "client-logs"
JUNIT_FILE = "junit.xml"
ALLURE_DIR = "allure-results"
BENCH_FILE = "bench.json"
REPORT_DIR = "report"

BENCH_SCHEMA = "ackspec.bench/1"
"""``bench.json``: ``{"schema": "ackspec.bench/1", "figures": [{"name": str, "unit": str,
"x": [numbers], "y": [numbers], "series": str | null}]}``; each figure becomes one plot."""

PARQUET_PARTITIONS = ("run", "target")
"""Partition columns of ``histories.parquet`` (Hive-style ``run=<id>/target=<target>``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def history_file_name(test: str) -> str:
    """File name for the history of one test: the pytest node id made safe for any file system.

    ``tests/conformance/test_ack.py::test_client[stomp-3]`` becomes
    ``tests_conformance_test_ack.py__test_client_stomp-3_.jsonl``. Names longer than
    180 characters are shortened with a stable hash suffix.
    """
    name = _UNSAFE.sub("_", test.replace("::", "__")).strip("_") or "history"
    if len(name) > 180:
        digest = hashlib.sha1(test.encode("utf-8")).hexdigest()[:12]
        name = f"{name[:160]}-{digest}"
    return name + HISTORY_SUFFIX


@dataclass(frozen=True, slots=True)
class RunDir:
    """Paths inside one run directory."""

    root: Path

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def histories(self) -> Path:
        return self.root / HISTORIES_DIR

    @property
    def histories_parquet(self) -> Path:
        return self.root / HISTORIES_PARQUET

    @property
    def junit(self) -> Path:
        return self.root / JUNIT_FILE

    @property
    def allure_results(self) -> Path:
        return self.root / ALLURE_DIR

    @property
    def bench(self) -> Path:
        return self.root / BENCH_FILE

    @property
    def report(self) -> Path:
        return self.root / REPORT_DIR

    def history_path(self, test: str) -> Path:
        return self.histories / history_file_name(test)

    @property
    def client_logs(self) -> Path:
        return self.root / CLIENT_LOGS_DIR

    def client_log_path(self, test: str) -> Path:
        """A client-side test's evidence: the client's events and what it wrote on the wire (JSON lines)."""
        return self.client_logs / history_file_name(test)

    def history_files(self) -> list[Path]:
        """The JSON-lines histories, sorted by name."""
        if not self.histories.is_dir():
            return []
        return sorted(p for p in self.histories.iterdir() if p.suffix == HISTORY_SUFFIX and p.is_file())

    def has_parquet(self) -> bool:
        return self.histories_parquet.is_dir()


def sub_runs(path: Path) -> list[Path]:
    """Run directories directly inside another one (a plain ``ackspec run`` puts its client-side run in
    ``RUN/client-reference/``): naming a run names them too."""
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []
    return [child for child in children if (child / RESULTS_FILE).is_file()]


def resolve_run_dirs(patterns: Iterable[str]) -> list[RunDir]:
    """Run directories named by paths or globs, with the sub-runs inside them; every name must match at
    least one directory.

    A pattern that matches nothing, or a directory without ``results.json``, is an
    :class:`AckspecError` naming it: a typo must not shrink a report silently.
    """
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise AckspecError(f"{pattern}: no run directory matches this pattern")
        for match in matches:
            path = Path(match)
            if not path.exists():
                raise AckspecError(f"{path}: no such run directory")
            if not path.is_dir():
                raise AckspecError(f"{path}: not a directory (expected a run directory with {RESULTS_FILE})")
            runs = ([path] if (path / RESULTS_FILE).is_file() else []) + sub_runs(path)
            if not runs:
                if glob.has_magic(pattern):
                    continue  # a glob may sweep up unrelated folders; named paths may not
                raise AckspecError(f"{path}: not a run directory (no {RESULTS_FILE})")
            found.extend(runs)
    unique: list[RunDir] = []
    seen: set[Path] = set()
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(RunDir(path))
    if not unique:
        raise AckspecError(f"no run directory (with {RESULTS_FILE}) among: {' '.join(patterns)}")
    return unique
