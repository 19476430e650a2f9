"""``benchmarks/pinned_pairs.py`` pins another broker's every thread for a paired run and gives each back its
former CPUs: a JVM broker left pinned to one CPU would slow every later run against it, unseen."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from .scripts import load_script

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs")

THREADED_CHILD = ("import threading, time\n"
                  "for _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                  "print('ready', flush=True); time.sleep(60)\n")




@pytest.fixture
def threaded_child() -> Iterator[int]:
    """A process with four threads, ready when it says so (within 30 s)."""
    child = subprocess.Popen([sys.executable, "-c", THREADED_CHILD], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        readable, _, _ = select.select([child.stdout], [], [], 30.0)
        assert readable and child.stdout.readline() == b"ready\n", "the child did not start its threads"
        yield child.pid
    finally:
        child.kill()
        child.wait(timeout=30)


def _affinities(module: ModuleType, pid: int) -> dict[int, set[int]]:
    return {tid: os.sched_getaffinity(tid) for tid in module.threads(pid)}


def test_every_thread_is_pinned_inside_and_given_back_its_cpus_after(threaded_child: int) -> None:
    module = load_script("pinned_pairs")
    cpus = sorted(os.sched_getaffinity(0))
    first_tid = module.threads(threaded_child)[1]
    os.sched_setaffinity(first_tid, {cpus[1]})  # one thread with its own placement, to be given back as it was
    before = _affinities(module, threaded_child)
    assert len(before) == 4
    with module.pinned_threads(threaded_child, {cpus[0]}):
        assert set(map(frozenset, _affinities(module, threaded_child).values())) == {frozenset({cpus[0]})}
    assert _affinities(module, threaded_child) == before


def test_same_shares_one_cpu_and_cross_keeps_client_and_brokers_apart() -> None:
    layout = load_script("pinned_pairs").placements([0, 1])
    same_brokers, same_client = layout["same"]
    cross_brokers, cross_client = layout["cross"]
    assert same_brokers == same_client and len(same_client) == 1
    assert not cross_brokers & cross_client and len(cross_brokers) == len(cross_client) == 1
