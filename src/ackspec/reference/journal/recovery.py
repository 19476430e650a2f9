"""Reading a journal that may be damaged: which records survive, where the damage is (sans-IO).

A crash during a write can only leave a *torn tail*: an unfinished record at the very end, with nothing
valid after it. Anything else (a bad record followed by good ones) is damage of the stored data: a flipped
bit, a zeroed block. :func:`scan` resynchronises after each damaged region by looking for the next offset
where a whole, checksummed, decodable record starts (and, in version 2, numbered above the last good one),
so the records after the damage are found rather than thrown away. What to do about the damage (refuse to
start, skip it, truncate) is the operator's choice and is made by :class:`~.log.Journal`, not here.

Resynchronisation could be fooled only by bytes inside a damaged region that happen to form a complete record
with a matching CRC (and, in version 2, a plausible number); a message body that embeds a forged record is
the one realistic way, and it would have to sit exactly in the damaged region. The operator who chooses
``skip-corrupt`` accepts that; the default refuses to start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ackspec.reference.broker.records import Record
from ackspec.reference.journal.framing import RECORD_TYPES, Framed, frame_size, read_at

_CANDIDATE = re.compile(b"[" + re.escape(RECORD_TYPES) + b"]")


@dataclass(frozen=True)
class Damage:
    """Bytes ``offset`` to ``end`` held no readable record; ``lost`` records were in them (None = unknown)."""

    offset: int
    end: int
    reason: str
    lost: int | None


@dataclass
class Scan:
    """What :func:`scan` found: the good records in order, damaged regions followed by good records, and a
    torn tail (damage running to the end of the file with nothing good after it)."""

    records: list[Framed] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    tail: Damage | None = None
    end: int = 0
    """Offset just after the last good record (where a truncation would cut)."""

    def prefix_before_damage(self) -> list[Framed]:
        """The good records that precede the first damaged region (what ``truncate`` keeps)."""
        if not self.damage:
            return self.records
        first = self.damage[0].offset
        return [f for f in self.records if f.end <= first]

    @property
    def record_values(self) -> list[Record]:
        return [f.record for f in self.records]


def scan(data: bytes, start: int, version: int) -> Scan:
    """Read every record from ``start``, resynchronising after damage (see the module docstring)."""
    result = Scan(end=start)
    pos = start
    last_number = 0
    while pos < len(data):
        got = read_at(data, pos, version)
        if isinstance(got, Framed) and (version == 1 or got.number > last_number):
            result.records.append(got)
            last_number = got.number
            pos = result.end = got.end
            continue
        reason = got.reason if not isinstance(got, Framed) else "record number out of order"
        following = _next_good(data, pos + 1, version, last_number)
        if following is None:
            result.tail = Damage(pos, len(data), reason, None)
            break
        lost = _lost_between(data, pos, following, version, last_number)
        result.damage.append(Damage(pos, following.offset, reason, lost))
        pos = following.offset
    return result


def _next_good(data: bytes, pos: int, version: int, last_number: int) -> Framed | None:
    """The first readable record whose frame starts at or after ``pos`` (numbered above ``last_number``)."""
    head = frame_size(version)
    for match in _CANDIDATE.finditer(data, pos + head):
        got = read_at(data, match.start() - head, version)
        if isinstance(got, Framed) and (version == 1 or got.number > last_number):
            return got
    return None


def _lost_between(data: bytes, pos: int, following: Framed, version: int, last_number: int) -> int | None:
    """How many records the damaged bytes ``pos``..``following.offset`` held.

    Version 2: exactly the gap in the record numbers. Version 1: by walking the length fields from ``pos``
    when they lead exactly to the next good record (damage inside payloads); None when a length itself was
    damaged (at least one record was lost, how many is unknown)."""
    if version == 2:
        return following.number - last_number - 1
    head = frame_size(version)
    count = 0
    while pos < following.offset:
        if pos + head > following.offset:
            return None
        length = int.from_bytes(data[pos : pos + 4], "big")
        pos += head + length
        count += 1
    return count if pos == following.offset else None
