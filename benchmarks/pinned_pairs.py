"""Paired bench runs with the client and both brokers on fixed CPUs, each placement in turn.

Why this exists. On a 2-vCPU virtual machine a receipt round trip is dominated by waking the other side: a
wake-up across the two vCPUs costs more than the broker's whole work per message. Unpinned, the scheduler
decides per run (and sometimes mid-run) whether the bench client and the broker share a vCPU, so the
receipt-each rate of *both* brokers is bimodal (docs/benchmark.md, "2026-11-27 12:36-13:42 UTC") and a paired
run that mixes the two modes resolves nothing. Pinning puts both targets under the same placement for the
whole run, so the ratio compares the brokers, not the scheduler's choices:

* ``same``: the client and both brokers on one CPU (every wake-up stays on it);
* ``cross``: both brokers on one CPU, the client on another (every round trip crosses).

The other broker (default ActiveMQ 5.17, started with ``brokers/start.sh activemq``) is pinned thread by thread
(what ``taskset -a`` does) and given back its former CPUs afterwards; the reference broker is started here,
pinned, and stopped afterwards. The measuring itself is ``ackspec bench --paired`` unchanged.

    python benchmarks/pinned_pairs.py                                   # both placements, 40 pairs each
    python benchmarks/pinned_pairs.py --placements cross --pairs 60 --scenarios send-receipt-each

Linux only (``sched_setaffinity``, ``/proc``); needs at least two CPUs. Prints one line per placement and row
and writes each run's ``bench-paired.json`` and ``bench.log`` (the bench's progress) under ``--out/PLACEMENT``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ackspec.bench.client import Endpoint
from ackspec.bench.targets import free_port, stop_child, wait_ready
from ackspec.errors import AckspecError

REPO = Path(__file__).resolve().parents[1]
READY_SECONDS = 30.0
RUN_SECONDS = 900
"""Bound on one ``ackspec bench --paired`` run: a stalled broker ends the script, not the machine's day."""


def placements(cpus: list[int]) -> dict[str, tuple[set[int], set[int]]]:
    """Placement name -> (the brokers' CPUs, the client's CPUs), from the CPUs this process may use."""
    first, second = cpus[0], cpus[1]
    return {"same": ({second}, {second}), "cross": ({first}, {second})}


def pid_of(broker: str) -> int:
    """The pid ``brokers/start.sh`` recorded for ``broker``."""
    home = Path(os.environ.get("ACKSPEC_BROKERS_HOME", REPO / ".brokers"))
    pid_file = home / "run" / broker / "broker.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"pinned_pairs: {broker} is not running ({pid_file}: {exc}); "
                         f"start it with: bash brokers/start.sh {broker}") from exc
    return pid


def threads(pid: int) -> list[int]:
    return [int(task) for task in os.listdir(f"/proc/{pid}/task")]


@contextlib.contextmanager
def pinned_threads(pid: int, cpus: set[int]) -> Iterator[None]:
    """Every thread of ``pid`` on ``cpus`` while inside; each thread's former CPUs restored on exit."""
    before: dict[int, set[int]] = {}
    try:
        for tid in threads(pid):
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                before[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
        yield
    finally:
        everywhere = os.sched_getaffinity(0)
        for tid in threads(pid):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, before.get(tid, everywhere))


@contextlib.contextmanager
def reference_broker(cpus: set[int]) -> Iterator[str]:
    """``ackspec broker`` on a free loopback port, pinned to ``cpus``; yields its bench target spec (labelled
    ``ref``: the bench's own ``reference`` would start an unpinned broker)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="ackspec-pinned-") as data, (Path(data) / "log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ackspec", "broker", "--stomp", f"127.0.0.1:{port}", "--data", f"{data}/d"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            os.sched_setaffinity(process.pid, cpus)  # at once, before the broker starts any thread
            wait_ready(Endpoint("127.0.0.1", port), process, READY_SECONDS)
            yield f"ref=stomp://127.0.0.1:{port}"
        finally:
            stop_child(process)


def paired_run(target: str, other: str, client_cpus: set[int], args: argparse.Namespace,
               out: Path) -> dict[str, Any]:
    """One ``ackspec bench --paired`` run with the client on ``client_cpus``; its bench-paired.json."""
    cmd = [sys.executable, "-m", "ackspec", "bench", "--paired", str(args.block), "--pairs", str(args.pairs),
           "--targets", f"{target},{other}", "--scenarios", args.scenarios, "--out", str(out)]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "bench.log").open("wb") as log, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT) as bench:
        try:
            os.sched_setaffinity(bench.pid, client_cpus)  # at once, before it connects to anything
            code = bench.wait(timeout=RUN_SECONDS)
        finally:
            if bench.poll() is None:
                stop_child(bench)
    if code != 0:
        raise AckspecError(f"ackspec bench exited with code {code} (its output: {out / 'bench.log'})")
    report: dict[str, Any] = json.loads((out / "bench-paired.json").read_text())
    return report


def summary(placement: str, report: dict[str, Any]) -> list[str]:
    lines = []
    for row in report["rows"]:
        if row.get("error"):
            lines.append(f"{placement:6} {row['scenario']:18} error: {row['error']}")
            continue
        iv, rates = row["interval"], row["median_rates"]
        lines.append(f"{placement:6} {row['scenario']:18} {rates[0]:>9,.0f} / {rates[1]:>9,.0f} msg/s  "
                     f"median {iv['median']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}] "
                     f"({iv['coverage']:.1%})  {row['verdict']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", default="activemq", help="the broker (a brokers/ name) the reference is paired with")
    p.add_argument("--placements", default="same,cross", help="comma-separated: same, cross")
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--block", type=int, default=4000)
    p.add_argument("--scenarios", default="send-receipt-each,persistent-1")
    p.add_argument("--out", type=Path, default=Path("ackspec-out/bench-pinned"))
    args = p.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("pinned_pairs: needs at least two CPUs (this process may use one)")
    layout = placements(cpus)
    wanted = [name.strip() for name in args.placements.split(",") if name.strip()]
    if unknown := [name for name in wanted if name not in layout]:
        raise SystemExit(f"pinned_pairs: unknown placement {', '.join(unknown)} (known: {', '.join(layout)})")
    other_pid = pid_of(args.other)
    try:
        run_placements(wanted, layout, other_pid, args)
    except (AckspecError, subprocess.SubprocessError) as exc:
        raise SystemExit(f"pinned_pairs: {exc}") from exc
    return 0


def run_placements(wanted: list[str], layout: dict[str, tuple[set[int], set[int]]], other_pid: int,
                   args: argparse.Namespace) -> None:
    for name in wanted:
        broker_cpus, client_cpus = layout[name]
        with pinned_threads(other_pid, broker_cpus), reference_broker(broker_cpus) as target:
            report = paired_run(target, args.other, client_cpus, args, args.out / name)
        print("\n".join(summary(name, report)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
