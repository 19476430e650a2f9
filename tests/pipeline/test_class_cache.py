"""The class-data sharing archive of small Spark sessions: written once, adopted when its writer is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ackspec.pipeline import class_cache, warmup


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


def test_without_an_archive_a_report_starts_plainly_and_has_it_written_later(cache: Path) -> None:
    assert class_cache.java_options() == ""  # a report's own JVM never pays for writing it
    assert class_cache.missing()


def test_the_writer_writes_one_of_its_own(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_cache.MODE_VARIABLE, "write")
    options = class_cache.java_options()
    final = class_cache.archive_path(cache)
    assert final is not None
    assert f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp" in options
    assert "-Xlog:cds*=off" in options
    assert not class_cache.missing()  # a writer never starts another writer


def test_an_archive_being_written_is_not_asked_for_again(cache: Path) -> None:
    final = class_cache.archive_path(cache)
    assert final is not None
    class_cache.writing_path(final, os.getpid()).write_bytes(b"x")  # a live writer
    assert not class_cache.missing()
    class_cache.writing_path(final, os.getpid()).unlink()
    assert class_cache.missing()


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
    assert not class_cache.missing()
    monkeypatch.delenv("ACKSPEC_SPARK_CLASS_CACHE")
    blocker = cache / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ACKSPEC_CACHE_DIR", str(blocker / "cache"))
    assert class_cache.java_options() == ""


@pytest.mark.timeout(900)  # a JVM start and one small job, on a loaded 2-core machine
def test_the_warm_up_writes_the_archive_a_session_then_maps(cache: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ackspec.pipeline.warmup"], capture_output=True, text=True,
                          timeout=warmup.TIMEOUT_SECONDS + 60, check=False)
    final = class_cache.archive_path(cache)
    assert final is not None
    assert done.returncode == 0, done.stderr[-2000:]
    assert "written" in done.stderr
    assert final.is_file() and final.stat().st_size > 10 * 2**20  # tens of thousands of classes
    assert list(cache.glob("*.tmp")) == []
    assert class_cache.java_options() == f"-XX:SharedArchiveFile={final} {class_cache.QUIET}"
    assert not class_cache.missing()
    again, what = warmup.write_archive()
    assert (again, what) == (final, f"present: {final}")
