"""Damage in the middle of the journal is never dropped silently (issue 20).

Property: after a flipped byte or a zeroed 4 KiB block anywhere in the file, every record that the damage did
not touch is either kept (``skip-corrupt``), or counted as lost with the original set aside (``truncate``),
or the journal refuses to be read with the file unchanged (default). Only a torn tail (damage with nothing
valid after it) is cut without the operator's say, and that is logged.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ackspec.reference.broker import Message, Removed, Stored
from ackspec.reference.broker.records import Record
from ackspec.reference.journal import Journal, JournalCorruption, encode_record
from ackspec.reference.journal.framing import MAGIC_V1, MAGIC_V2, RECORD_TYPES, frame, frame_size

from .test_journal import records as journal_records

N_RECORDS = 60


def _records() -> list[Record]:
    out: list[Record] = []
    for i in range(N_RECORDS):
        out.append(Stored(Message(f"m{i}", "/queue/a", b"body-%d-" % i + b"x" * (i * 7 % 200), (("k", "v"),),
                                  True, "p", i)))
        if i % 3 == 2:
            out.append(Removed(f"m{i - 1}"))
    return out


def _write(directory: Path, records: list[Record], version: int) -> tuple[bytes, list[tuple[int, int]]]:
    """A journal file of ``records``; returns its bytes and each record's (start, end) offsets."""
    magic = MAGIC_V1 if version == 1 else MAGIC_V2
    data = bytearray(magic)
    spans = []
    for number, record in enumerate(records, start=1):
        start = len(data)
        data += frame(encode_record(record), version, number)
        spans.append((start, len(data)))
    (directory / "journal.dat").write_bytes(bytes(data))
    return bytes(data), spans


def _damage(data: bytes, offset: int, kind: str) -> bytes:
    damaged = bytearray(data)
    if kind == "flip":
        damaged[offset] ^= 0x5A
    else:
        end = min(len(damaged), offset + 4096)
        damaged[offset:end] = bytes(end - offset)
    return bytes(damaged)


def _touched(spans: list[tuple[int, int]], data: bytes, damaged: bytes) -> set[int]:
    """The records whose bytes the damage changed (zeroing bytes that were zero changes nothing)."""
    return {i for i, (s, e) in enumerate(spans) if data[s:e] != damaged[s:e]}


damage_cases = st.tuples(st.sampled_from(["flip", "zero-4k"]), st.floats(0, 0.999), st.sampled_from([1, 2]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage_cases)
def test_damage_is_refused_kept_or_counted_never_silently_dropped(
        tmp_path_factory: pytest.TempPathFactory, case: tuple[str, float, int]) -> None:
    kind, where, version = case
    records = _records()
    base = tmp_path_factory.mktemp("j")
    data, spans = _write(base, records, version)
    offset = len(MAGIC_V2) + int(where * (len(data) - len(MAGIC_V2)))
    damaged = _damage(data, offset, kind)
    touched = _touched(spans, data, damaged)
    first = min(touched)
    untouched_after = [i for i in range(first, len(records)) if i not in touched]
    path = base / "journal.dat"
    path.write_bytes(damaged)

    if not untouched_after:  # the damage reaches the end: a torn tail, cut (and logged)
        got, report = Journal(base).replay()
        assert got == records[:first]
        assert report.dropped_bytes == len(damaged) - spans[first][0]
        return

    with pytest.raises(JournalCorruption) as refused:
        Journal(base).replay()
    assert "\n" not in str(refused.value) and "--recover" in str(refused.value)
    assert path.read_bytes() == damaged  # refusing changes nothing

    got, report = Journal(base, recover="skip-corrupt").replay()
    assert got == [r for i, r in enumerate(records) if i not in touched]
    assert report.set_aside is not None and report.set_aside.read_bytes() == damaged
    if version == 2:
        assert report.lost_records == len(touched)
    assert Journal(base).replay()[0] == got  # rewritten clean: the next start needs no choice

    path.write_bytes(damaged)
    got, report = Journal(base, recover="truncate").replay()
    assert got == records[:first]
    if version == 2:
        assert report.lost_records == len(records) - first


def test_flip_ten_percent_in_keeps_every_later_record_with_skip_corrupt(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's case: one flipped byte 10% into the journal no longer loses everything after it."""
    records = _records()
    data, spans = _write(tmp_path, records, 2)
    offset = len(data) // 10
    (tmp_path / "journal.dat").write_bytes(_damage(data, offset, "flip"))
    with caplog.at_level(logging.WARNING, logger="ackspec.reference.journal"):
        got, report = Journal(tmp_path, recover="skip-corrupt").replay()
    lost = _touched(spans, data, _damage(data, offset, "flip"))
    assert len(lost) == 1 and report.lost_records == 1
    assert got == [r for i, r in enumerate(records) if i not in lost]
    assert "1 record(s) lost" in caplog.text and "WARNING" in caplog.text.upper()


def test_version_1_journal_still_replays_and_appends(tmp_path: Path) -> None:
    records = _records()[:5]
    _write(tmp_path, records, 1)
    j = Journal(tmp_path)
    assert j.replay()[0] == records
    j.open()
    j.append([Removed("m0")])
    j.close()
    assert (tmp_path / "journal.dat").read_bytes().startswith(MAGIC_V1)
    assert Journal(tmp_path).replay()[0] == [*records, Removed("m0")]


def test_record_numbers_continue_across_reopen(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.replay()
    j.open()
    j.append(_records()[:3])
    j.close()
    j2 = Journal(tmp_path)
    j2.replay()
    j2.open()
    j2.append([Removed("m1")])
    j2.close()
    data = (tmp_path / "journal.dat").read_bytes()
    head = frame_size(2)
    pos, numbers = len(MAGIC_V2), []
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        numbers.append(int.from_bytes(data[pos + 8:pos + 16], "big"))
        pos += head + length
    assert numbers == [1, 2, 3, 4]


def test_broker_refuses_to_start_on_damage_with_one_line(tmp_path: Path) -> None:
    data, spans = _write(tmp_path, _records(), 2)
    (tmp_path / "journal.dat").write_bytes(_damage(data, spans[3][0] + 20, "flip"))
    proc = subprocess.run([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--data",
                           str(tmp_path)], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ackspec: journal ") and "--recover skip-corrupt" in last
    assert "Traceback" not in proc.stderr


def test_unknown_recovery_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown journal recovery"):
        Journal(tmp_path, recover="hope")


@given(journal_records)
def test_resynchronisation_knows_every_record_type(record: Record) -> None:
    """Resynchronisation only tries offsets whose payload starts with a known type byte: a new record type
    must be added to ``framing.RECORD_TYPES`` or records after damage of that type would be missed."""
    assert encode_record(record)[:1] in [bytes([t]) for t in RECORD_TYPES]
