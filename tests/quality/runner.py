"""Shared machinery of the quality tests: suite runs against mutant reference brokers.

Each run is ``ackspec run`` in a subprocess, restricted to the suite modules that can
see the bug, with short timeouts and no shrinking (only the verdicts matter). The
runs of one test module start together on a small pool (they mostly wait on sockets)
and each parametrized test waits for its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ackspec.conformance.config import NO_SHRINK_ENV

ROOT = Path(__file__).resolve().parents[2]

Verdicts = dict[str, set[str]]
"""verdict -> the requirements that got it in one run."""

Expected = Mapping[str, tuple[tuple[str, ...], frozenset[str]]]
"""mutant -> (suite modules to run, requirements of which at least one must fail)."""

WORKERS = int(os.environ.get("ACKSPEC_QUALITY_WORKERS", "3"))
"""Concurrent suite runs (each mostly waits on sockets and receive timeouts)."""


def run_suite(out: Path, only: list[str], mutant: str | None, target: str | None = None) -> Verdicts:
    """One ``ackspec run`` restricted to the ``--only`` patterns, against ``mutant`` (tests/quality/mutants.py)."""
    cmd = [sys.executable, "-m", "ackspec", "run", "--no-report", "--timeout", "1", "--examples", "4",
           "--out", str(out)]
    cmd += ["--target", target or "reference://embedded"]  # one target: the default run covers both protocols
    for pattern in only:
        cmd += ["--only", pattern]
    if mutant:
        cmd += ["--broker-parts", f"tests.quality.mutants:{mutant}"]
    env = {**os.environ, NO_SHRINK_ENV: "1"}  # the verdict is all we need: no shrinking
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env, cwd=ROOT)
    results = out / "results.json"
    assert results.exists(), f"no results ({proc.returncode}): {proc.stderr[-2000:]}"
    verdicts: Verdicts = {}
    for t in json.loads(results.read_text())["tests"]:
        verdicts.setdefault(t["verdict"], set()).add(t["requirement"])
    return verdicts


def start_runs(root: Path, clean_modules: tuple[str, ...], expected: Expected, *, pattern: str,
               target: str | None = None) -> Iterator[dict[str, Future[Verdicts]]]:
    """Start the clean run and one run per mutant (longest first); yield their futures, cancel leftovers.

    ``pattern`` turns a module name into an ``--only`` pattern, e.g. ``"{module}.py::*"``.
    """
    def only(modules: tuple[str, ...]) -> list[str]:
        return [pattern.format(module=m) for m in modules]

    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {"(clean)": pool.submit(run_suite, root / "clean", only(clean_modules), None, target)}
        for mutant in sorted(expected, key=lambda m: (-len(expected[m][0]), m)):
            futures[mutant] = pool.submit(run_suite, root / mutant, only(expected[mutant][0]), mutant, target)
        yield futures
        for f in futures.values():
            f.cancel()


def assert_caught(mutant: str, expected: Expected, verdicts: Verdicts, how: str = "") -> None:
    """At least one requirement the mutant breaks failed, and the suite itself did not break."""
    failed = verdicts.get("fail", set())
    wanted = sorted(expected[mutant][1])
    assert failed & expected[mutant][1], f"mutant {mutant} not caught{how} as {wanted}; failures: {sorted(failed)}"
    assert not verdicts.get("error"), f"suite errors under {mutant}: {sorted(verdicts['error'])}"
