"""Recording operations as they happen: the one way adapters write histories.

An adapter calls :meth:`Recorder.invoke` before it touches the system under test
and completes the returned :class:`Pending` exactly once with ``ok``, ``fail`` or
``info``. A pending operation that is never completed (the test crashed, the
process was killed) is completed as ``info`` when the recorder is closed, so a
history never claims more than was observed.

Recorders are thread-safe because client libraries call back on their own
threads (stomp.py's receiver thread, proton's reactor).
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import IO, Any

from ackspec.history.record import Op, Record, RecordType


class Recorder:
    """Appends :class:`Record` lines to a JSON-lines file and keeps them in memory."""

    def __init__(self, run: str, *, target: str | None = None, path: Path | None = None) -> None:
        self.run = run
        self.target = target
        self.test: str | None = None
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._records: list[Record] = []
        self._open: dict[int, Pending] = {}
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def invoke(self, op: Op, process: str, **fields: Any) -> Pending:
        record = self._append(RecordType.INVOKE, op, process, fields)
        pending = Pending(self, record)
        with self._lock:
            self._open[record.index] = pending
        return pending

    def event(self, op: Op, process: str, type: RecordType = RecordType.OK, **fields: Any) -> Record:
        """Record something that was observed without being invoked (a delivery pushed by the broker)."""
        return self._append(type, op, process, fields)

    def _append(self, type: RecordType, op: Op, process: str, fields: dict[str, Any]) -> Record:
        with self._lock:
            record = Record(
                run=self.run,
                index=next(self._counter),
                time_ns=time.monotonic_ns(),
                type=type,
                op=op,
                process=process,
                target=self.target,
                test=self.test,
                **fields,
            )
            self._records.append(record)
            if self._file is not None:
                self._file.write(record.to_json() + "\n")
            return record

    def _complete(self, pending: Pending, type: RecordType, fields: dict[str, Any]) -> Record:
        with self._lock:
            self._open.pop(pending.invoked.index, None)
        base = {
            k: getattr(pending.invoked, k)
            for k in ("session", "destination", "subscription", "producer", "seq", "ack_mode", "transaction",
                      "persistent", "message_id", "ack_id")
        }
        base.update(fields)
        return self._append(type, pending.invoked.op, pending.invoked.process, base)

    def close(self) -> None:
        """Complete every still-pending operation as indeterminate and flush the file."""
        with self._lock:
            leftovers = list(self._open.values())
        for pending in leftovers:
            pending.info(error="never completed: recorder closed")
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()


class Pending:
    """An invoked operation awaiting its one completion."""

    __slots__ = ("_done", "_recorder", "invoked")

    def __init__(self, recorder: Recorder, invoked: Record) -> None:
        self._recorder = recorder
        self.invoked = invoked
        self._done = False

    def _finish(self, type: RecordType, fields: dict[str, Any]) -> Record:
        if self._done:
            raise RuntimeError(f"operation {self.invoked.op} #{self.invoked.index} completed twice")
        self._done = True
        return self._recorder._complete(self, type, fields)

    def ok(self, **fields: Any) -> Record:
        return self._finish(RecordType.OK, fields)

    def fail(self, error: str, **fields: Any) -> Record:
        return self._finish(RecordType.FAIL, {"error": error, **fields})

    def info(self, error: str, **fields: Any) -> Record:
        return self._finish(RecordType.INFO, {"error": error, **fields})

    @property
    def done(self) -> bool:
        return self._done
