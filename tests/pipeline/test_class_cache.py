"""The class-data sharing archive of small Spark sessions: written once, adopted when its writer is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackspec.pipeline import class_cache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACKSPEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ACKSPEC_SPARK_CLASS_CACHE", raising=False)
    return tmp_path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def _settled(path: Path, size: int = 10) -> Path:
    path.write_bytes(b"x" * size)
    old = time.time() - class_cache.SETTLE_SECONDS - 5
    os.utime(path, (old, old))
    return path


def test_without_an_archive_this_jvm_writes_one_of_its_own(cache: Path) -> None:
    options = class_cache.java_options()
    final = class_cache.archive_path(cache)
    assert final is not None
    assert f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp" in options
    assert "-Xlog:cds*=off" in options


def test_an_archive_whose_writer_is_gone_is_adopted_and_mapped(cache: Path) -> None:
    final = class_cache.archive_path(cache)
    assert final is not None
    written = _settled(Path(f"{final}.{_dead_pid()}.tmp"))
    options = class_cache.java_options()
    assert final.is_file() and not written.exists()
    assert f"-XX:SharedArchiveFile={final}" in options and "ArchiveClassesAtExit" not in options


def test_an_archive_still_being_written_is_left_alone(cache: Path) -> None:
    final = class_cache.archive_path(cache)
    assert final is not None
    by_live_writer = _settled(Path(f"{final}.{os.getpid()}.tmp"))
    fresh = Path(f"{final}.{_dead_pid()}.tmp")
    fresh.write_bytes(b"x")  # its writer just exited: the JVM may still be writing it
    class_cache.adopt_finished(final)
    assert not final.exists() and by_live_writer.exists() and fresh.exists()


def test_an_empty_leftover_is_removed_not_adopted(cache: Path) -> None:
    final = class_cache.archive_path(cache)
    assert final is not None
    empty = _settled(Path(f"{final}.{_dead_pid()}.tmp"), size=0)
    class_cache.adopt_finished(final)
    assert not empty.exists() and not final.exists()


def test_turned_off_or_unwritable_it_adds_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACKSPEC_SPARK_CLASS_CACHE", "0")
    assert class_cache.java_options() == ""
    monkeypatch.delenv("ACKSPEC_SPARK_CLASS_CACHE")
    blocker = cache / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ACKSPEC_CACHE_DIR", str(blocker / "cache"))
    assert class_cache.java_options() == ""
