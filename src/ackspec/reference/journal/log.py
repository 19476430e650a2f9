"""The journal file: length-prefixed, CRC-checked records, appended and fsync'd in groups.

File ``journal.dat`` in the data directory, starting with the 8-byte magic ``ACKJRNL1``;
then records, each ``u32 length | u32 crc32(payload) | payload``.

Replay reads records until the end; a record that is incomplete or whose CRC does not match
ends the valid prefix: it (and anything after it) is dropped, the file is truncated there,
and one warning line says so. A torn last record is what a crash during a write leaves;
a record is only ever confirmed after the fsync that covered it, so dropping it loses
nothing that was confirmed.

Writes go straight to the OS (``os.write``: survives a process crash); :meth:`Journal.sync`
makes them survive a machine crash. The server calls ``sync`` once for many appends (group
commit) from a worker thread.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ackspec.errors import AckspecError
from ackspec.reference.broker.records import Record
from ackspec.reference.journal.codec import decode_record, encode_record

log = logging.getLogger("ackspec.reference.journal")

MAGIC = b"ACKJRNL1"
FILE_NAME = "journal.dat"
_HEAD = struct.Struct(">II")
MAX_RECORD = 256 * 1024 * 1024


def _datasync(fd: int) -> None:
    """fdatasync where available: data plus the metadata needed to read it back (the file size)."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class JournalCorruption(AckspecError):
    """The journal cannot be used at all (e.g. wrong magic)."""


@dataclass(frozen=True)
class ReplayReport:
    records: int
    valid_bytes: int
    dropped_bytes: int
    reason: str = ""


class Journal:
    """One journal file. ``append`` and ``sync`` may be called from different threads."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
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

    # ------------------------------------------------------------ replay
    def replay(self) -> tuple[list[Record], ReplayReport]:
        """Read every valid record; truncate a torn or corrupt tail (logged)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AckspecError(f"cannot create data directory {self.directory}: {exc.strerror}") from None
        if not self.path.exists():
            return [], ReplayReport(0, 0, 0)
        data = self.path.read_bytes()
        if len(data) < len(MAGIC):
            if MAGIC.startswith(data):
                self._truncate(0)
                return [], ReplayReport(0, 0, len(data), "torn file header")
            raise JournalCorruption(f"{self.path} is not an ackspec journal")
        if data[: len(MAGIC)] != MAGIC:
            raise JournalCorruption(f"{self.path} is not an ackspec journal (bad magic)")
        pos = len(MAGIC)
        records: list[Record] = []
        reason = ""
        n = len(data)
        while pos < n:
            if pos + _HEAD.size > n:
                reason = "torn record header"
                break
            length, crc = _HEAD.unpack_from(data, pos)
            start = pos + _HEAD.size
            if length > MAX_RECORD or start + length > n:
                reason = "torn record (shorter than its length)"
                break
            payload = data[start : start + length]
            if zlib.crc32(payload) != crc:
                reason = "CRC mismatch"
                break
            try:
                records.append(decode_record(payload))
            except (ValueError, struct.error, UnicodeDecodeError) as exc:
                reason = f"undecodable record ({exc})"
                break
            pos = start + length
        dropped = n - pos
        if dropped:
            log.warning("journal %s: dropped %d byte(s) at offset %d: %s", self.path, dropped, pos, reason)
            self._truncate(pos)
        return records, ReplayReport(len(records), pos, dropped, reason)

    def _truncate(self, size: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    # ------------------------------------------------------------ append / sync
    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if fresh:
            os.write(self._fd, MAGIC)
            os.fsync(self._fd)
            self._fsync_dir()
        self.size = self.synced_size = os.fstat(self._fd).st_size

    def append(self, records: list[Record]) -> None:
        """Write records (one ``write`` call for the batch). Not yet durable: see :meth:`sync`."""
        if self._fd is None:
            raise RuntimeError("journal not open")
        parts: list[bytes] = []
        for r in records:
            payload = encode_record(r)
            parts.append(_HEAD.pack(len(payload), zlib.crc32(payload)))
            parts.append(payload)
        data = b"".join(parts)
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            self.size += len(data)
        self.records_written += len(records)

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
        """Compaction: atomically replace the file with ``records`` (write, fsync, rename)."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            for r in records:
                payload = encode_record(r)
                f.write(_HEAD.pack(len(payload), zlib.crc32(payload)))
                f.write(payload)
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
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
