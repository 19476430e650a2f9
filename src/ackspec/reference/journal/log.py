"""The journal file: checksummed, numbered records, appended and fsync'd in groups.

File ``journal.dat`` in the data directory; the record framing (two versions, so old journals stay
readable) is in :mod:`.framing`.

Replay reads every record. A torn *tail* (an unfinished record at the end with nothing valid after it) is
what a crash during a write leaves; a record is only ever confirmed after the fsync that covered it, so
dropping it loses nothing that was confirmed: the file is cut there and one WARNING line says so. Damage
*in the middle* (a bad record followed by good ones) is never dropped silently: by default replay refuses
(:class:`JournalCorruption`, one line naming the choices), and the operator may choose ``skip-corrupt``
(keep every good record, resynchronising after each damaged region: :mod:`.recovery`) or ``truncate`` (keep
only what precedes the damage). Before either, the original file is copied aside
(``journal.dat.damaged-<UTC time>``) and every lost record is counted in a WARNING line.

Writes go straight to the OS (``os.pwrite``: survives a process crash); :meth:`Journal.sync`
makes them survive a machine crash. The server calls ``sync`` once for many appends (group
commit) from a worker thread.

The file is preallocated ahead of the records (``PREALLOCATE_BYTES`` at a time, as ActiveMQ's KahaDB
preallocates its journal files), and records are written into that space. Why: an ``fdatasync`` after an
append that grows the file must also commit the new file size through the file system's own journal,
which is shared with every other writer on the disk; inside preallocated space it need not. On the
project's machine a 210-byte write + ``fdatasync`` took 0.11 ms median in preallocated space against 0.15
ms appended (docs/benchmark.md), and the persistent single-producer bench row waits for one per message.
A clean :meth:`Journal.close` cuts the unused space off again. After an unclean stop the file ends in
zeros, which is expected, not damage: replay cuts them and says so in one INFO line (and in its report),
not a WARNING, so an operator's warnings stay for real damage. A tail holding anything but zeros (a torn
record, even one followed by the unused zeros) still gets the WARNING line. A block of confirmed records
zeroed by damage at the very end would look like unused space; the INFO line, which names the byte count
and offset, is what keeps even that cut from being silent.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ackspec.errors import AckspecError
from ackspec.reference.broker.records import Record
from ackspec.reference.journal.codec import encode_record
from ackspec.reference.journal.framing import MAGIC_V2, MAGICS, frame
from ackspec.reference.journal.recovery import Damage, Scan, scan

log = logging.getLogger("ackspec.reference.journal")

MAGIC = MAGIC_V2
FILE_NAME = "journal.dat"
RECOVERY_MODES = ("refuse", "skip-corrupt", "truncate")
"""What replay does about damage in the middle of the journal (see the module docstring)."""
PREALLOCATE_BYTES = 4 * 1024 * 1024
"""How far ahead of the records the file is allocated (see the module docstring)."""


def _preallocate(fd: int, start: int, length: int) -> bool:
    """Allocate ``length`` bytes of ``fd`` from ``start`` (zeros when read); False where that is not possible."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is None:
        return False
    try:
        fallocate(fd, start, length)
    except OSError:  # a file system without it, or no room: the records' own writes report a full disk
        return False
    return True


def _datasync(fd: int) -> None:
    """fdatasync where available: data plus the metadata needed to read it back (the file size)."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class JournalCorruption(AckspecError):
    """The journal cannot be used as it is (wrong magic, or damage the operator has not chosen how to handle)."""


@dataclass(frozen=True)
class ReplayReport:
    records: int
    valid_bytes: int
    dropped_bytes: int
    reason: str = ""
    damaged_regions: int = 0
    """Damaged regions in the middle of the file that the chosen recovery dealt with."""
    lost_records: int | None = 0
    """Records lost to those regions (and, with ``truncate``, the good records after the first); None when a
    version-1 journal's damage hid how many."""
    set_aside: Path | None = None
    """The copy of the original file made before recovering."""


def _sum_lost(regions: list[Damage]) -> int | None:
    total = 0
    for region in regions:
        if region.lost is None:
            return None
        total += region.lost
    return total


def _lost_text(lost: int | None) -> str:
    return "an unknown number of records (at least 1)" if lost is None else f"{lost} record(s)"


class Journal:
    """One journal file. ``append`` and ``sync`` may be called from different threads."""

    def __init__(self, directory: str | Path, *, recover: str = "refuse") -> None:
        if recover not in RECOVERY_MODES:
            raise ValueError(f"unknown journal recovery {recover!r} (one of {', '.join(RECOVERY_MODES)})")
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.recover = recover
        self.version = 2
        """Framing of the records appended: the existing file's (see :mod:`.framing`), 2 for a new one."""
        self.next_number = 1
        self._fd: int | None = None
        self._lock = threading.Lock()
        self.records_written = 0
        self.syncs = 0
        """fsync calls so far (group commit makes this much smaller than the confirms it released)."""
        self.size = 0
        """Bytes of the file written to the OS (records end at this offset)."""
        self.synced_size = 0
        """Bytes of the file an fsync covered: what a power loss keeps (see :meth:`lose_unsynced`)."""
        self.sync_delay = 0.0
        """Test hook: seconds each :meth:`sync` waits before its fsync (a slow disk)."""
        self.allocated = 0
        """Bytes of the file allocated for records (:data:`PREALLOCATE_BYTES` ahead of :attr:`size`)."""
        self._preallocating = True
        """False once the file system refused to preallocate: records are then plain appends."""

    # ------------------------------------------------------------ replay
    def replay(self) -> tuple[list[Record], ReplayReport]:
        """Read every valid record; cut a torn tail (logged); handle damage as ``recover`` says."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AckspecError(f"cannot create data directory {self.directory}: {exc.strerror}") from None
        if not self.path.exists():
            return [], ReplayReport(0, 0, 0)
        data = self.path.read_bytes()
        magic = data[: len(MAGIC)]
        if len(data) < len(MAGIC) and any(m.startswith(data) for m in MAGICS):
            self._truncate(0)
            return [], ReplayReport(0, 0, len(data), "torn file header")
        if magic not in MAGICS:
            raise JournalCorruption(f"{self.path} is not an ackspec journal (bad magic)")
        self.version = MAGICS[magic]
        found = scan(data, len(MAGIC), self.version)
        if found.damage:
            return self._recover(data, found)
        return self._finish(found, data)

    def _finish(self, found: Scan, data: bytes) -> tuple[list[Record], ReplayReport]:
        """Cut a torn tail and report (no damage in the middle, or it was rewritten away)."""
        tail, size = found.tail, len(data)
        dropped, reason = 0, ""
        if tail is not None:
            dropped, reason = size - tail.offset, tail.reason
            if data.count(0, tail.offset) == dropped:
                reason = "zero bytes: preallocated space after an unclean stop, or a zeroed block"
                log.info("journal %s: cut %d byte(s) of unused preallocated space (zeros) after the last record, "
                         "at offset %d", self.path, dropped, tail.offset)
            else:
                log.warning("journal %s: dropped %d byte(s) of a torn tail at offset %d: %s",
                            self.path, dropped, tail.offset, reason)
            self._truncate(tail.offset)
        if found.records:
            self.next_number = found.records[-1].number + 1
        return found.record_values, ReplayReport(len(found.records), found.end, dropped, reason)

    def _recover(self, data: bytes, found: Scan) -> tuple[list[Record], ReplayReport]:
        first = found.damage[0]
        if self.recover == "refuse":
            after = sum(1 for f in found.records if f.offset >= first.end)
            raise JournalCorruption(
                f"journal {self.path} is damaged in the middle ({len(found.damage)} region(s), the first at byte "
                f"{first.offset}: {first.reason}; {after} good record(s) after it): refusing to start; the file is "
                "unchanged: choose --recover skip-corrupt (keep every good record) or --recover truncate (keep "
                "what precedes the damage)")
        aside = self._set_aside()
        if self.recover == "truncate":
            return self._truncate_at_damage(data, found, aside)
        for region in found.damage:
            log.warning("journal %s: skipped %d damaged byte(s) at offset %d (%s): %s lost",
                        self.path, region.end - region.offset, region.offset, region.reason, _lost_text(region.lost))
        lost_total = _sum_lost(found.damage)
        log.warning("journal %s: kept %d good record(s), lost %s in %d damaged region(s); the original is at %s",
                    self.path, len(found.records), _lost_text(lost_total), len(found.damage), aside)
        values = found.record_values
        dropped = len(data) - found.end if found.tail is not None else 0
        self.rewrite(values)
        return values, ReplayReport(len(values), found.end, dropped, found.damage[0].reason, len(found.damage),
                                    lost_total, aside)

    def _truncate_at_damage(self, data: bytes, found: Scan, aside: Path) -> tuple[list[Record], ReplayReport]:
        """``--recover truncate``: keep what precedes the first damage; count everything after it as lost."""
        first = found.damage[0]
        kept = found.prefix_before_damage()
        after = len(found.records) - len(kept)
        in_damage = _sum_lost(found.damage)
        lost = None if in_damage is None else in_damage + after
        log.warning("journal %s: truncating at byte %d (%s): %s lost, %d of them good records after the damage "
                    "(discarded as chosen); the original is at %s", self.path, first.offset, first.reason,
                    _lost_text(lost), after, aside)
        self._truncate(first.offset)
        self.next_number = kept[-1].number + 1 if kept else 1
        return [f.record for f in kept], ReplayReport(len(kept), first.offset, len(data) - first.offset,
                                                      first.reason, len(found.damage), lost, aside)

    def _set_aside(self) -> Path:
        """Copy the damaged file next to it (fsync'd) before changing anything."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"{FILE_NAME}.damaged-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{FILE_NAME}.damaged-{stamp}-{n}")
        shutil.copyfile(self.path, target)
        with open(target, "rb") as f:
            os.fsync(f.fileno())
        self._fsync_dir()
        return target

    def _truncate(self, size: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    # ------------------------------------------------------------ append / sync
    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        if fresh:
            self.version, self.next_number = 2, 1
            os.pwrite(self._fd, MAGIC, 0)
            os.fsync(self._fd)
            self._fsync_dir()
        self.size = self.synced_size = self.allocated = os.fstat(self._fd).st_size

    def append(self, records: list[Record]) -> None:
        """Write records (one ``write`` call for the batch). Not yet durable: see :meth:`sync`."""
        if self._fd is None:
            raise RuntimeError("journal not open")
        data = self._frames(records)
        with self._lock:
            fd, end = self._fd, self.size + len(data)
            if end > self.allocated:
                ahead = end + PREALLOCATE_BYTES
                self._preallocating = self._preallocating and _preallocate(fd, self.allocated, ahead - self.allocated)
                self.allocated = ahead if self._preallocating else end
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, self.size)
                view = view[written:]
                self.size += written
        self.records_written += len(records)

    def _frames(self, records: list[Record]) -> bytes:
        """Encode and frame ``records``, numbering them on from :attr:`next_number`."""
        version, number = self.version, self.next_number
        parts = [frame(encode_record(r), version, number + i) for i, r in enumerate(records)]
        self.next_number = number + len(records)
        return b"".join(parts)

    def sync(self) -> None:
        """fsync: every record appended before this call is durable when it returns."""
        fd = self._fd
        if fd is not None:
            covered = self.size
            if self.sync_delay > 0:
                time.sleep(self.sync_delay)
            _datasync(fd)
            self.syncs += 1
            self.synced_size = max(self.synced_size, covered)

    def lose_unsynced(self, synced_size: int | None = None) -> int:
        """Simulate a power loss on a closed journal: cut the file to ``synced_size`` (default: what the
        last fsync covered), dropping every write no fsync covered. Returns the bytes lost."""
        keep = self.synced_size if synced_size is None else synced_size
        if self._fd is not None or not self.path.exists():
            return 0
        lost = max(0, self.path.stat().st_size - keep)
        if lost:
            self._truncate(keep)
        return lost

    def rewrite(self, records: list[Record]) -> None:
        """Compaction (and recovery): atomically replace the file with ``records`` (write, fsync, rename),
        in the current format, numbered from 1."""
        tmp = self.path.with_suffix(".tmp")
        self.version, self.next_number = 2, 1
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(self._frames(records))
            f.flush()
            os.fsync(f.fileno())
        was_open = self._fd is not None
        self.close()
        os.replace(tmp, self.path)
        self._fsync_dir()
        if was_open:
            self.open()

    def _fsync_dir(self) -> None:
        try:
            dfd = os.open(self.directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def close(self) -> None:
        """Close the file, cutting off the preallocated space no record reached."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if self.allocated > self.size:
                    os.ftruncate(fd, self.size)
            finally:
                os.close(fd)
