"""A class-data sharing archive of the classes a small Spark session loads, so its JVM starts faster.

``ackspec report --engine spark`` over one suite run spends most of its time starting a JVM
and loading, verifying and linking tens of thousands of Spark classes, not checking
histories. The JVM can map classes it loaded before from a dynamic class-data sharing
archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` writes one when the JVM exits,
``-XX:SharedArchiveFile`` maps it), which roughly halves the CPU of a small session's start-up
(figures in docs/pipeline-benchmark.md).

The archive is written off a user's critical path: by ``python -m ackspec.pipeline.warmup``
(the install script runs it, so a machine's first report maps it), or, when a small session
finds none, by that command started in the background once the report's process ends (a
report's own JVM never writes it: dumping the classes costs it CPU and time). A writer writes
under a name of its own (``ACKSPEC_SPARK_CLASS_CACHE=write`` asks for it), so two processes never
write the same file; the archive is adopted once its writer has exited, and every session
after maps it. It is keyed by the PySpark version and the Java binary: a Spark or JDK upgrade
makes a new one. An archive the JVM cannot use (another class path) is ignored by the JVM
itself (``-Xshare:auto``), never an error. ``ACKSPEC_SPARK_CLASS_CACHE=0`` turns it off;
``ACKSPEC_CACHE_DIR`` moves it (default ``~/.cache/ackspec``).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

QUIET = "-Xshare:auto -Xlog:cds*=off -Xlog:class+path=off"
"""Options of every use: map the archive if it fits, and say nothing on the user's terminal (writing
an archive lists every class it skips)."""

MODE_VARIABLE = "ACKSPEC_SPARK_CLASS_CACHE"

SETTLE_SECONDS = 30.0
"""How long an archive must have been left alone, its writer gone, before another process adopts it:
the JVM writes it while exiting, after the Python process that started it may have ended."""


def cache_dir() -> Path:
    configured = os.environ.get("ACKSPEC_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ackspec"


def _java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found else None


def archive_path(directory: Path) -> Path | None:
    """Where the archive of this PySpark and this Java lives (``None``: no Java found)."""
    import pyspark  # noqa: PLC0415 - only where a session is made

    java = _java_binary()
    if java is None or not java.is_file():
        return None
    stat = java.stat()
    key = hashlib.sha256(f"{pyspark.__version__}|{java}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return directory / f"spark-{pyspark.__version__}-{key[:12]}.jsa"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def adopt_finished(final: Path) -> None:
    """Rename an archive another process finished writing to ``final``; drop empty leftovers."""
    for written in sorted(final.parent.glob(f"{final.name}.*.tmp")):
        try:
            pid = int(written.name.removeprefix(f"{final.name}.").removesuffix(".tmp"))
            stat = written.stat()
        except (ValueError, OSError):
            continue
        if _alive(pid) or time.time() - stat.st_mtime < SETTLE_SECONDS:
            continue
        try:
            if stat.st_size > 0 and not final.exists():
                os.replace(written, final)
            else:
                written.unlink()
        except OSError:
            continue


def _mode() -> str:
    """``1`` (map the archive, have it written later if missing), ``0`` (off) or ``write`` (this JVM writes it)."""
    return os.environ.get(MODE_VARIABLE, "1")


def _final() -> Path | None:
    """The archive's path after adopting a finished one; ``None`` when off or there is no Java or no cache."""
    if _mode() == "0":
        return None
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        final = archive_path(directory)
        if final is not None:
            adopt_finished(final)
    except OSError:
        return None  # no writable cache: start as without it
    return final


def java_options() -> str:
    """JVM options of a small local session: map the archive; in ``write`` mode, write one when this JVM exits."""
    final = _final()
    if final is None:
        return ""
    if final.is_file():
        return f"-XX:SharedArchiveFile={final} {QUIET}"
    if _mode() == "write":
        return f"-XX:ArchiveClassesAtExit={writing_path(final, os.getpid())} {QUIET}"
    return ""


def writing_path(final: Path, pid: int) -> Path:
    """Where the JVM of process ``pid`` writes the archive, until it is adopted as ``final``."""
    return Path(f"{final}.{pid}.tmp")


def missing() -> bool:
    """Whether the archive should be written: on, not present, and nobody writing it now."""
    if _mode() != "1":
        return False
    final = _final()
    if final is None or final.is_file():
        return False
    for written in final.parent.glob(f"{final.name}.*.tmp"):
        pid = written.name.removeprefix(f"{final.name}.").removesuffix(".tmp")
        if pid.isdigit() and _alive(int(pid)):
            return False
    return True


def write_in_background() -> None:
    """Once this process ends, start ``python -m ackspec.pipeline.warmup`` detached (at low priority) to write
    the archive, so this process's report is not slowed by it and the next one maps it."""
    if _mode() == "1":
        _register_writer()


@functools.cache
def _register_writer() -> None:
    """Once per process."""
    atexit.register(_spawn_writer)


def _spawn_writer() -> None:
    command = [sys.executable, "-m", "ackspec.pipeline.warmup", "--quiet"]
    nice = shutil.which("nice")
    try:
        subprocess.Popen([nice, "-n", "10", *command] if nice else command, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return  # the next report tries again
