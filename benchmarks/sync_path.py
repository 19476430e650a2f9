"""What a persistent SEND's receipt waits for besides the broker's logic: the sync, and the hand-over to it.

Why this exists. The persistent single-producer bench row waits for one ``fdatasync`` per message (ActiveMQ
5.17 syncs once per message too), and on the project's shared machine its wall clock spreads 0.3-3x with the
others' disk I/O, so a change to the sync path cannot be judged from ``ackspec bench`` alone. Three
measurements, each interleaved so that A and B see the same moments of the machine:

* ``files``: a record-sized write + ``fdatasync`` into three files on the journal's file system in turn,
  appended (the file grows: the sync must also commit the new size through the file system's journal),
  into ``posix_fallocate``d space and into zeros written beforehand (neither grows the file);
* ``journal``: the reference journal itself, :meth:`Journal.append` of one record + :meth:`Journal.sync`, in
  a fresh child process per round, alternating ``--baseline`` (an older checkout's ``src``) and this one;
* ``handoff``: the loop -> sync thread -> loop round trip with nothing in between, on uvloop, through a
  ``ThreadPoolExecutor`` (what the server uses) and through a bare thread and a ``queue.SimpleQueue``.

    python benchmarks/sync_path.py files --rounds 1500 --dir /tmp
    mkdir -p /tmp/base && git archive cbf0f59^ src | tar -x -C /tmp/base
    python benchmarks/sync_path.py journal --baseline /tmp/base --rounds 8
    python benchmarks/sync_path.py handoff
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
RECORD = b"x" * 210
"""About one persistent-1 record (a 100-byte body, its headers and frame)."""
SPACE = 8 * 1024 * 1024


def _percentiles(times: list[float]) -> str:
    times = sorted(times)
    n = len(times)
    return (f"median {times[n // 2] * 1e3:.3f} ms, p90 {times[n * 9 // 10] * 1e3:.3f} ms, "
            f"mean {statistics.mean(times) * 1e3:.3f} ms")


def _open(path: Path, kind: str) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if kind == "zeros":
        os.write(fd, bytes(SPACE))
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_SET)
    elif kind == "fallocated":
        os.posix_fallocate(fd, 0, SPACE)
        os.fsync(fd)
    return fd


def files(rounds: int, directory: Path) -> None:
    kinds = ("appended", "fallocated", "zeros")
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        fds = {kind: _open(Path(tmp) / kind, kind) for kind in kinds}
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        try:
            for _ in range(rounds):
                for kind, fd in fds.items():
                    os.write(fd, RECORD)
                    t0 = time.perf_counter()
                    os.fdatasync(fd)
                    times[kind].append(time.perf_counter() - t0)
        finally:
            for fd in fds.values():
                os.close(fd)
    for kind in kinds:
        print(f"{kind:<11} write {len(RECORD)} B + fdatasync: {_percentiles(times[kind])}")


JOURNAL_CHILD = r"""
import json, sys, tempfile, time
from ackspec.reference.broker import Message, Stored
from ackspec.reference.journal import Journal
n, directory = int(sys.argv[1]), sys.argv[2]
times = []
with tempfile.TemporaryDirectory(dir=directory) as d:
    j = Journal(d)
    j.replay()
    j.open()
    for i in range(n):
        record = [Stored(Message(f"m{i}", "/queue/a", b"0123456789" * 10, (), True, "p", i))]
        t0 = time.perf_counter()
        j.append(record)
        j.sync()
        times.append(time.perf_counter() - t0)
    j.close()
print(json.dumps(sorted(times)[len(times) // 2]))
"""


def journal(baseline: Path, rounds: int, messages: int, directory: Path) -> None:
    sides = {"A (baseline)": baseline / "src", "B (this checkout)": HERE / "src"}
    medians: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(rounds):
        for side, src in sides.items():
            out = subprocess.run([sys.executable, "-c", JOURNAL_CHILD, str(messages), str(directory)],
                                 env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True,
                                 check=True, timeout=600).stdout
            medians[side].append(json.loads(out))
    for side, values in medians.items():
        print(f"{side:<18} append + sync, median of the rounds' medians: {statistics.median(values) * 1e3:.3f} ms")
    a, b = medians.values()
    print("B/A per round:", " ".join(f"{y / x:.2f}" for x, y in zip(a, b, strict=True)))


async def _round_trips(n: int, start: Callable[[Callable[[], None]], None]) -> float:
    """Seconds of process CPU per loop -> thread -> loop round trip, ``start(done)`` beginning one."""
    done = asyncio.Event()
    count = 0

    def back() -> None:
        nonlocal count
        count += 1
        if count < n:
            start(back)
        else:
            done.set()

    t0 = time.process_time()
    start(back)
    await asyncio.wait_for(done.wait(), 120)
    return (time.process_time() - t0) / n


async def _via_executor(n: int) -> float:
    loop, executor = asyncio.get_running_loop(), ThreadPoolExecutor(1)

    def start(back: Callable[[], None]) -> None:
        fut: Future[None] = executor.submit(lambda: None)
        fut.add_done_callback(lambda _f: loop.call_soon_threadsafe(back))

    try:
        return await _round_trips(n, start)
    finally:
        executor.shutdown()


async def _via_thread(n: int) -> float:
    loop, work = asyncio.get_running_loop(), queue.SimpleQueue[Callable[[], None] | None]()

    def run() -> None:
        while (back := work.get()) is not None:
            loop.call_soon_threadsafe(back)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        return await _round_trips(n, work.put)
    finally:
        work.put(None)
        thread.join(10)


def handoff(rounds: int, messages: int) -> None:
    from ackspec.reference.server import new_event_loop  # noqa: PLC0415 (the package only for this mode)

    results: dict[str, list[float]] = {"ThreadPoolExecutor": [], "bare thread + SimpleQueue": []}
    for _ in range(rounds):
        for name, way in (("ThreadPoolExecutor", _via_executor), ("bare thread + SimpleQueue", _via_thread)):
            loop = new_event_loop("uvloop")
            try:
                results[name].append(loop.run_until_complete(way(messages)))
            finally:
                loop.close()
    for name, values in results.items():
        print(f"{name:<26} CPU per round trip, median of {rounds}: {statistics.median(values) * 1e6:.1f} us")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("files", "journal", "handoff"))
    p.add_argument("--rounds", type=int, default=None, help="files: writes per file (1500); journal, handoff: "
                   "alternating rounds (8, 3)")
    p.add_argument("--messages", type=int, default=None, help="journal: records per round (500); handoff: round "
                   "trips per round (5000)")
    p.add_argument("--baseline", type=Path, help="journal: an older checkout (its src/): side A")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                   help="files, journal: a directory on the file system to measure (default the temp dir)")
    args = p.parse_args()
    print(f"sync_path {args.what}: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    if args.what == "files":
        files(args.rounds or 1500, args.dir)
    elif args.what == "journal":
        if args.baseline is None:
            p.error("journal needs --baseline PATH (an older checkout)")
        journal(args.baseline, args.rounds or 8, args.messages or 500, args.dir)
    else:
        handoff(args.rounds or 3, args.messages or 5000)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
