"""A class-data sharing archive of the classes a small Spark session loads, so its JVM starts faster.

``ackspec report --engine spark`` over one suite run spends most of its time starting a JVM
and loading, verifying and linking tens of thousands of Spark classes, not checking
histories. The JVM can map classes it loaded before from a dynamic class-data sharing
archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` writes one when the JVM exits,
``-XX:SharedArchiveFile`` maps it). Measured on one suite run at load 15 (2 cores): the
session's start-up 5.3 -> 2.7 s of CPU, planning the read 3.6 -> 2.5 s, the check 5.8 -> 5.1 s.

The first small session of a machine writes the archive (under a name of its own, so two
processes never write the same file); a later one adopts it once its writer has exited, and
every one after maps it. It is keyed by the PySpark version and the Java binary: a Spark or
JDK upgrade makes a new one. An archive the JVM cannot use (another class path) is ignored
by the JVM itself (``-Xshare:auto``), never an error. ``ACKSPEC_SPARK_CLASS_CACHE=0`` turns
it off; ``ACKSPEC_CACHE_DIR`` moves it (default ``~/.cache/ackspec``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

QUIET = "-Xshare:auto -Xlog:cds*=off -Xlog:class+path=off"
"""Options of every use: map the archive if it fits, and say nothing on the user's terminal (writing
an archive lists every class it skips)."""

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


def java_options() -> str:
    """JVM options of a small local session: map the archive, or write one when this JVM exits."""
    if os.environ.get("ACKSPEC_SPARK_CLASS_CACHE", "1") == "0":
        return ""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        final = archive_path(directory)
        if final is None:
            return ""
        adopt_finished(final)
    except OSError:
        return ""  # no writable cache: start as without it
    if final.is_file():
        return f"-XX:SharedArchiveFile={final} {QUIET}"
    return f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp {QUIET}"
