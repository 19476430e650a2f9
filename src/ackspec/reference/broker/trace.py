"""Requirement tracing: each state change of interest names the requirement it serves.

Like paho's test broker: ``tracer.trace("STOMP-ACK-CLIENT-CUMULATIVE")`` counts the ID
(coverage: which rules the reference broker exercised) and, when logging is on, writes
one log line. IDs are those of ``spec/catalogue/*.yaml``.
"""

from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger("ackspec.reference.trace")


class Tracer:
    """Counts requirement IDs; optionally logs each hit (``--trace``)."""

    def __init__(self, *, log_hits: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        self.log_hits = log_hits

    def trace(self, requirement_id: str, detail: str = "") -> None:
        self.counts[requirement_id] += 1
        if self.log_hits:
            log.info("%s %s", requirement_id, detail)

    def trace_many(self, requirement_id: str, hits: int, detail: str = "") -> None:
        """``hits`` hits of one ID at once: the same counts as ``hits`` calls of :meth:`trace` (and the same
        log lines when logging is on). Why: a batch of hundreds of acceptances pays one count, not one per
        message (~0.3 us each)."""
        if hits <= 0:
            return
        self.counts[requirement_id] += hits
        if self.log_hits:
            for _ in range(hits):
                log.info("%s %s", requirement_id, detail)

    def covered(self) -> set[str]:
        """Requirement IDs exercised so far."""
        return set(self.counts)


NULL_TRACER = Tracer()
